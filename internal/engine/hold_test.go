package engine_test

import (
	"io"
	"strings"
	"testing"

	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/structpb"

	pb "github.com/protobase/protobase/gen/protobase/v1"
	"github.com/protobase/protobase/internal/apierror"
	"github.com/protobase/protobase/internal/engine"
)

// A record larger than the whole result budget cannot be answered: each
// read path says so (RESOURCE_EXHAUSTED naming the budget) instead of
// waiting for room that can never be (a Get or a page: none fits their
// bound, which is within the budget), and the budget is whole afterwards.
// A record larger than a response but within the budget is answered.
func TestRecordOverResultBudget(t *testing.T) {
	te := openEngine(t, t.TempDir(), engine.Options{MaxResultBufferBytes: 2 << 20})
	te.Apply(map[string]string{"shop.proto": shopProto})
	big := strings.Repeat("n", 3<<20)
	te.MustWrite(engine.OpInsert, []*anypb.Any{
		te.Rec("shop.User", `{"id": 1, "email": "a", "name": "`+big+`"}`),
		te.Rec("shop.User", `{"id": 2, "email": "b", "name": "`+big[:3<<19]+`"}`), // 1.5 MiB
	})
	over := func(what string, err error) {
		t.Helper()
		if codeOf(err) != apierror.ResourceExhausted || !strings.Contains(err.Error(), "2097152 bytes") {
			t.Fatalf("%s of a record over the result budget: %v", what, err)
		}
	}
	for range 2 { // twice: nothing of the budget is kept by the first
		_, err := getRecords(te.E, t.Context(), &pb.GetRequest{Type: "shop.User", Keys: []*structpb.Value{structpb.NewNumberValue(1)}})
		over("get", err)
		_, err = query(te.E, t.Context(), &pb.QueryRequest{Query: &pb.Query{Type: "shop.User"}})
		over("query", err)
		err = te.E.Scan(t.Context(), &pb.ScanRequest{Query: &pb.Query{Type: "shop.User", Order: &pb.Order{Descending: true}}},
			func(*pb.ScanResponse) error { return nil })
		over("scan", err)
		var qerr *pb.QueryError
		sent := false
		err = te.E.Search(t.Context(), func() (*pb.SearchRequest, error) {
			if sent {
				return nil, io.EOF
			}
			sent = true
			return &pb.SearchRequest{Queries: []*pb.Query{{Type: "shop.User", Order: &pb.Order{Descending: true}}}}, nil
		}, func(resp *pb.SearchResponse) error {
			if len(resp.Errors) > 0 {
				qerr = resp.Errors[0]
			}
			return nil
		})
		if err != nil || qerr == nil || apierror.Code(qerr.Code) != apierror.ResourceExhausted {
			t.Fatalf("search of a record over the result budget: %v, query error %v", err, qerr)
		}
	}
	resp, err := getRecords(te.E, t.Context(), &pb.GetRequest{Type: "shop.User", Keys: []*structpb.Value{structpb.NewNumberValue(2)}})
	if err != nil || len(resp.Records) != 1 {
		t.Fatalf("get of a 1.5 MiB record within a 2 MiB budget: %v %v", resp, err)
	}
}
