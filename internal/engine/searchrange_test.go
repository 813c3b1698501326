package engine_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	pb "github.com/protobase/protobase/gen/protobase/v1"
	"github.com/protobase/protobase/internal/engine"
)

// streamBytes runs requests on one stream and returns its responses'
// bytes in order: as the engine wrote them (wire: an engine.WireSink and
// engine.WireSource) or as proto.Marshal encodes the messages it sent.
// Only the last request may go to a worker (the others are lookups, run
// as they arrive), so that the responses' order is known.
func streamBytes(t *testing.T, e *engine.Engine, reqs [][]*pb.Query, wire bool) [][]byte {
	t.Helper()
	var out [][]byte
	next := 0
	send := func(resp *pb.SearchResponse) error {
		b, err := proto.Marshal(resp)
		out = append(out, b)
		return err
	}
	var src engine.SearchSource = recvReqs(reqs, &next)
	var sink engine.SearchSink = encodingSink{send}
	if wire {
		src = &wireSource{reqs: reqs, next: &next}
		sink = encodingWireSink{wireSink{send, func(b []byte) error {
			out = append(out, bytes.Clone(b))
			for i := range b {
				b[i] = 0xEE // the engine must not read it again
			}
			return nil
		}}}
	}
	if err := e.SearchStream(t.Context(), src, sink); err != nil {
		t.Fatal(err)
	}
	return out
}

// A request of one query that is not a plain lookup, written as wire
// bytes by its worker, sends byte for byte the
// responses the message path sends: index ranges forward and backward,
// with a limit, keys-only and counting, a filter, full scans, a point with
// a filter, empty answers and failing queries, with query ids of zero and
// more, and responses cut by the record and byte bounds.
func TestWireQueryMatchesMessages(t *testing.T) {
	for _, o := range []engine.Options{
		{MaxResultRecords: 64, MaxResultBytes: 1 << 20},
		{MaxResultRecords: 1000, MaxResultBytes: 3000},
		{MaxResultRecords: 1, MaxResultBytes: 1},
	} {
		t.Run(fmt.Sprintf("records=%d/bytes=%d", o.MaxResultRecords, o.MaxResultBytes), func(t *testing.T) {
			te := openEngine(t, t.TempDir(), o)
			te.Apply(map[string]string{"shop.proto": shopProto})
			var recs []*anypb.Any
			for id := range 300 {
				recs = append(recs, te.Rec("shop.User", fmt.Sprintf(`{"id":%d,"name":"n%d","email":"u%d@x"}`, id, id%40, id)))
			}
			te.MustWrite(engine.OpInsert, recs)
			name := func(op pb.Op, s string) *pb.Expr {
				return &pb.Expr{Expr: &pb.Expr_Cmp{Cmp: &pb.Comparison{Field: "name", Op: op, Value: &pb.Value{Kind: &pb.Value_String_{String_: s}}}}}
			}
			between := &pb.Expr{Expr: &pb.Expr_And{And: &pb.ExprList{Exprs: []*pb.Expr{name(pb.Op_OP_GE, "n1"), name(pb.Op_OP_LT, "n3")}}}}
			point := lookup(5)
			point.Filter = `name = "n5"`
			queries := []*pb.Query{
				{Type: "shop.User", Where: between},
				{Type: "shop.User", Where: between, Order: &pb.Order{Index: "name", Descending: true}},
				{Type: "shop.User", Where: between, Limit: 7},
				{Type: "shop.User", Where: between, KeysOnly: true},
				{Type: "shop.User", Where: between, Count: true},
				{Type: "shop.User", Where: name(pb.Op_OP_EQ, "n7"), Filter: "id > 100"},
				{Type: "shop.User", Where: name(pb.Op_OP_EQ, "none")},
				{Type: "shop.User"},
				{Type: "shop.User", Order: &pb.Order{Descending: true}, Limit: 100},
				point,
				{Type: "shop.Nothing"},
				{Type: "shop.User", Filter: "id >"},
				{},
			}
			for _, q := range queries {
				for _, pad := range [][]*pb.Query{nil, {lookup(1)}, {lookup(1), lookup(2), lookup(1 << 20)}} {
					var reqs [][]*pb.Query
					if pad != nil {
						reqs = append(reqs, pad) // the query's id is len(pad)
					}
					reqs = append(reqs, []*pb.Query{q})
					want := streamBytes(t, te.E, reqs, false)
					got := streamBytes(t, te.E, reqs, true)
					if len(got) != len(want) {
						t.Fatalf("query %v after %d: %d wire responses, %d messages", q, len(pad), len(got), len(want))
					}
					for i := range want {
						if !bytes.Equal(got[i], want[i]) {
							t.Fatalf("query %v after %d, response %d:\nwire     %x\nmessages %x", q, len(pad), i, got[i], want[i])
						}
					}
				}
			}
		})
	}
}

// A lone query written as wire bytes runs on a worker: while it waits to
// send its first response, the stream goes on receiving, and the next
// request is read (on the receiving goroutine it would not be until the
// query had finished, and this test would fail after its wait).
func TestWireQueryHoldsUpNoLaterRequest(t *testing.T) {
	te := openEngine(t, t.TempDir(), engine.Options{MaxResultRecords: 1})
	te.Apply(map[string]string{"shop.proto": shopProto})
	var recs []*anypb.Any
	for id := range 10 {
		recs = append(recs, te.Rec("shop.User", fmt.Sprintf(`{"id":%d,"name":"n","email":"u%d@x"}`, id, id)))
	}
	te.MustWrite(engine.OpInsert, recs)
	second := make(chan struct{})
	calls, wireSends, sends := 0, 0, 0
	src := recvFunc(func() (*pb.SearchRequest, error) {
		calls++
		switch calls {
		case 1:
			return &pb.SearchRequest{Queries: []*pb.Query{{Type: "shop.User"}}}, nil
		case 2:
			close(second)
			return &pb.SearchRequest{Queries: []*pb.Query{lookup(3)}}, nil
		}
		return nil, io.EOF
	})
	send := func(*pb.SearchResponse) error { sends++; return nil }
	sink := encodingWireSink{wireSink{send, func([]byte) error {
		if wireSends++; wireSends == 1 {
			select {
			case <-second:
			case <-time.After(10 * time.Second):
				return errors.New("the next request was not read while the lone query ran")
			}
		}
		return nil
	}}}
	if err := te.E.SearchStream(t.Context(), src, sink); err != nil {
		t.Fatal(err)
	}
	// The scan's 10 records, its completion with the last, and the
	// lookup's answer (as bytes or a message: the scan may be over by
	// the time the lookup arrives). Sends take turns (the engine's
	// sender lock), so the counts need no lock of their own.
	if wireSends+sends != 11 {
		t.Fatalf("%d wire responses and %d messages, want 11 in all", wireSends, sends)
	}
}
