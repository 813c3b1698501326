package wire

import (
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	pb "github.com/protobase/protobase/gen/protobase/v1"
)

// The QueryRequest decoder. A unary Query by key decoded with the
// generated code costs about as much CPU as the engine's lookup itself
// (six messages and two strings built through protobuf's reflection); a
// request of the common shape (each field at most once, its query
// ReadQuery's shape) is decoded here from one allocation of slabs for
// its one query, every other by proto.Unmarshal, so the result is always
// what proto.Unmarshal gives (TestDecodersFieldByField and
// FuzzDecodeQueryRequest hold it to that).

// DecodeQueryRequest decodes b into req, as proto.Unmarshal would. req
// keeps no reference to b: strings are copied.
func DecodeQueryRequest(b []byte, req *pb.QueryRequest) error {
	qb, size, token, ok := queryRequestShape(b)
	if !ok {
		req.Reset()
		return proto.Unmarshal(b, req)
	}
	req.Reset()
	req.PageSize = size
	if token != nil {
		req.PageToken = string(token)
	}
	if qb == nil {
		return nil
	}
	o := new(oneQuery)
	s := &SearchSlabs{ptrs: o.ptr[:], queries: o.query[:], exprs: o.expr[:], cmps: o.cmp[:], vals: o.val[:], wrapCmp: o.wrapCmp[:], ints: o.ints[:]}
	q := &s.queries[0]
	if !s.query(qb, q) {
		q.Reset()
		if err := proto.Unmarshal(qb, q); err != nil {
			req.Reset()
			return err
		}
	}
	req.Query = q
	return nil
}

// queryRequestShape reads QueryRequest bytes b of the common shape: its
// query's bytes (nil when absent), page size and page token (nil when
// absent); false for anything else (a field twice, an unknown field, a
// wrong wire type, invalid UTF-8, malformed bytes).
func queryRequestShape(b []byte) (query []byte, size uint32, token []byte, ok bool) {
	var seen uint16
	for len(b) > 0 {
		num, typ, l := nextTag(b, QueryRequestPageToken, &seen)
		if l < 0 {
			return nil, 0, nil, false
		}
		b = b[l:]
		var m int
		switch {
		case num == QueryRequestQuery && typ == protowire.BytesType:
			query, m = protowire.ConsumeBytes(b)
		case num == QueryRequestPageSize && typ == protowire.VarintType:
			var x uint64
			x, m = protowire.ConsumeVarint(b)
			size = uint32(x) //nolint:gosec // uint32 fields truncate on the wire as protobuf does
		case num == QueryRequestPageToken && typ == protowire.BytesType:
			token, m = protowire.ConsumeBytes(b)
			if m >= 0 && !utf8.Valid(token) {
				return nil, 0, nil, false
			}
		default:
			return nil, 0, nil, false
		}
		if m < 0 {
			return nil, 0, nil, false
		}
		b = b[m:]
	}
	return query, size, token, true
}

// oneQuery holds the messages of one query of the common shape (an
// integer operand's among them, the usual key), so that a lone query
// takes one allocation for them all.
type oneQuery struct {
	ptr     [1]*pb.Query
	query   [1]pb.Query
	expr    [1]pb.Expr
	cmp     [1]pb.Comparison
	val     [1]pb.Value
	wrapCmp [1]pb.Expr_Cmp
	ints    [1]pb.Value_Int
}
