package engine_test

import (
	"fmt"
	"io"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	pb "github.com/protobase/protobase/gen/protobase/v1"
	"github.com/protobase/protobase/internal/engine"
)

// answer is what a stream said about one query.
type answer struct {
	recs  []string // records, as text
	done  int      // completions
	count uint64
	errs  []string
}

// searchAnswers runs requests on one stream, sending by messages or, with
// wire, as wire bytes (an engine.WireSink) and receiving them as wire
// bytes too (an engine.WireSource), and returns every query's answer, the
// largest number of records in one response and the largest size of one
// (counted as the engine bounds it) holding more than one.
func searchAnswers(t *testing.T, e *engine.Engine, reqs [][]*pb.Query, wire bool) (map[uint64]*answer, int, int) {
	t.Helper()
	got := map[uint64]*answer{}
	most, mostBytes := 0, 0
	at := func(id uint64) *answer {
		if got[id] == nil {
			got[id] = &answer{}
		}
		return got[id]
	}
	take := func(resp *pb.SearchResponse) error {
		n, size := 0, 0
		for _, b := range resp.Results {
			for _, a := range b.Records {
				at(b.Query).recs = append(at(b.Query).recs, a.TypeUrl+" "+fmt.Sprintf("%x", a.Value))
				n++
				size += len(a.Value) + len(a.TypeUrl) + 8
			}
		}
		if n > 1 {
			mostBytes = max(mostBytes, size)
		}
		for _, d := range resp.Done {
			at(d.Query).done++
			at(d.Query).count += d.Count
		}
		for _, qe := range resp.Errors {
			at(qe.Query).errs = append(at(qe.Query).errs, fmt.Sprint(qe.Code, qe.Message))
		}
		most = max(most, n)
		return nil
	}
	next := 0
	send := func(resp *pb.SearchResponse) error {
		b, err := proto.Marshal(resp) // encoded before it returns
		if err != nil {
			return err
		}
		var dec pb.SearchResponse
		if err := proto.Unmarshal(b, &dec); err != nil {
			return err
		}
		return take(&dec)
	}
	var src engine.SearchSource = recvReqs(reqs, &next)
	var sink engine.SearchSink = encodingSink{send}
	sent := 0
	if wire {
		src = &wireSource{reqs: reqs, next: &next}
		sink = encodingWireSink{wireSink{send, func(b []byte) error {
			sent++
			var dec pb.SearchResponse
			if err := proto.Unmarshal(b, &dec); err != nil {
				return fmt.Errorf("a wire response does not decode: %w", err)
			}
			for i := range b {
				b[i] = 0xEE // the engine must not read it again
			}
			return take(&dec)
		}}}
	}
	if err := e.SearchStream(t.Context(), src, sink); err != nil {
		t.Fatal(err)
	}
	if wire && sent == 0 {
		t.Fatal("no response went out as wire bytes")
	}
	return got, most, mostBytes
}

// Requests of plain primary-key lookups answered as wire bytes get the
// answers the message path gives, query by query: records, missing keys,
// keys-only and count lookups, two record types, responses cut by the
// record and byte bounds, with the record cache cold, warm and off.
func TestSearchWireMatchesMessages(t *testing.T) {
	for _, o := range []engine.Options{
		{MaxResultRecords: 64, MaxResultBytes: 1 << 20},
		{MaxResultRecords: 64, MaxResultBytes: 1 << 20, RecordCacheBytes: -1},
		{MaxResultRecords: 1000, MaxResultBytes: 3000},
	} {
		t.Run(fmt.Sprintf("records=%d/bytes=%d/cache=%d", o.MaxResultRecords, o.MaxResultBytes, o.RecordCacheBytes), func(t *testing.T) {
			te := openEngine(t, t.TempDir(), o)
			te.Apply(map[string]string{"shop.proto": shopProto})
			var recs []*anypb.Any
			for id := range 300 {
				recs = append(recs, te.Rec("shop.User", fmt.Sprintf(`{"id":%d,"name":"%d","email":"u%d@x"}`, id, id, id)))
				if id%3 == 0 {
					recs = append(recs, te.Rec("shop.Member", fmt.Sprintf(`{"org":"o","id":%d,"handle":"h%d"}`, id, id)))
				}
			}
			te.MustWrite(engine.OpInsert, recs)
			member := func(id int) *pb.Query {
				return &pb.Query{Type: "shop.Member", Where: &pb.Expr{Expr: &pb.Expr_And{And: &pb.ExprList{Exprs: []*pb.Expr{
					{Expr: &pb.Expr_Cmp{Cmp: &pb.Comparison{Field: "org", Op: pb.Op_OP_EQ, Value: &pb.Value{Kind: &pb.Value_String_{String_: "o"}}}}},
					{Expr: &pb.Expr_Cmp{Cmp: &pb.Comparison{Field: "id", Op: pb.Op_OP_EQ, Value: &pb.Value{Kind: &pb.Value_Int{Int: int64(id)}}}}},
				}}}}}
			}
			var many, mixed []*pb.Query
			for id := range 250 {
				q := lookup(id * 7 % 320) // some past the last user
				switch id % 5 {
				case 1:
					q.KeysOnly = true
				case 2:
					q.Count = true
				}
				many = append(many, q)
				mixed = append(mixed, q)
				if id%10 == 0 {
					mixed = append(mixed, member(id))
				}
			}
			reqs := [][]*pb.Query{{lookup(7)}, many, {lookup(299), lookup(1000), lookup(3)}, {}, mixed, {lookup(5), member(3)}, {lookup(2000)}}
			want, _, _ := searchAnswers(t, te.E, reqs, false)
			for round := range 2 { // the second with the cache warm
				got, most, mostBytes := searchAnswers(t, te.E, reqs, true)
				// The byte bound is checked on the record alone, before its
				// type URL and framing (8) are added: as the message path.
				if most > o.MaxResultRecords || mostBytes > o.MaxResultBytes+len("type.googleapis.com/shop.Member")+8 {
					t.Fatalf("round %d: %d records, %d bytes in one response, more than the bounds", round, most, mostBytes)
				}
				if len(got) != len(want) {
					t.Fatalf("round %d: answers for %d queries, want %d", round, len(got), len(want))
				}
				for id, w := range want {
					if g := got[id]; fmt.Sprint(g) != fmt.Sprint(w) {
						t.Fatalf("round %d query %d: wire %+v, messages %+v", round, id, g, w)
					}
				}
			}
		})
	}
}

// recvReqs is a SearchSource handing out reqs, one a call, *next
// counting them, then io.EOF.
func recvReqs(reqs [][]*pb.Query, next *int) recvFunc {
	return func() (*pb.SearchRequest, error) {
		if *next == len(reqs) {
			return nil, io.EOF
		}
		*next++
		return &pb.SearchRequest{Queries: reqs[*next-1]}, nil
	}
}
