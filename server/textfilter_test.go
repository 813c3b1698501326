package server_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	spb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/anypb"

	pb "github.com/protobase/protobase/gen/protobase/v1"
	natstransport "github.com/protobase/protobase/internal/transport/nats"
	"github.com/protobase/protobase/server"
)

// filterUsers inserts users 1..6 (names ann, anna, bob, ...) and returns
// the text filter that matches users 2 and 5 and nothing else.
func filterUsers(t *testing.T, ts *testServer) string {
	t.Helper()
	names := []string{"ann", "anna", "bob", "cy", "andy", "dee"}
	var recs []*anypb.Any
	for i, n := range names {
		recs = append(recs, ts.Rec("shop.User", fmt.Sprintf(`{"id": %d, "name": %q, "email": "%s@x"}`, i+1, n, n)))
	}
	ts.MustWrite(insert, recs)
	return `id >= 2 and name prefix "an" and not name = "ann"`
}

// The filter field is parsed by the server: Query, Scan and Search take
// it on gRPC, REST and NATS alike, and find what the tree would.
func TestFilterTextAcrossTransports(t *testing.T) {
	ts := startTransports(t, server.Config{NoSync: true})
	f := filterUsers(t, ts)
	ctx := context.Background()
	api := ts.C.API()
	q := func() *pb.Query { return &pb.Query{Type: "shop.User", Filter: f} }

	page, err := api.Query(ctx, &pb.QueryRequest{Query: q(), PageSize: 1})
	if err != nil || len(page.Records) != 1 || page.NextPageToken == "" {
		t.Fatalf("grpc query page 1: %v %v", page, err)
	}
	page, err = api.Query(ctx, &pb.QueryRequest{Query: q(), PageSize: 5, PageToken: page.NextPageToken})
	if err != nil || len(page.Records) != 1 || page.NextPageToken != "" {
		t.Fatalf("grpc query page 2: %v %v", page, err)
	}
	sc, err := api.Scan(ctx, &pb.ScanRequest{Query: q()})
	if err != nil {
		t.Fatal(err)
	}
	var scanned int
	for {
		m, err := sc.Recv()
		if err != nil {
			t.Fatalf("scan: %v", err)
		}
		scanned += len(m.Records)
		if m.Done {
			break
		}
	}
	if scanned != 2 {
		t.Fatalf("grpc scan: %d records, want 2", scanned)
	}
	if got := searchCount(t, ts, q()); got != 2 {
		t.Fatalf("grpc search: %d records, want 2", got)
	}

	body := fmt.Sprintf(`{"type": "shop.User", "filter": %q}`, f)
	for _, c := range restClients(t, ts) {
		var resp pb.QueryResponse
		c.mustPost("/v1/query", `{"query": `+body+`}`, &resp)
		if len(resp.Records) != 2 {
			t.Fatalf("rest %s query: %v", c.name(), &resp)
		}
		code, b := c.post("/v1/search", `{"queries": [`+body+`]}`)
		if code != http.StatusOK || strings.Count(string(b), `"name":"an`) != 2 {
			t.Fatalf("rest %s search: %d %s", c.name(), code, b)
		}
		code, b = c.post("/v1/scan", `{"query": `+body+`}`)
		if code != http.StatusOK || strings.Count(string(b), `"name":"an`) != 2 {
			t.Fatalf("rest %s scan: %d %s", c.name(), code, b)
		}
	}
	for _, js := range []bool{false, true} {
		var resp pb.QueryResponse
		newNATSClient(t, ts, ts.Srv.NATSURL(), js).mustCall(natstransport.SubjectQuery, &pb.QueryRequest{Query: q()}, &resp)
		if len(resp.Records) != 2 {
			t.Fatalf("nats (json %v) query: %v", js, &resp)
		}
	}
}

// searchCount runs q alone on a Search stream and returns its record
// count, failing on a query error.
func searchCount(t *testing.T, ts *testServer, q *pb.Query) int {
	t.Helper()
	n, qe := searchOne(t, ts, q)
	if qe != nil {
		t.Fatalf("search: %v", qe)
	}
	return n
}

func searchOne(t *testing.T, ts *testServer, q *pb.Query) (int, *pb.QueryError) {
	t.Helper()
	st, err := ts.C.API().Search(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Send(&pb.SearchRequest{Queries: []*pb.Query{q}}); err != nil {
		t.Fatal(err)
	}
	if err := st.CloseSend(); err != nil {
		t.Fatal(err)
	}
	n := 0
	for {
		m, err := st.Recv()
		if err != nil {
			t.Fatalf("search recv: %v", err)
		}
		for _, r := range m.Results {
			n += len(r.Records)
		}
		if len(m.Errors) > 0 {
			return n, m.Errors[0]
		}
		if len(m.Done) > 0 {
			return n, nil
		}
	}
}

// A bad filter is INVALID_ARGUMENT naming the column, with a BadRequest
// detail naming the field, on every call and transport; so is a query
// with both filter and where. Nothing runs.
func TestFilterTextErrors(t *testing.T) {
	ts := startTransports(t, server.Config{NoSync: true})
	filterUsers(t, ts)
	ctx := context.Background()
	where := &pb.Expr{Expr: &pb.Expr_Cmp{Cmp: &pb.Comparison{Field: "id", Op: pb.Op_OP_EQ, Value: &pb.Value{Kind: &pb.Value_Int{Int: 1}}}}}
	cases := []struct {
		name, filter, want string
		where              *pb.Expr
	}{
		{"missing value", `id >= `, "column 7: expected value after", nil},
		{"unclosed paren", `(id = 1`, "column 8: expected \")\"", nil},
		{"bad string", `name = "abc`, "column 8:", nil},
		{"unknown operator", `id ~ 1`, "column 4:", nil},
		{"deep", strings.Repeat("not ", 200) + "id = 1", "nested too deeply", nil},
		{"keyword as field", `and = 1`, "column 1:", nil},
		{"both", `id = 1`, "both filter and where", where},
		{"unknown field", `id >= 1 and (agee > 3 or agee < 1)`, `filter: column 14: field agee: no field "agee" in shop.User`, nil},
		{"type mismatch", `name = 3`, "filter: column 1: field name: type mismatch", nil},
	}
	rest := restClients(t, ts)[0]
	natsc := newNATSClient(t, ts, ts.Srv.NATSURL(), true)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			q := &pb.Query{Type: "shop.User", Filter: tc.filter, Where: tc.where}
			_, err := ts.C.API().Query(ctx, &pb.QueryRequest{Query: q})
			checkFilterStatus(t, "grpc query", status.Convert(err).Proto(), tc.want)
			sc, err := ts.C.API().Scan(ctx, &pb.ScanRequest{Query: q})
			if err == nil {
				_, err = sc.Recv()
			}
			checkFilterStatus(t, "grpc scan", status.Convert(err).Proto(), tc.want)
			if _, qe := searchOne(t, ts, q); qe == nil || codes.Code(qe.Code) != codes.InvalidArgument || !strings.Contains(qe.Message, tc.want) {
				t.Fatalf("grpc search: %v, want INVALID_ARGUMENT with %q", qe, tc.want)
			}
			js, err := protojson.Marshal(&pb.QueryRequest{Query: q})
			if err != nil {
				t.Fatal(err)
			}
			code, b := rest.post("/v1/query", string(js))
			checkFilterStatus(t, "rest query", rest.restStatus(code, b, http.StatusBadRequest, codes.InvalidArgument), tc.want)
			checkFilterStatus(t, "nats query", natsc.call(natstransport.SubjectQuery, &pb.QueryRequest{Query: q}, new(pb.QueryResponse)), tc.want)
		})
	}
}

// checkFilterStatus checks an INVALID_ARGUMENT that names want in its
// message and carries a BadRequest violation of query.filter.
func checkFilterStatus(t *testing.T, call string, st *spb.Status, want string) {
	t.Helper()
	if st == nil || codes.Code(st.Code) != codes.InvalidArgument || !strings.Contains(st.Message, want) {
		t.Fatalf("%s: %v, want INVALID_ARGUMENT with %q", call, st, want)
	}
	for _, d := range st.Details {
		br := new(errdetails.BadRequest)
		if d.MessageIs(br) {
			if err := d.UnmarshalTo(br); err != nil {
				t.Fatal(err)
			}
			if len(br.FieldViolations) == 1 && br.FieldViolations[0].Field == "query.filter" {
				return
			}
		}
	}
	t.Fatalf("%s: %v has no BadRequest violation of query.filter", call, st)
}
