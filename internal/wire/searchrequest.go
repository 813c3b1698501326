package wire

import (
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	pb "github.com/protobase/protobase/gen/protobase/v1"
)

// The SearchRequest decoder. Decoding a batch of point lookups with the
// generated code allocates six messages per query (Query, Expr, its oneof
// wrapper, Comparison, Value and its wrapper) plus two strings; on a
// Search stream of batched lookups that was the server's largest cost
// after the storage read itself. This decoder allocates each kind of
// message once per request, in slabs, and reuses the type and field
// strings across queries. It understands the common shape (ReadQuery's: a
// query whose filter is a single comparison with a scalar operand) and
// hands every other query's bytes to proto.Unmarshal, so the result is
// always what proto.Unmarshal would produce (FuzzDecodeSearchRequest
// checks it): same messages, same errors.

// SearchSlabs hands out the messages of one request from per-kind arrays.
// Reused for a later request (DecodeSearchQueries), each message is reset before it
// is handed out again, so what the decoder does not set is empty, as
// proto.Unmarshal leaves it.
type SearchSlabs struct {
	ptrs    []*pb.Query // the request's Queries, reused as its backing array
	queries []pb.Query
	exprs   []pb.Expr
	cmps    []pb.Comparison
	vals    []pb.Value
	wrapCmp []pb.Expr_Cmp
	ints    []pb.Value_Int
	uints   []pb.Value_Uint
	strs    []pb.Value_String_
	byts    []pb.Value_Bytes
	bools   []pb.Value_Bool
	n       int // queries decoded so far
	lastTyp string
	lastFld string
}

// CountQueries counts the queries of SearchRequest bytes b, up to the
// first field it cannot skip: the size of a request the decoder would
// give to proto.Unmarshal, for a limit checked before decoding.
func CountQueries(b []byte) int {
	n := 0
	for len(b) > 0 {
		num, typ, l := protowire.ConsumeTag(b)
		if l < 0 {
			break
		}
		m := protowire.ConsumeFieldValue(num, typ, b[l:])
		if m < 0 {
			break
		}
		if num == SearchRequestQueries {
			n++
		}
		b = b[l+m:]
	}
	return n
}

// DecodeSearchRequest decodes b into req, as proto.Unmarshal would,
// taking the messages from s (nil: new slabs) and growing it as needed.
// req keeps no reference to b: strings are copied.
func DecodeSearchRequest(b []byte, req *pb.SearchRequest, s *SearchSlabs) error {
	n, plain := SearchRequestShape(b)
	if !plain {
		return proto.Unmarshal(b, req)
	}
	return DecodeSearchQueries(b, req, s, n)
}

// SearchRequestShape counts the queries of SearchRequest bytes b and reports
// whether b holds nothing else: only well-formed queries fields, the
// shape DecodeSearchQueries takes. Anything unusual (unknown fields, wrong
// wire types, truncation) is left to the generated decoder.
func SearchRequestShape(b []byte) (int, bool) {
	n := 0
	for len(b) > 0 {
		num, typ, l := protowire.ConsumeTag(b)
		if l < 0 || num != SearchRequestQueries || typ != protowire.BytesType {
			return 0, false
		}
		b = b[l:]
		m := protowire.ConsumeFieldValue(num, typ, b)
		if m < 0 {
			return 0, false
		}
		b = b[m:]
		n++
	}
	return n, true
}

// DecodeSearchQueries decodes b, of the shape SearchRequestShape accepted
// with n queries, into req, as proto.Unmarshal would, taking the messages
// from s (nil: new slabs).
func DecodeSearchQueries(b []byte, req *pb.SearchRequest, s *SearchSlabs, n int) error {
	req.Reset()
	if n == 0 {
		return nil
	}
	if s == nil {
		s = new(SearchSlabs)
	}
	s.reset(n)
	req.Queries = s.ptrs[:n]
	for rest := b; len(rest) > 0; {
		_, _, l := protowire.ConsumeTag(rest)
		rest = rest[l:]
		qb, m := protowire.ConsumeBytes(rest)
		rest = rest[m:]
		q := &s.queries[s.n]
		// Zeroed as new, not Reset: Reset also stores the message's type
		// info with an atomic exchange, a full memory barrier on x86, and
		// three per query showed in the profile. The runtime stores it
		// on first use, as for any new message.
		*q = pb.Query{}
		if !s.query(qb, q) {
			q.Reset()
			if err := proto.Unmarshal(qb, q); err != nil {
				req.Reset()
				return err
			}
		}
		req.Queries[s.n] = q
		s.n++
	}
	return nil
}

// reset readies s for a request of n queries: the arrays are reused when
// large enough, else replaced (the messages of an earlier request decoded
// into smaller ones are not touched again).
func (s *SearchSlabs) reset(n int) {
	s.n = 0
	if cap(s.queries) < n {
		*s = SearchSlabs{
			ptrs:    make([]*pb.Query, n),
			queries: make([]pb.Query, n),
			exprs:   make([]pb.Expr, n),
			cmps:    make([]pb.Comparison, n),
			vals:    make([]pb.Value, n),
			wrapCmp: make([]pb.Expr_Cmp, n),
			lastTyp: s.lastTyp,
			lastFld: s.lastFld,
		}
	}
}

// query decodes the common shape of a query (ReadQuery's) into
// q; false means b is something else and q must be decoded by
// proto.Unmarshal.
func (s *SearchSlabs) query(b []byte, q *pb.Query) bool {
	var wq Query
	w := &wq
	if !ReadQuery(b, w) {
		return false
	}
	if len(w.Type) > 0 {
		q.Type = shared(w.Type, &s.lastTyp)
	}
	q.Limit, q.KeysOnly, q.Explain, q.Count, q.Versions = w.Limit, w.KeysOnly, w.Explain, w.Count, w.Versions
	if w.Where {
		q.Where = s.where(&w.Cmp)
	}
	return true
}

// where returns an Expr holding comparison c.
func (s *SearchSlabs) where(c *Comparison) *pb.Expr {
	cmp := &s.cmps[s.n]
	*cmp = pb.Comparison{Op: pb.Op(c.Op)} // as new (see DecodeSearchQueries)
	if len(c.Field) > 0 {
		cmp.Field = shared(c.Field, &s.lastFld)
	}
	if c.HasValue {
		cmp.Value = s.value(&c.Value)
	}
	e := &s.exprs[s.n]
	w := &s.wrapCmp[s.n]
	w.Cmp = cmp
	e.Expr = w
	return e
}

// value returns operand o as s.vals[s.n].
func (s *SearchSlabs) value(o *Operand) *pb.Value {
	v := &s.vals[s.n]
	*v = pb.Value{} // as new (see DecodeSearchQueries)
	switch o.Num {
	case ValueInt:
		if s.ints == nil {
			s.ints = make([]pb.Value_Int, len(s.queries))
		}
		w := &s.ints[s.n]
		w.Int = int64(o.X) //nolint:gosec // int64 travels as its two's-complement varint
		v.Kind = w
	case ValueUint:
		if s.uints == nil {
			s.uints = make([]pb.Value_Uint, len(s.queries))
		}
		w := &s.uints[s.n]
		w.Uint = o.X
		v.Kind = w
	case ValueBool:
		if s.bools == nil {
			s.bools = make([]pb.Value_Bool, len(s.queries))
		}
		w := &s.bools[s.n]
		w.Bool = o.X != 0
		v.Kind = w
	case ValueString:
		if s.strs == nil {
			s.strs = make([]pb.Value_String_, len(s.queries))
		}
		w := &s.strs[s.n]
		w.String_ = string(o.S)
		v.Kind = w
	default: // ValueBytes, the only other operand ReadQuery takes
		if s.byts == nil {
			s.byts = make([]pb.Value_Bytes, len(s.queries))
		}
		w := &s.byts[s.n]
		// proto.Unmarshal gives an empty, non-nil slice for empty bytes.
		w.Bytes = append(make([]byte, 0, len(o.S)), o.S...)
		v.Kind = w
	}
	return v
}

// shared returns b as a string, reusing *last when equal, so a batch of
// queries on one type shares one string.
func shared(b []byte, last *string) string {
	if string(b) != *last {
		*last = string(b)
	}
	return *last
}
