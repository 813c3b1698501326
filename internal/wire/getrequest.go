package wire

import (
	"math"
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	pb "github.com/protobase/protobase/gen/protobase/v1"
)

// The GetRequest decoder. The generated code builds a unary Get's keys
// through protobuf's reflection, two messages and a string per key; a
// request of the common shape (type and versions at most once, keys that
// are each one number, string or bool) is decoded here with one
// allocation for all the keys' messages (two for more than one key), every other by proto.Unmarshal,
// so the result is always what proto.Unmarshal gives
// (TestDecodersFieldByField and FuzzDecodeGetRequest hold it to that).

// DecodeGetRequest decodes b into req, as proto.Unmarshal would. req
// keeps no reference to b: strings are copied.
func DecodeGetRequest(b []byte, req *pb.GetRequest) error {
	typ, keys, versions, ok := getRequestShape(b)
	if !ok {
		req.Reset()
		return proto.Unmarshal(b, req)
	}
	req.Reset()
	req.Type, req.Versions = recentTypes.of(typ), versions
	var s []getKey
	switch keys {
	case 0:
		return nil
	case 1:
		lone := new(loneKey)
		s, req.Keys = lone.k[:], lone.ptr[:]
	default:
		s, req.Keys = make([]getKey, keys), make([]*structpb.Value, keys)
	}
	i := 0
	for len(b) > 0 {
		num, wt, l := protowire.ConsumeTag(b)
		if num != GetRequestKeys {
			b = b[l+protowire.ConsumeFieldValue(num, wt, b[l:]):]
			continue
		}
		v, m := protowire.ConsumeBytes(b[l:])
		b = b[l+m:]
		req.Keys[i] = s[i].value(v)
		i++
	}
	return nil
}

// recentTypes are the requests' type names: requests in a row name the
// same type, and share its string.
var recentTypes recent

// loneKey is a request's one key with the slice that points to it, in
// one allocation.
type loneKey struct {
	ptr [1]*structpb.Value
	k   [1]getKey
}

// getKey holds one key's messages: the Value and the member of its kind.
type getKey struct {
	v      structpb.Value
	number structpb.Value_NumberValue
	str    structpb.Value_StringValue
	bool   structpb.Value_BoolValue
}

// value sets k from the bytes of a key getRequestShape accepted.
func (k *getKey) value(b []byte) *structpb.Value {
	num, _, l := protowire.ConsumeTag(b)
	b = b[l:]
	switch num {
	case JSONNumber:
		x, _ := protowire.ConsumeFixed64(b)
		k.number.NumberValue = math.Float64frombits(x)
		k.v.Kind = &k.number
	case JSONString:
		s, _ := protowire.ConsumeBytes(b)
		k.str.StringValue = string(s)
		k.v.Kind = &k.str
	default:
		x, _ := protowire.ConsumeVarint(b)
		k.bool.BoolValue = x != 0
		k.v.Kind = &k.bool
	}
	return &k.v
}

// getRequestShape reads GetRequest bytes b of the common shape: the type
// (nil when absent), the number of keys and versions; false for anything
// else (type or versions twice, key records, a key that is not one
// number, string or bool, an unknown field, a wrong wire type, invalid
// UTF-8, malformed bytes). The keys are read again by DecodeGetRequest.
func getRequestShape(b []byte) (typ []byte, keys int, versions bool, ok bool) {
	var seen uint16
	for len(b) > 0 {
		num, wt, l := protowire.ConsumeTag(b)
		if l < 0 {
			return nil, 0, false, false
		}
		b = b[l:]
		if num == GetRequestKeys && wt == protowire.BytesType {
			v, m := protowire.ConsumeBytes(b)
			if m < 0 || !plainKey(v) {
				return nil, 0, false, false
			}
			b, keys = b[m:], keys+1
			continue
		}
		if num == GetRequestKeys || num == GetRequestKeyRecords || num > GetRequestVersions || seen&(1<<num) != 0 {
			return nil, 0, false, false
		}
		seen |= 1 << num
		var m int
		switch {
		case num == GetRequestType && wt == protowire.BytesType:
			typ, m = protowire.ConsumeBytes(b)
			if m >= 0 && !utf8.Valid(typ) {
				return nil, 0, false, false
			}
		case num == GetRequestVersions && wt == protowire.VarintType:
			var x uint64
			x, m = protowire.ConsumeVarint(b)
			versions = x != 0
		default:
			return nil, 0, false, false
		}
		if m < 0 {
			return nil, 0, false, false
		}
		b = b[m:]
	}
	return typ, keys, versions, true
}

// plainKey reports whether b is a google.protobuf.Value of one field, a
// number, a string of valid UTF-8 or a bool, as proto.Unmarshal would
// decode it.
func plainKey(b []byte) bool {
	num, wt, l := protowire.ConsumeTag(b)
	if l < 0 {
		return false
	}
	b = b[l:]
	var m int
	switch {
	case num == JSONNumber && wt == protowire.Fixed64Type:
		_, m = protowire.ConsumeFixed64(b)
	case num == JSONString && wt == protowire.BytesType:
		var s []byte
		s, m = protowire.ConsumeBytes(b)
		if m >= 0 && !utf8.Valid(s) {
			return false
		}
	case num == JSONBool && wt == protowire.VarintType:
		_, m = protowire.ConsumeVarint(b)
	default:
		return false
	}
	return m >= 0 && m == len(b)
}
