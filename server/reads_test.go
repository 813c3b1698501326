package server_test

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/protobase/protobase/client"
	"github.com/protobase/protobase/client/where"
	pb "github.com/protobase/protobase/gen/protobase/v1"
	"github.com/protobase/protobase/server"
)

// loadUsers inserts n users: id i, name "user%04d", email "u%d@x", tags.
func loadUsers(t *testing.T, ts *testServer, n int) {
	t.Helper()
	var batch []*anypb.Any
	for i := 0; i < n; i++ {
		batch = append(batch, ts.Rec("shop.User", fmt.Sprintf(`{"id": %d, "name": "user%04d", "email": "u%d@x", "tags": ["t%d"]}`, i, i, i, i%3)))
		if len(batch) == 500 {
			ts.MustWrite(insert, batch)
			batch = nil
		}
	}
	if batch != nil {
		ts.MustWrite(insert, batch)
	}
}

func mustParse(t *testing.T, s string) *pb.Expr {
	t.Helper()
	e, err := where.Parse(s)
	if err != nil {
		t.Fatalf("parse %q: %v", s, err)
	}
	return e
}

func TestPlansThroughExplain(t *testing.T) {
	ts := startServer(t, server.Config{})
	ts.MustApply(map[string]string{"shop.proto": shopProto})
	loadUsers(t, ts, 100)
	cases := []struct {
		where  string
		access string
		index  string
		n      int
	}{
		{`id = 7`, "pk_point", "", 1},
		{`id in (1, 2, 3)`, "pk_point", "", 3},
		{`id >= 90`, "pk_range", "", 10},
		{`name = "user0042"`, "index_range", "name", 1},
		{`name prefix "user001"`, "index_range", "name", 10},
		{`email = "u5@x"`, "index_range", "email", 1},
		{`tags = "t1"`, "full_scan", "", 33},
		{`name contains "0042"`, "full_scan", "", 1},
	}
	s, err := ts.C.NewSearch(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, tc := range cases {
		res, err := s.Query(&pb.Query{Type: "shop.User", Where: mustParse(t, tc.where), Explain: true})
		if err != nil {
			t.Fatal(err)
		}
		recs, err := res.All()
		if err != nil {
			t.Fatalf("%s: %v", tc.where, err)
		}
		p := res.Plan()
		if p == nil || p.Access != tc.access || p.Index != tc.index || len(recs) != tc.n {
			t.Errorf("%s: plan %v with %d results; want %s %q with %d", tc.where, p, len(recs), tc.access, tc.index, tc.n)
		}
	}
}

// An index still building is not used by reads; once READY it is.
func TestReadsUseOnlyReadyIndexes(t *testing.T) {
	ts := startServer(t, server.Config{})
	ts.MustApply(map[string]string{"shop.proto": shopProto})
	var batch []*anypb.Any
	for i := 0; i < 3000; i++ {
		batch = append(batch, ts.Rec("shop.Order", fmt.Sprintf(`{"userId": %d, "id": %d, "total": %d}`, i%7, i, i)))
	}
	ts.MustWrite(insert, batch)
	withIdx := strings.Replace(shopProto, `option (protobase.v1.record) = { primary_key: ["user_id", "id"] };`,
		`option (protobase.v1.record) = { primary_key: ["user_id", "id"] index: { fields: "total" } };`, 1)
	ts.MustApply(map[string]string{"shop.proto": withIdx})
	// Writes during the build must land in the index too.
	var more []*anypb.Any
	for i := 3000; i < 3100; i++ {
		more = append(more, ts.Rec("shop.Order", fmt.Sprintf(`{"userId": 1, "id": %d, "total": %d}`, i, i)))
	}
	ts.MustWrite(upsert, more)
	waitIndex(t, ts, "shop.Order", "total", pb.IndexState_INDEX_STATE_READY)
	page, err := ts.C.Query(t.Context(), &pb.Query{Type: "shop.Order", Where: mustParse(t, "total >= 2990"), Explain: true}, 1000, "")
	if err != nil {
		t.Fatal(err)
	}
	if page.Plan.Access != "index_range" || len(page.Records) != 110 {
		t.Fatalf("plan %v, %d records; want index_range and 110", page.Plan, len(page.Records))
	}
}

// Many queries on one stream, fast and slow, one failing: each gets its own
// answer and the failure stays with its query.
func TestSearchManyQueriesOneStream(t *testing.T) {
	ts := startServer(t, server.Config{})
	ts.MustApply(map[string]string{"shop.proto": shopProto})
	loadUsers(t, ts, 2000)
	s, err := ts.C.NewSearch(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var qs []*pb.Query
	for i := 0; i < 300; i++ {
		switch i % 3 {
		case 0:
			qs = append(qs, &pb.Query{Type: "shop.User", Where: mustParse(t, fmt.Sprintf("id = %d", i))})
		case 1:
			qs = append(qs, &pb.Query{Type: "shop.User", Where: mustParse(t, `name contains "9"`)}) // full scan
		case 2:
			if i == 152 {
				qs = append(qs, &pb.Query{Type: "shop.User", Where: mustParse(t, `nosuch = 1`)})
			} else {
				qs = append(qs, &pb.Query{Type: "shop.User", Where: mustParse(t, fmt.Sprintf(`email = "u%d@x"`, i))})
			}
		}
	}
	// Two requests: ids continue across requests on one stream.
	r1, err := s.Batch(qs[:150])
	if err != nil {
		t.Fatal(err)
	}
	r2, err := s.Batch(qs[150:])
	if err != nil {
		t.Fatal(err)
	}
	all := slices.Concat(r1, r2)
	scanN := -1
	for i, r := range all {
		if r.ID() != uint64(i) {
			t.Fatalf("query %d has id %d", i, r.ID())
		}
		recs, err := r.All()
		if i == 152 {
			var qe *client.QueryError
			if !errors.As(err, &qe) || qe.Code != codes.InvalidArgument || !strings.Contains(qe.Msg, "nosuch") {
				t.Fatalf("bad query: %v", err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("query %d: %v", i, err)
		}
		switch i % 3 {
		case 1:
			if scanN < 0 {
				scanN = len(recs)
			}
			if len(recs) != scanN || scanN < 100 {
				t.Fatalf("scan query %d: %d records", i, len(recs))
			}
		default:
			if len(recs) != 1 {
				t.Fatalf("query %d: %d records", i, len(recs))
			}
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}

// Cancelling a stream stops the server's work on it: the Search handler
// returns (seen in the server's own gRPC metrics, which count a call when
// its handler has returned, after every worker of the stream) having read
// far less than the 50 × 5000 records asked for, and reads nothing after.
func TestSearchCancelStopsServerWork(t *testing.T) {
	ts := startServer(t, server.Config{MaxResultRecords: 10, MetricsAddr: "127.0.0.1:0"})
	ts.MustApply(map[string]string{"shop.proto": shopProto})
	loadUsers(t, ts, 5000)
	ctx, cancel := context.WithCancel(t.Context())
	s, err := ts.C.NewSearch(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var qs []*pb.Query
	for i := 0; i < 50; i++ {
		qs = append(qs, &pb.Query{Type: "shop.User"})
	}
	rs, err := s.Batch(qs)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rs[0].Next(); err != nil { // the server is working
		t.Fatal(err)
	}
	cancel()
	searchDone := `grpc_server_handled_total{grpc_code="Canceled",grpc_method="Search"`
	deadline := time.Now().Add(10 * time.Second)
	for metric(t, ts, searchDone) < 1 {
		if time.Now().After(deadline) {
			t.Fatal("the Search handler did not return after the client cancelled")
		}
		time.Sleep(5 * time.Millisecond) // polling a counter, not waiting out a race
	}
	read := metric(t, ts, "protobase_records_read_total")
	if read >= 50*5000 {
		t.Fatalf("server read %v records for a cancelled stream", read)
	}
	// Its work is over: one point lookup reads exactly one more record.
	if _, err := ts.C.Query(t.Context(), &pb.Query{Type: "shop.User", Where: mustParse(t, "id = 7")}, 1, ""); err != nil {
		t.Fatal(err)
	}
	if after := metric(t, ts, "protobase_records_read_total"); after != read+1 {
		t.Fatalf("server still reading after cancel: %v records, then %v after a one-record lookup", read, after)
	}
}

// metric returns the sum of the server's Prometheus samples whose line
// starts with prefix (a metric name, optionally with leading labels).
func metric(t *testing.T, ts *testServer, prefix string) float64 {
	t.Helper()
	resp, err := http.Get("http://" + ts.Srv.MetricsAddr() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for _, line := range strings.Split(string(b), "\n") {
		if !strings.HasPrefix(line, prefix) {
			continue
		}
		v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
		if err != nil {
			t.Fatalf("metric line %q: %v", line, err)
		}
		sum += v
	}
	return sum
}

func TestQueryPagesAndTokens(t *testing.T) {
	ts := startServer(t, server.Config{})
	ts.MustApply(map[string]string{"shop.proto": shopProto})
	loadUsers(t, ts, 1234)
	q := &pb.Query{Type: "shop.User", Where: mustParse(t, `name >= "user0100"`), Order: &pb.Order{Index: "name", Descending: true}}
	var names []string
	pages := 0
	err := ts.C.Pages(t.Context(), q, 100, func(p *client.Page) bool {
		pages++
		for _, a := range p.Records {
			names = append(names, a.String())
		}
		return true
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(names) != 1134 || pages != 12 {
		t.Fatalf("%d records in %d pages", len(names), pages)
	}
	first, err := ts.C.Query(t.Context(), q, 10, "")
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := base64.RawURLEncoding.DecodeString(first.Token)
	raw[len(raw)-1] ^= 1
	forged := base64.RawURLEncoding.EncodeToString(raw)
	other := &pb.Query{Type: "shop.User", Where: mustParse(t, `name >= "user0200"`), Order: q.Order}
	for name, tc := range map[string]struct {
		q   *pb.Query
		tok string
	}{
		"not base64":     {q, "%%%"},
		"truncated":      {q, first.Token[:10]},
		"forged":         {q, forged},
		"other query":    {other, first.Token},
		"page too large": {q, ""},
	} {
		t.Run(name, func(t *testing.T) {
			size := uint32(10)
			if name == "page too large" {
				size = 1 << 30
			}
			_, err := ts.C.Query(t.Context(), tc.q, size, tc.tok)
			if status.Code(err) != codes.InvalidArgument {
				t.Fatalf("want INVALID_ARGUMENT, got %v", err)
			}
		})
	}
}

func TestBadQueries(t *testing.T) {
	ts := startServer(t, server.Config{})
	ts.MustApply(map[string]string{"shop.proto": shopProto})
	loadUsers(t, ts, 10)
	deepExpr := &pb.Expr{Expr: &pb.Expr_Cmp{Cmp: &pb.Comparison{Field: "id", Op: pb.Op_OP_EQ, Value: &pb.Value{Kind: &pb.Value_Int{Int: 1}}}}}
	for i := 0; i < 200; i++ {
		deepExpr = &pb.Expr{Expr: &pb.Expr_Not{Not: deepExpr}}
	}
	huge := &pb.Comparison{Field: "id", Op: pb.Op_OP_IN}
	for i := 0; i < 200000; i++ {
		huge.Values = append(huge.Values, &pb.Value{Kind: &pb.Value_Int{Int: int64(i)}})
	}
	cases := map[string]struct {
		q    *pb.Query
		code codes.Code
		msg  string
	}{
		"unknown type":      {&pb.Query{Type: "shop.Nope"}, codes.NotFound, "shop.Nope"},
		"no type":           {&pb.Query{}, codes.NotFound, ""},
		"unknown field":     {&pb.Query{Type: "shop.User", Where: mustParse(t, "agee > 1")}, codes.InvalidArgument, "agee"},
		"type mismatch":     {&pb.Query{Type: "shop.User", Where: mustParse(t, `id = "x"`)}, codes.InvalidArgument, "id"},
		"operator for type": {&pb.Query{Type: "shop.User", Where: mustParse(t, `id prefix "1"`)}, codes.InvalidArgument, "id"},
		"message field":     {&pb.Query{Type: "shop.Order", Where: mustParse(t, `line = 1`)}, codes.InvalidArgument, "line"},
		"unknown index":     {&pb.Query{Type: "shop.User", Order: &pb.Order{Index: "nope"}}, codes.InvalidArgument, "nope"},
		"deep nesting":      {&pb.Query{Type: "shop.User", Where: deepExpr}, codes.InvalidArgument, ""},
		"huge IN list":      {&pb.Query{Type: "shop.User", Where: &pb.Expr{Expr: &pb.Expr_Cmp{Cmp: huge}}}, codes.InvalidArgument, ""},
		"no operator":       {&pb.Query{Type: "shop.User", Where: &pb.Expr{Expr: &pb.Expr_Cmp{Cmp: &pb.Comparison{Field: "id"}}}}, codes.InvalidArgument, ""},
	}
	s, err := ts.C.NewSearch(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			res, err := s.Query(tc.q)
			if err != nil {
				t.Fatal(err)
			}
			_, err = res.All()
			var qe *client.QueryError
			if !errors.As(err, &qe) || qe.Code != tc.code || !strings.Contains(qe.Msg, tc.msg) {
				t.Fatalf("search: want %v ~%q, got %v", tc.code, tc.msg, err)
			}
			// Scan and Query refuse it the same way.
			sc := ts.C.Scan(t.Context(), tc.q, client.ScanOptions{})
			for sc.Next() {
			}
			if status.Code(sc.Err()) != tc.code {
				t.Fatalf("scan: want %v, got %v", tc.code, sc.Err())
			}
			if _, err := ts.C.Query(t.Context(), tc.q, 10, ""); status.Code(err) != tc.code {
				t.Fatalf("query: want %v, got %v", tc.code, err)
			}
		})
	}
	// The stream survived every bad query.
	res, err := s.Query(&pb.Query{Type: "shop.User", Where: mustParse(t, "id = 3")})
	if err != nil {
		t.Fatal(err)
	}
	if recs, err := res.All(); err != nil || len(recs) != 1 {
		t.Fatalf("after bad queries: %v %v", recs, err)
	}
}

// TestSearchReadInAnyOrder reads the queries of one stream in reverse
// order. Their results arrive interleaved on one stream, so the client
// must queue per query: a bounded per-query buffer would block delivery of
// the query being read behind one not yet read, and the test would hang.
func TestSearchReadInAnyOrder(t *testing.T) {
	ts := startServer(t, server.Config{MaxResultRecords: 10})
	ts.MustApply(map[string]string{"shop.proto": shopProto})
	loadUsers(t, ts, 2000)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	s, err := ts.C.NewSearch(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var qs []*pb.Query
	for range 20 {
		qs = append(qs, &pb.Query{Type: "shop.User"})
	}
	rs, err := s.Batch(qs)
	if err != nil {
		t.Fatal(err)
	}
	for i := len(rs) - 1; i >= 0; i-- {
		recs, err := rs[i].All()
		if err != nil {
			t.Fatalf("query %d: %v", i, err)
		}
		if len(recs) != 2000 || rs[i].Count() != 2000 {
			t.Fatalf("query %d: %d records, count %d", i, len(recs), rs[i].Count())
		}
	}
}
