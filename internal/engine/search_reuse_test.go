package engine_test

import (
	"fmt"
	"io"
	"strconv"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	pb "github.com/protobase/protobase/gen/protobase/v1"
	"github.com/protobase/protobase/internal/engine"
)

// TestSearchReusedMessages runs a stream whose Send encodes before it
// returns (engine.EncodingSink) and whose recycled requests are rewritten
// in place for the next ones, as the gRPC transport's decoder does: every
// answer must still be the record of its own query. Requests of one,
// many (more than a response holds) and absent keys run on the receiving
// goroutine with reused response messages; requests mixing in a range
// query run on workers, whose responses are not reused.
func TestSearchReusedMessages(t *testing.T) {
	const users = 300
	te := openEngine(t, t.TempDir(), engine.Options{MaxResultRecords: 64})
	te.Apply(map[string]string{"shop.proto": shopProto})
	var recs []*anypb.Any
	for id := range users {
		recs = append(recs, te.Rec("shop.User", fmt.Sprintf(`{"id":%d,"name":"%d","email":"u%d@x"}`, id, id, id)))
	}
	te.MustWrite(engine.OpInsert, recs)

	// Each request looks up the ids of its plan; -1 adds a range query
	// (name >= "0", all users) that sends the request to workers.
	plans := [][]int{{7}, seq(0, 250), {299, 1000, 3}, seq(40, 300), {5, -1, 6}, {1}, seq(100, 290), {2000}}
	var (
		wantIDs  []int // the key each query id looks up; -1 for the range
		free     *pb.SearchRequest
		recycled int
		next     int
	)
	recv := func() (*pb.SearchRequest, error) {
		if next == len(plans) {
			return nil, io.EOF
		}
		plan := plans[next]
		next++
		req := free
		if free = nil; req == nil {
			req = &pb.SearchRequest{}
		}
		// Rewrite the recycled request's messages in place: were the
		// engine still reading them, its answers would be wrong.
		for i, id := range plan {
			q := lookup(max(id, 0))
			if id < 0 {
				q = &pb.Query{Type: "shop.User", Where: &pb.Expr{Expr: &pb.Expr_Cmp{Cmp: &pb.Comparison{
					Field: "name", Op: pb.Op_OP_GE, Value: &pb.Value{Kind: &pb.Value_String_{String_: "0"}}}}}}
			}
			if i < len(req.Queries) && id >= 0 && req.Queries[i].GetWhere().GetCmp().GetValue().GetKind() != nil {
				if v, ok := req.Queries[i].Where.GetCmp().Value.Kind.(*pb.Value_Int); ok {
					*v = pb.Value_Int{Int: int64(id)}
					continue
				}
			}
			if i < len(req.Queries) {
				req.Queries[i] = q
			} else {
				req.Queries = append(req.Queries, q)
			}
		}
		req.Queries = req.Queries[:len(plan)]
		wantIDs = append(wantIDs, plan...)
		return req, nil
	}
	got := map[uint64][]string{}
	done := map[uint64]uint64{}
	send := func(resp *pb.SearchResponse) error {
		b, err := proto.Marshal(resp)
		if err != nil {
			return err
		}
		var m pb.SearchResponse
		if err := proto.Unmarshal(b, &m); err != nil {
			return err
		}
		if len(m.Errors) > 0 {
			return fmt.Errorf("query %d: %s", m.Errors[0].Query, m.Errors[0].Message)
		}
		for _, rb := range m.Results {
			for _, a := range rb.Records {
				got[rb.Query] = append(got[rb.Query], nameOf(a.Value))
			}
		}
		for _, d := range m.Done {
			done[d.Query] = d.Count
		}
		return nil
	}
	src := recyclingSource{recv, func(req *pb.SearchRequest) { free = req; recycled++ }}
	if err := te.E.SearchStream(t.Context(), src, encodingSink{send}); err != nil {
		t.Fatal(err)
	}
	if recycled == 0 {
		t.Fatal("no request was recycled")
	}
	for qid, id := range wantIDs {
		q := uint64(qid)
		switch {
		case id < 0:
			if done[q] != users || len(got[q]) != users {
				t.Fatalf("range query %d: done %d, %d records", q, done[q], len(got[q]))
			}
		case id >= users:
			if c, ok := done[q]; !ok || c != 0 || len(got[q]) != 0 {
				t.Fatalf("query %d (absent key %d): done %v %d, records %v", q, id, ok, c, got[q])
			}
		default:
			if done[q] != 1 || len(got[q]) != 1 || got[q][0] != strconv.Itoa(id) {
				t.Fatalf("query %d (key %d): done %d, records %v", q, id, done[q], got[q])
			}
		}
	}
	if len(done) != len(wantIDs) {
		t.Fatalf("%d queries done, %d sent", len(done), len(wantIDs))
	}
}

func seq(lo, hi int) []int {
	var s []int
	for i := lo; i < hi; i++ {
		s = append(s, (i*37)%300) // scattered, every id of 0..299 once per 300
	}
	return s
}
