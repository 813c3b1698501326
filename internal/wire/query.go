package wire

import (
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protowire"
)

// Query is a Query message of the common shape, read from its wire bytes
// by ReadQuery without decoding a message: a type, at most one comparison
// of one scalar operand, and the query's flags. Its byte slices point into
// the bytes read. Two readers of requests share it: the engine keys
// lookups straight from it, and the gRPC codec builds the messages of
// every other request from it.
type Query struct {
	Type  []byte
	Where bool // a where field was read; Cmp holds it
	Cmp   Comparison
	Limit uint64

	KeysOnly, Explain, Count, Versions bool

	// Where the operand lies in the query's bytes: its Value's content is
	// ValueLen bytes, followed by AfterValue bytes of the comparison and
	// AfterWhere bytes of the query. A query that differs from another
	// only in an operand of the same length differs only there.
	ValueLen, AfterValue, AfterWhere int
}

// Comparison is a Comparison of one scalar operand.
type Comparison struct {
	Field    []byte
	Op       int32
	HasValue bool // a value field was read; Value holds it
	Value    Operand
}

// Operand is a Value holding one scalar: Num names the Value's field
// (ValueInt, ValueUint, ValueBool: X holds it; ValueString, ValueBytes: S
// does).
type Operand struct {
	Num protowire.Number
	X   uint64
	S   []byte
}

// The tag of an int64 operand, the one most lookups carry.
const tagValueInt = byte(ValueInt)<<3 | byte(protowire.VarintType)

// ReadQuery reads Query bytes b into q and reports whether they have the
// common shape: every field at most once and well formed, strings valid
// UTF-8, no order, filter or other field, a where of one comparison of
// one scalar operand (or none). For such bytes proto.Unmarshal would
// succeed and find what q holds; anything else (false) is for the
// generated decoder, which gives it the error or the meaning it has.
func ReadQuery(b []byte, q *Query) bool {
	*q = Query{}
	var seen uint16
	for len(b) > 0 {
		num, typ, l := nextTag(b, QueryVersions, &seen)
		if l < 0 {
			return false
		}
		b = b[l:]
		var m int
		switch {
		case num == QueryType && typ == protowire.BytesType:
			q.Type, m = protowire.ConsumeBytes(b)
			if m >= 0 && !utf8.Valid(q.Type) {
				return false
			}
		case num == QueryWhere && typ == protowire.BytesType:
			var eb []byte
			if eb, m = protowire.ConsumeBytes(b); m >= 0 && !readWhere(eb, q) {
				return false
			}
			q.AfterWhere, q.Where = len(b)-m, true
		case typ == protowire.VarintType && (num == QueryLimit || num == QueryKeysOnly || num == QueryExplain || num == QueryCount || num == QueryVersions):
			var x uint64
			x, m = protowire.ConsumeVarint(b)
			switch num {
			case QueryLimit:
				q.Limit = x
			case QueryKeysOnly:
				q.KeysOnly = x != 0
			case QueryExplain:
				q.Explain = x != 0
			case QueryCount:
				q.Count = x != 0
			case QueryVersions:
				q.Versions = x != 0
			}
		default:
			return false // order, or a field in the wrong wire type
		}
		if m < 0 {
			return false
		}
		b = b[m:]
	}
	return true
}

// readWhere reads an Expr holding one comparison into q.Cmp.
func readWhere(b []byte, q *Query) bool {
	num, typ, l := protowire.ConsumeTag(b)
	if l < 0 || num != ExprCmp || typ != protowire.BytesType {
		return false
	}
	cb, m := protowire.ConsumeBytes(b[l:])
	if m < 0 || l+m != len(b) {
		return false
	}
	c := &q.Cmp
	var seen uint16
	for len(cb) > 0 {
		num, typ, l := nextTag(cb, ComparisonValue, &seen)
		if l < 0 {
			return false
		}
		cb = cb[l:]
		var m int
		switch {
		case num == ComparisonField && typ == protowire.BytesType:
			c.Field, m = protowire.ConsumeBytes(cb)
			if m >= 0 && !utf8.Valid(c.Field) {
				return false
			}
		case num == ComparisonOp && typ == protowire.VarintType:
			var x uint64
			x, m = protowire.ConsumeVarint(cb)
			c.Op = int32(x) //nolint:gosec // enums are int32 on the wire; protobuf truncates the same way
		case num == ComparisonValue && typ == protowire.BytesType:
			var vb []byte
			if vb, m = protowire.ConsumeBytes(cb); m >= 0 && !ReadOperand(vb, &c.Value) {
				return false
			}
			q.ValueLen, q.AfterValue, c.HasValue = len(vb), len(cb)-m, true
		default:
			return false
		}
		if m < 0 {
			return false
		}
		cb = cb[m:]
	}
	return true
}

// nextTag reads the tag that starts b, of a field numbered 1 to last that
// seen does not hold yet, and adds it to seen; l < 0 for anything else. In
// the common shape every field comes at most once.
func nextTag(b []byte, last protowire.Number, seen *uint16) (num protowire.Number, typ protowire.Type, l int) {
	num, typ, l = protowire.ConsumeTag(b)
	if l < 0 || num < 1 || num > last || *seen&(1<<num) != 0 {
		return 0, 0, -1
	}
	*seen |= 1 << num
	return num, typ, l
}

// ReadOperand reads Value bytes b holding one scalar into v; false for
// anything else (no field, two fields, a list, invalid UTF-8).
func ReadOperand(b []byte, v *Operand) bool {
	if len(b) >= 2 && b[0] == tagValueInt && b[len(b)-1] < 0x80 && len(b) <= 10 {
		// An int64 operand of at most 9 bytes (ids under 2^63 take at
		// most 9): what ConsumeVarint would read, without the call.
		var x uint64
		for i, c := range b[1:] {
			x |= uint64(c&0x7f) << (7 * i)
			if c < 0x80 {
				if i != len(b)-2 {
					return false // bytes after the varint
				}
				v.Num, v.X, v.S = ValueInt, x, nil
				return true
			}
		}
		return false
	}
	num, typ, l := protowire.ConsumeTag(b)
	if l < 0 {
		return false
	}
	b = b[l:]
	v.Num, v.X, v.S = num, 0, nil
	switch {
	case typ == protowire.VarintType && (num == ValueInt || num == ValueUint || num == ValueBool):
		var m int
		v.X, m = protowire.ConsumeVarint(b)
		return m == len(b)
	case typ == protowire.BytesType && (num == ValueString || num == ValueBytes):
		var m int
		v.S, m = protowire.ConsumeBytes(b)
		return m == len(b) && (num == ValueBytes || utf8.Valid(v.S))
	}
	return false
}
