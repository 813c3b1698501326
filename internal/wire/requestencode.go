package wire

import (
	"math"
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/types/known/structpb"

	pb "github.com/protobase/protobase/gen/protobase/v1"
)

// The Go client sends unary reads one at a time by the ten thousand a
// second: a Get of one key, a Query by key. The generated marshaller
// spent a few hundred nanoseconds on each; these encoders write the same
// bytes (TestEncodeEdges, TestEncodersFieldByField, FuzzEncodeGetRequest,
// FuzzEncodeQueryRequest) for the shapes clients send, and refuse
// anything else in their Size functions, which sends it to the generated
// code.

// SizeGetRequest is the encoded size of m; ok is false when m has a shape
// AppendGetRequest does not cover: key records, a key that is not one
// number, string or bool, a string that is not UTF-8. The Go client
// encodes its Get requests with it; their keys are its own messages and
// carry no unknown fields.
func SizeGetRequest(m *pb.GetRequest) (size int, ok bool) {
	if len(m.KeyRecords) > 0 || !utf8.ValidString(m.Type) || len(m.ProtoReflect().GetUnknown()) > 0 {
		return 0, false
	}
	n := sizeBytesField(len(m.Type))
	for _, k := range m.Keys {
		s, ok := sizeKey(k)
		if !ok {
			return 0, false
		}
		n += 1 + protowire.SizeBytes(s)
	}
	if m.Versions {
		n += 2
	}
	return n, true
}

// sizeKey is the encoded size of a key of one number, string or bool (or
// none: an empty message).
func sizeKey(k *structpb.Value) (int, bool) {
	switch v := k.GetKind().(type) {
	case nil:
		return 0, k != nil
	case *structpb.Value_NumberValue:
		return 1 + 8, true
	case *structpb.Value_StringValue:
		return 1 + protowire.SizeBytes(len(v.StringValue)), utf8.ValidString(v.StringValue)
	case *structpb.Value_BoolValue:
		return 2, true
	}
	return 0, false
}

// AppendGetRequest appends m, which SizeGetRequest accepted.
func AppendGetRequest(b []byte, m *pb.GetRequest) []byte {
	b = appendStringField(b, GetRequestType, m.Type)
	for _, k := range m.Keys {
		s, _ := sizeKey(k)
		b = protowire.AppendTag(b, GetRequestKeys, protowire.BytesType)
		b = protowire.AppendVarint(b, uint64(s))
		switch v := k.GetKind().(type) {
		case *structpb.Value_NumberValue:
			b = protowire.AppendTag(b, JSONNumber, protowire.Fixed64Type)
			b = protowire.AppendFixed64(b, math.Float64bits(v.NumberValue))
		case *structpb.Value_StringValue:
			b = protowire.AppendTag(b, JSONString, protowire.BytesType)
			b = protowire.AppendString(b, v.StringValue)
		case *structpb.Value_BoolValue:
			b = protowire.AppendTag(b, JSONBool, protowire.VarintType)
			b = protowire.AppendVarint(b, protowire.EncodeBool(v.BoolValue))
		}
	}
	if m.Versions {
		b = protowire.AppendTag(b, GetRequestVersions, protowire.VarintType)
		b = protowire.AppendVarint(b, 1)
	}
	return b
}

// QuerySizes are the encoded sizes of a QueryRequest's messages, from
// SizeQueryRequest for AppendQueryRequest.
type QuerySizes struct{ request, query, where, cmp, value int }

// Size is the encoded size of the request.
func (s QuerySizes) Size() int { return s.request }

// SizeQueryRequest is the encoded size of m; ok is false when m has a
// shape AppendQueryRequest does not cover: a query other than one
// comparison with one operand (an order, a filter, an aggregate, and/or/
// not, a list of values), a string that is not UTF-8, unknown fields. The
// Go client encodes its Query requests with it.
func SizeQueryRequest(m *pb.QueryRequest) (s QuerySizes, ok bool) {
	if !utf8.ValidString(m.PageToken) || len(m.ProtoReflect().GetUnknown()) > 0 {
		return s, false
	}
	if q := m.Query; q != nil {
		if !sizeQuery(q, &s) {
			return s, false
		}
		s.request = 1 + protowire.SizeBytes(s.query)
	}
	s.request += sizeVarintField(uint64(m.PageSize)) + sizeBytesField(len(m.PageToken))
	return s, true
}

func sizeQuery(q *pb.Query, s *QuerySizes) bool {
	if q.Order != nil || q.Filter != "" || q.Aggregate != nil || !utf8.ValidString(q.Type) || len(q.ProtoReflect().GetUnknown()) > 0 {
		return false
	}
	n := sizeBytesField(len(q.Type)) + sizeVarintField(q.Limit)
	for _, b := range []bool{q.KeysOnly, q.Explain, q.Count, q.Versions} {
		if b {
			n += 2
		}
	}
	if w := q.Where; w != nil {
		if len(w.ProtoReflect().GetUnknown()) > 0 {
			return false
		}
		switch e := w.Expr.(type) {
		case nil:
			s.where = 0
		case *pb.Expr_Cmp:
			if !sizeCmp(e.Cmp, s) {
				return false
			}
			s.where = 1 + protowire.SizeBytes(s.cmp)
		default:
			return false
		}
		n += 1 + protowire.SizeBytes(s.where)
	}
	s.query = n
	return true
}

func sizeCmp(c *pb.Comparison, s *QuerySizes) bool {
	if c == nil || len(c.Values) > 0 || !utf8.ValidString(c.Field) || len(c.ProtoReflect().GetUnknown()) > 0 {
		return false
	}
	s.cmp = sizeBytesField(len(c.Field)) + sizeVarintField(uint64(c.Op)) //nolint:gosec // an enum is sign-extended on the wire, as here
	if v := c.Value; v != nil {
		var ok bool
		if s.value, ok = sizeValue(v); !ok {
			return false
		}
		s.cmp += 1 + protowire.SizeBytes(s.value)
	}
	return true
}

// sizeValue is the encoded size of a query operand.
func sizeValue(v *pb.Value) (int, bool) {
	if len(v.ProtoReflect().GetUnknown()) > 0 {
		return 0, false
	}
	switch k := v.Kind.(type) {
	case nil:
		return 0, true
	case *pb.Value_Int:
		return 1 + protowire.SizeVarint(uint64(k.Int)), true //nolint:gosec // int64 is sign-extended on the wire, as here
	case *pb.Value_Uint:
		return 1 + protowire.SizeVarint(k.Uint), true
	case *pb.Value_Double:
		return 1 + 8, true
	case *pb.Value_Bool:
		return 2, true
	case *pb.Value_String_:
		return 1 + protowire.SizeBytes(len(k.String_)), utf8.ValidString(k.String_)
	case *pb.Value_Bytes:
		return 1 + protowire.SizeBytes(len(k.Bytes)), true
	case *pb.Value_Enum:
		return 1 + protowire.SizeBytes(len(k.Enum)), utf8.ValidString(k.Enum)
	}
	return 0, false
}

// AppendQueryRequest appends m, whose sizes SizeQueryRequest gave.
func AppendQueryRequest(b []byte, m *pb.QueryRequest, s QuerySizes) []byte {
	if q := m.Query; q != nil {
		b = protowire.AppendTag(b, QueryRequestQuery, protowire.BytesType)
		b = protowire.AppendVarint(b, uint64(s.query))
		b = appendQuery(b, q, s)
	}
	b = appendVarintField(b, QueryRequestPageSize, uint64(m.PageSize))
	return appendStringField(b, QueryRequestPageToken, m.PageToken)
}

func appendQuery(b []byte, q *pb.Query, s QuerySizes) []byte {
	b = appendStringField(b, QueryType, q.Type)
	if w := q.Where; w != nil {
		b = protowire.AppendTag(b, QueryWhere, protowire.BytesType)
		b = protowire.AppendVarint(b, uint64(s.where))
	}
	if c := q.GetWhere().GetCmp(); c != nil {
		b = protowire.AppendTag(b, ExprCmp, protowire.BytesType)
		b = protowire.AppendVarint(b, uint64(s.cmp))
		b = appendStringField(b, ComparisonField, c.Field)
		b = appendVarintField(b, ComparisonOp, uint64(c.Op)) //nolint:gosec // sign-extended, as protobuf writes an enum
		if v := c.Value; v != nil {
			b = protowire.AppendTag(b, ComparisonValue, protowire.BytesType)
			b = protowire.AppendVarint(b, uint64(s.value))
			b = appendValue(b, v)
		}
	}
	b = appendVarintField(b, QueryLimit, q.Limit)
	b = appendBoolField(b, QueryKeysOnly, q.KeysOnly)
	b = appendBoolField(b, QueryExplain, q.Explain)
	b = appendBoolField(b, QueryCount, q.Count)
	return appendBoolField(b, QueryVersions, q.Versions)
}

func appendBoolField(b []byte, num protowire.Number, v bool) []byte {
	if !v {
		return b
	}
	return protowire.AppendVarint(protowire.AppendTag(b, num, protowire.VarintType), 1)
}

// appendValue appends a query operand's field: a member of a oneof is
// written even when it holds its type's zero.
func appendValue(b []byte, v *pb.Value) []byte {
	switch k := v.Kind.(type) {
	case *pb.Value_Int:
		b = protowire.AppendVarint(protowire.AppendTag(b, ValueInt, protowire.VarintType), uint64(k.Int)) //nolint:gosec // sign-extended, as protobuf writes an int64
	case *pb.Value_Uint:
		b = protowire.AppendVarint(protowire.AppendTag(b, ValueUint, protowire.VarintType), k.Uint)
	case *pb.Value_Double:
		b = protowire.AppendFixed64(protowire.AppendTag(b, ValueDouble, protowire.Fixed64Type), math.Float64bits(k.Double))
	case *pb.Value_Bool:
		b = protowire.AppendVarint(protowire.AppendTag(b, ValueBool, protowire.VarintType), protowire.EncodeBool(k.Bool))
	case *pb.Value_String_:
		b = protowire.AppendString(protowire.AppendTag(b, ValueString, protowire.BytesType), k.String_)
	case *pb.Value_Bytes:
		b = protowire.AppendBytes(protowire.AppendTag(b, ValueBytes, protowire.BytesType), k.Bytes)
	case *pb.Value_Enum:
		b = protowire.AppendString(protowire.AppendTag(b, ValueEnum, protowire.BytesType), k.Enum)
	}
	return b
}
