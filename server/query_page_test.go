package server_test

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/dynamicpb"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/protobase/protobase/client"
	pb "github.com/protobase/protobase/gen/protobase/v1"
	natstransport "github.com/protobase/protobase/internal/transport/nats"
	"github.com/protobase/protobase/server"
	"github.com/protobase/protobase/server/servertest"
)

// Query with count returns the number of matches (capped by the limit) in
// one response, without records or a token, on every transport and the Go
// client; a count query used to answer {}.
func TestQueryCountEveryTransport(t *testing.T) {
	ts := startTransports(t, server.Config{NoSync: true})
	var recs []*anypb.Any
	for i := range 25 {
		recs = append(recs, ts.Rec("shop.User", fmt.Sprintf(`{"id": "%d", "name": "n%d", "email": "u%d@x"}`, i, i%3, i)))
	}
	ts.MustWrite(insert, recs)
	rest := restClients(t, ts)
	natsPB := newNATSClient(t, ts, ts.Srv.NATSURL(), false)

	cases := []struct {
		where string
		limit uint64
		want  uint64
	}{
		{"", 0, 25},             // whole type
		{"name = \"n1\"", 0, 8}, // index range
		{"id >= 20", 0, 5},      // primary-key range
		{"id = 7", 0, 1},        // point
		{"id = 700", 0, 0},      // point, no match
		{"", 10, 10},            // the limit caps the count
		{"name = \"n0\"", 3, 3},
	}
	for _, tc := range cases {
		q := &pb.Query{Type: "shop.User", Count: true, Limit: tc.limit}
		rq := `{"type": "shop.User", "count": true, "limit": "` + fmt.Sprint(tc.limit) + `"`
		if tc.where != "" {
			q.Where = mustParse(t, tc.where)
		}
		check := func(via string, resp *pb.QueryResponse) {
			t.Helper()
			if resp.Count != tc.want || len(resp.Records) != 0 || resp.NextPageToken != "" {
				t.Errorf("%s: count %q limit %d: got count %d, %d records, token %q; want count %d",
					via, tc.where, tc.limit, resp.Count, len(resp.Records), resp.NextPageToken, tc.want)
			}
		}
		// A page size under the count must not cut it.
		resp, err := ts.C.API().Query(context.Background(), &pb.QueryRequest{Query: q, PageSize: 2})
		if err != nil {
			t.Fatalf("grpc: %v", err)
		}
		check("grpc", resp)

		page, err := ts.C.Query(context.Background(), q, 2, "")
		if err != nil {
			t.Fatalf("client: %v", err)
		}
		if page.Count != tc.want || len(page.Records) != 0 || page.Token != "" {
			t.Errorf("client: count %q: got %+v, want %d", tc.where, page, tc.want)
		}

		var natsResp pb.QueryResponse
		natsPB.mustCall(natstransport.SubjectQuery, &pb.QueryRequest{Query: q, PageSize: 2}, &natsResp)
		check("nats", &natsResp)

		if tc.where == "" { // REST: the same over JSON
			var restResp pb.QueryResponse
			rest[0].mustPost("/v1/query", `{"pageSize": 2, "query": `+rq+`}}`, &restResp)
			check("rest", &restResp)
		}
	}
	var restResp pb.QueryResponse
	rest[1].mustPost("/v1/query", `{"query": {"type": "shop.User", "count": true, "explain": true,
		"where": {"cmp": {"field": "name", "op": "OP_EQ", "value": {"string": "n2"}}}}}`, &restResp)
	if restResp.Count != 8 || restResp.Plan.GetAccess() != "index_range" {
		t.Errorf("rest count with explain: %v", &restResp)
	}
}

// A continuation token taken before its type was dropped and re-created is
// refused with FAILED_PRECONDITION over gRPC, REST and NATS: resuming it
// against the new type's keys restarted the listing or ended it early.
func TestQueryTokenAfterTypeRecreated(t *testing.T) {
	ts := startTransports(t, server.Config{NoSync: true})
	write := func() {
		var recs []*anypb.Any
		for i := range 30 {
			recs = append(recs, ts.Rec("shop.User", fmt.Sprintf(`{"id": "%d", "name": "n", "email": "u%d@x"}`, i, i)))
		}
		ts.MustWrite(insert, recs)
	}
	write()
	q := &pb.Query{Type: "shop.User"}
	first, err := ts.C.Query(context.Background(), q, 10, "")
	if err != nil || first.Token == "" {
		t.Fatalf("first page: %v %v", first, err)
	}
	user := shopProto[strings.Index(shopProto, "message User"):strings.Index(shopProto, "message Order")]
	if _, err := ts.Apply(map[string]string{"shop.proto": strings.Replace(shopProto, user, "", 1)},
		client.SchemaOptions{AllowDrop: []string{"shop.User"}}); err != nil {
		t.Fatal(err)
	}
	ts.MustApply(map[string]string{"shop.proto": shopProto})
	write()

	_, err = ts.C.Query(context.Background(), q, 10, first.Token)
	if status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "dropped and re-created") {
		t.Fatalf("grpc: old token after re-create: %v, want FAILED_PRECONDITION", err)
	}
	rest := restClients(t, ts)
	code, body := rest[0].do(http.MethodPost, "/v1/query",
		strings.NewReader(`{"query": {"type": "shop.User"}, "pageSize": 10, "pageToken": "`+first.Token+`"}`))
	if st := rest[0].restStatus(code, body, http.StatusBadRequest, codes.FailedPrecondition); !strings.Contains(st.Message, "dropped and re-created") {
		t.Fatalf("rest: old token after re-create: %s, want the cause named", body)
	}
	natsPB := newNATSClient(t, ts, ts.Srv.NATSURL(), false)
	if st := natsPB.call(natstransport.SubjectQuery, &pb.QueryRequest{Query: q, PageSize: 10, PageToken: first.Token}, new(pb.QueryResponse)); codes.Code(st.GetCode()) != codes.FailedPrecondition {
		t.Fatalf("nats: old token after re-create: %v, want FAILED_PRECONDITION", st)
	}
}

// Pages of one record each walk every record once, in key order, whether
// a key is short or longer than most; a lookup by key is a page of one.
func TestQueryPagesOfOne(t *testing.T) {
	ts := startServer(t, server.Config{NoSync: true})
	ts.MustApply(map[string]string{"kv.proto": `syntax = "proto3";
package kv;
import "protobase/v1/options.proto";
message Entry {
  option (protobase.v1.record) = { primary_key: "key" };
  string key = 1;
}
`})
	var want []string
	var recs []*anypb.Any
	for i := range 6 {
		k := fmt.Sprintf("%d-%s", i, strings.Repeat("k", i*20))
		want = append(want, k)
		recs = append(recs, ts.Rec("kv.Entry", `{"key": "`+k+`"}`))
	}
	ts.MustWrite(insert, recs)
	ctx := context.Background()
	var got []string
	err := ts.C.Pages(ctx, &pb.Query{Type: "kv.Entry"}, 1, func(p *client.Page) bool {
		for _, r := range p.Records {
			m := dynamicpb.NewMessage(ts.Desc("kv.Entry"))
			if err := proto.Unmarshal(r.Value, m); err != nil {
				t.Fatal(err)
			}
			got = append(got, servertest.FieldValue(m, "key").String())
		}
		return true
	})
	if err != nil || !slices.Equal(got, want) {
		t.Fatalf("pages of one: %q, %v; want %q", got, err, want)
	}
	for _, k := range want {
		q := &pb.Query{Type: "kv.Entry", Where: &pb.Expr{Expr: &pb.Expr_Cmp{Cmp: &pb.Comparison{
			Field: "key", Op: pb.Op_OP_EQ, Value: &pb.Value{Kind: &pb.Value_String_{String_: k}}}}}}
		p, err := ts.C.Query(ctx, q, 0, "")
		if err != nil || len(p.Records) != 1 || p.Token != "" {
			t.Fatalf("key %q: %d records, token %q, %v", k, len(p.Records), p.Token, err)
		}
	}
}
