package engine_test

import (
	"errors"
	"fmt"
	"io"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	pb "github.com/protobase/protobase/gen/protobase/v1"
	"github.com/protobase/protobase/internal/engine"
)

// wireProto has a record type keyed by each kind a lookup's key takes
// from the wire.
const wireProto = `syntax = "proto3";
package wire;
import "protobase/v1/options.proto";
message S { option (protobase.v1.record) = { primary_key: "id" }; string id = 1; }
message U { option (protobase.v1.record) = { primary_key: "id" }; uint32 id = 1; }
message B { option (protobase.v1.record) = { primary_key: "id" }; bool id = 1; }
message Y { option (protobase.v1.record) = { primary_key: "id" }; bytes id = 1; }
message I { option (protobase.v1.record) = { primary_key: "id" }; int32 id = 1; }
`

func wireLookup(typ, field string, v *pb.Value) *pb.Query {
	return &pb.Query{Type: typ, Where: &pb.Expr{Expr: &pb.Expr_Cmp{Cmp: &pb.Comparison{Field: field, Op: pb.Op_OP_EQ, Value: v}}}}
}

// wireSeeds are SearchRequests of lookups, plain and not.
func wireSeeds() []*pb.SearchRequest {
	i64 := func(v int64) *pb.Value { return &pb.Value{Kind: &pb.Value_Int{Int: v}} }
	plain := []*pb.Query{
		lookup(1), lookup(-5),
		wireLookup("wire.S", "id", &pb.Value{Kind: &pb.Value_String_{String_: "a\x00b"}}),
		wireLookup("type.googleapis.com/wire.U", "id", &pb.Value{Kind: &pb.Value_Uint{Uint: 7}}),
		wireLookup("wire.B", "id", &pb.Value{Kind: &pb.Value_Bool{Bool: true}}),
		wireLookup("wire.Y", "id", &pb.Value{Kind: &pb.Value_Bytes{Bytes: []byte{0, 1, 255}}}),
		wireLookup("wire.I", "id", i64(-2147483648)),
	}
	// More shapes than wirePoints keeps, each coming back after others:
	// ids of one, two and three bytes, other types and operand kinds.
	str := func(v string) *pb.Query {
		return wireLookup("wire.S", "id", &pb.Value{Kind: &pb.Value_String_{String_: v}})
	}
	uns := func(v uint64) *pb.Query { return wireLookup("wire.U", "id", &pb.Value{Kind: &pb.Value_Uint{Uint: v}}) }
	shapes := []*pb.Query{
		lookup(1), lookup(300), lookup(70000), str("a"), uns(7), lookup(2), str("bb"), uns(300),
		lookup(301), lookup(70001), str("c"), lookup(-1), lookup(3), uns(8), lookup(302),
	}
	flags := []*pb.Query{lookup(2), lookup(3), lookup(4)}
	flags[0].KeysOnly, flags[1].Count, flags[2].Limit = true, true, 1
	explain := lookup(1)
	explain.Explain = true
	order := lookup(1)
	order.Order = &pb.Order{Descending: true}
	values := wireLookup("shop.User", "id", i64(1))
	values.Where.GetCmp().Values = []*pb.Value{i64(2)}
	ne := wireLookup("shop.User", "id", i64(1))
	ne.Where.GetCmp().Op = pb.Op_OP_NE
	return []*pb.SearchRequest{
		{Queries: plain}, {Queries: shapes}, {Queries: flags}, {Queries: []*pb.Query{lookup(1), explain}},
		{Queries: []*pb.Query{order}}, {Queries: []*pb.Query{values}}, {Queries: []*pb.Query{ne}},
		{Queries: []*pb.Query{wireLookup("wire.I", "id", i64(1<<40))}},  // out of int32's range
		{Queries: []*pb.Query{wireLookup("wire.U", "id", i64(1))}},      // an int for a uint
		{Queries: []*pb.Query{wireLookup("shop.User", "name", i64(1))}}, // not the key
		{Queries: []*pb.Query{wireLookup("shop.Nope", "id", i64(1))}},   // no such type
		{Queries: []*pb.Query{{Type: "shop.User", Filter: "id = 1"}}},   // text
		{Queries: []*pb.Query{wireLookup("shop.Member", "id", i64(1))}}, // composite key
		{Queries: []*pb.Query{{Type: "shop.User"}}},                     // no where
		{},
	}
}

func openWireEngine(t testing.TB) *testEngine {
	te := openEngine(t, t.TempDir(), engine.Options{})
	te.Apply(map[string]string{"shop.proto": shopProto, "wire.proto": wireProto})
	return te
}

// The plain lookups of a request are read from its bytes as from its
// decoded queries, and every other request is left to be decoded: a query
// the fast path would not take, or bytes in another shape (a field twice,
// invalid UTF-8, truncated).
func TestWirePoints(t *testing.T) {
	te := openWireEngine(t)
	for i, req := range wireSeeds() {
		b, err := proto.Marshal(req)
		if err != nil {
			t.Fatal(err)
		}
		got, ok := te.E.WirePoints(b)
		want, wantOK := te.E.QueryPoints(req.Queries)
		// The first three are plain; an order (which a lookup ignores) is
		// left to the decoder, as is every query the decoded path
		// compiles.
		if ok != (i < 3) || ok && (!wantOK || fmt.Sprint(got) != fmt.Sprint(want)) {
			t.Fatalf("request %d: from bytes %v %v, decoded %v %v", i, got, ok, want, wantOK)
		}
	}
	one, _ := proto.Marshal(&pb.SearchRequest{Queries: []*pb.Query{lookup(1)}})
	if _, ok := te.E.WirePoints(one); !ok {
		t.Fatal("a lone lookup declined")
	}
	q, _ := proto.Marshal(lookup(1))
	where, _ := proto.Marshal(lookup(1).Where)
	for name, b := range map[string][]byte{
		"type twice":   protowire.AppendString(protowire.AppendTag(append([]byte(nil), q...), 1, protowire.BytesType), "shop.User"),
		"bad UTF-8":    protowire.AppendBytes(protowire.AppendTag(protowire.AppendString(protowire.AppendTag(nil, 1, protowire.BytesType), "\xff/shop.User"), 2, protowire.BytesType), where),
		"truncated":    q[:len(q)-1],
		"unknown 9":    protowire.AppendVarint(protowire.AppendTag(append([]byte(nil), q...), 9, protowire.VarintType), 1),
		"limit as len": protowire.AppendBytes(protowire.AppendTag(append([]byte(nil), q...), 3, protowire.BytesType), nil),
	} {
		req := protowire.AppendBytes(protowire.AppendTag(nil, 1, protowire.BytesType), b)
		if _, ok := te.E.WirePoints(req); ok {
			t.Errorf("%s: read from bytes", name)
		}
	}
}

// FuzzWirePoints checks that bytes read as lookups decode without error
// (so no error the decoder gives is lost) into queries that are the same
// lookups: run from the bytes or decoded, a request gets the same answers.
func FuzzWirePoints(f *testing.F) {
	for _, req := range wireSeeds() {
		b, err := proto.Marshal(req)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	te := openWireEngine(f)
	f.Fuzz(func(t *testing.T, b []byte) {
		got, ok := te.E.WirePoints(b)
		if !ok {
			return
		}
		var req pb.SearchRequest
		if err := proto.Unmarshal(b, &req); err != nil {
			t.Fatalf("read as lookups, but does not decode: %v", err)
		}
		want, wantOK := te.E.QueryPoints(req.Queries)
		if !wantOK || fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("from bytes %v, decoded %v %v", got, want, wantOK)
		}
	})
}

// repeatSource is an engine.WireSource handing out left requests, cycling
// over reqs (marshalled beforehand), then io.EOF; it declines to decode.
type repeatSource struct {
	reqs [][]byte
	n    int
	left int
}

func (s *repeatSource) Recv() (*pb.SearchRequest, error) { return nil, errors.New("decoded") }

func (s *repeatSource) RecvWire() ([]byte, error) {
	if s.left == 0 {
		return nil, io.EOF
	}
	s.left--
	s.n++
	return s.reqs[s.n%len(s.reqs)], nil
}

func (s *repeatSource) DecodeWire() (*pb.SearchRequest, error) { return nil, errors.New("decoded") }

func (s *repeatSource) MaxQueries() int { return 0 }

// A stream of requests of one primary-key lookup each, the records in the
// record cache, allocates nothing per request in the engine: the record
// goes from the cache's entry into the response's bytes, and the stream's
// sending function is made once.
func TestLoneLookupsAllocateNothing(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts under the race detector say nothing")
	}
	te := openWireEngine(t)
	const users = 50
	var recs []*anypb.Any
	var reqs [][]byte
	for id := range users {
		recs = append(recs, te.Rec("shop.User", fmt.Sprintf(`{"id":%d,"name":"n%d","email":"u%d@x"}`, id, id, id)))
		b, err := proto.Marshal(&pb.SearchRequest{Queries: []*pb.Query{lookup(id)}})
		if err != nil {
			t.Fatal(err)
		}
		reqs = append(reqs, b)
	}
	te.MustWrite(engine.OpInsert, recs)
	sent := 0
	sink := encodingWireSink{wireSink{
		func(*pb.SearchResponse) error { t.Fatal("a response went out as a message"); return nil },
		func([]byte) error { sent++; return nil },
	}}
	stream := func(n int) {
		if err := te.E.SearchStream(t.Context(), &repeatSource{reqs: reqs, left: n}, sink); err != nil {
			t.Fatal(err)
		}
	}
	stream(users) // every record read once: the cache holds them all
	const n = 500
	one := testing.AllocsPerRun(5, func() { stream(1) })
	many := testing.AllocsPerRun(5, func() { stream(1 + n) })
	if per := (many - one) / n; per > 0.1 {
		t.Fatalf("%.2f allocations per request (%v for one request, %v for %d)", per, one, many, 1+n)
	}
	if want := users + 6*(2+n); sent != want { // AllocsPerRun runs each once more first
		t.Fatalf("%d responses, want %d", sent, want)
	}
}

// stepSource is an engine.WireSource that marshals each request into the
// same buffer, as gRPC's frames reuse theirs, running before(i) before it
// hands out request i.
type stepSource struct {
	reqs   []*pb.SearchRequest
	before func(i int)
	next   int
	b      []byte
}

func (s *stepSource) Recv() (*pb.SearchRequest, error) {
	if _, err := s.RecvWire(); err != nil {
		return nil, err
	}
	return s.DecodeWire()
}

func (s *stepSource) RecvWire() ([]byte, error) {
	if s.next == len(s.reqs) {
		return nil, io.EOF
	}
	s.before(s.next)
	var err error
	s.b, err = proto.MarshalOptions{}.MarshalAppend(s.b[:0], s.reqs[s.next])
	s.next++
	return s.b, err
}

func (s *stepSource) DecodeWire() (*pb.SearchRequest, error) {
	var req pb.SearchRequest
	return &req, proto.Unmarshal(s.b, &req)
}

func (s *stepSource) MaxQueries() int { return 0 }

// answers runs reqs on one stream and returns, by query id, each query's
// records (their bytes) and error code.
func answers(t *testing.T, te *testEngine, reqs []*pb.SearchRequest, before func(int)) (map[uint64][]string, map[uint64]int32) {
	recs, errs := map[uint64][]string{}, map[uint64]int32{}
	sink := encodingWireSink{wireSink{
		func(resp *pb.SearchResponse) error {
			for _, e := range resp.Errors {
				errs[e.Query] = e.Code
			}
			return nil
		},
		func(b []byte) error {
			var resp pb.SearchResponse
			if err := proto.Unmarshal(b, &resp); err != nil {
				return err
			}
			for _, rb := range resp.Results {
				for _, r := range rb.Records {
					recs[rb.Query] = append(recs[rb.Query], string(r.Value))
				}
			}
			for _, e := range resp.Errors {
				errs[e.Query] = e.Code
			}
			return nil
		},
	}}
	if err := te.E.SearchStream(t.Context(), &stepSource{reqs: reqs, before: before}, sink); err != nil {
		t.Fatal(err)
	}
	return recs, errs
}

// A stream's lone lookups, read from their bytes, keep the queries they
// read in full from request to request (the next query of the same shape
// has only its operand read): each request must still get its own answer
// when the buffer its bytes came in is overwritten by the next, when its
// key is of another length or type, and when the schema changes between
// two requests (a type unknown to the first exists for the second).
func TestWireLookupsAcrossRequests(t *testing.T) {
	te := openEngine(t, t.TempDir(), engine.Options{})
	te.Apply(map[string]string{"shop.proto": shopProto})
	var users []*anypb.Any
	for id := range 300 {
		users = append(users, te.Rec("shop.User", fmt.Sprintf(`{"id":%d,"name":"n%d","email":"u%d@x"}`, id, id, id)))
	}
	te.MustWrite(engine.OpInsert, users)
	str := func(v string) *pb.Query {
		return wireLookup("wire.S", "id", &pb.Value{Kind: &pb.Value_String_{String_: v}})
	}
	// Two queries of one length that differ outside their operands.
	keys, count := lookup(10), lookup(11)
	keys.KeysOnly, count.Count = true, true
	qs := []*pb.Query{lookup(7), lookup(250), lookup(8), lookup(251), str("a"), str("a"), str("b"), lookup(9), keys, count, lookup(299), lookup(1000)}
	const added = 5 // wire.S exists from this request on
	reqs := make([]*pb.SearchRequest, len(qs))
	for i, q := range qs {
		reqs[i] = &pb.SearchRequest{Queries: []*pb.Query{q}}
	}
	recs, errs := answers(t, te, reqs, func(i int) {
		if i == added {
			te.Apply(map[string]string{"shop.proto": shopProto, "wire.proto": wireProto})
			te.MustWrite(engine.OpInsert, []*anypb.Any{te.Rec("wire.S", `{"id":"a"}`)})
		}
	})
	for i, q := range qs {
		id := uint64(i)
		if i == added-1 {
			if errs[id] == 0 || len(recs[id]) > 0 {
				t.Fatalf("query %d, of a type not yet added: %d records, error code %d", i, len(recs[id]), errs[id])
			}
			continue
		}
		// Alone on a stream of its own, the query gets the same answer.
		want, wantErrs := answers(t, te, []*pb.SearchRequest{{Queries: []*pb.Query{q}}}, func(int) {})
		if fmt.Sprint(recs[id]) != fmt.Sprint(want[0]) || errs[id] != wantErrs[0] {
			t.Fatalf("query %d: %q (error %d), alone %q (error %d)", i, recs[id], errs[id], want[0], wantErrs[0])
		}
	}
	if len(recs[added]) != 1 || len(recs[3]) != 1 || len(recs[8]) != 1 || len(recs[9]) != 0 || len(recs[11]) != 0 {
		t.Fatalf("records per query: %v", recs)
	}
}
