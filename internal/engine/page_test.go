package engine_test

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	"google.golang.org/protobuf/types/known/anypb"

	pb "github.com/protobase/protobase/gen/protobase/v1"
	"github.com/protobase/protobase/internal/apierror"
	"github.com/protobase/protobase/internal/engine"
)

// pagedEngine holds 95 users, names cycling through five values.
func pagedEngine(t *testing.T) *testEngine {
	te := newEngine(t)
	var recs []*anypb.Any
	for i := 0; i < 95; i++ {
		recs = append(recs, te.Rec("shop.User", `{"id": `+itoa(i)+`, "name": "n`+itoa(i%5)+`", "email": "e`+itoa(i)+`"}`))
	}
	te.MustWrite(engine.OpInsert, recs)
	return te
}

func byName(name string) *pb.Query {
	return &pb.Query{Type: "shop.User", Where: &pb.Expr{Expr: &pb.Expr_Cmp{Cmp: &pb.Comparison{
		Field: "name", Op: pb.Op_OP_EQ, Value: &pb.Value{Kind: &pb.Value_String_{String_: name}}}}}}
}

// pages fetches every page of q and returns the records and the tokens.
func pages(t *testing.T, te *testEngine, q *pb.Query, size uint32) ([]*anypb.Any, []string) {
	t.Helper()
	var recs []*anypb.Any
	var toks []string
	tok := ""
	for {
		resp, err := query(te.E, t.Context(), &pb.QueryRequest{Query: q, PageSize: size, PageToken: tok})
		if err != nil {
			t.Fatalf("page after %d records: %v", len(recs), err)
		}
		if len(resp.Records) > int(size) {
			t.Fatalf("page of %d records, size %d", len(resp.Records), size)
		}
		recs = append(recs, resp.Records...)
		if resp.NextPageToken == "" {
			return recs, toks
		}
		tok = resp.NextPageToken
		toks = append(toks, tok)
	}
}

func TestPageTokensRoundTrip(t *testing.T) {
	te := pagedEngine(t)
	all := te.stored("shop.User")
	for _, size := range []uint32{1, 7, 95, 200} {
		got, _ := pages(t, te, &pb.Query{Type: "shop.User"}, size)
		if len(got) != len(all) {
			t.Fatalf("size %d: %d records, want %d", size, len(got), len(all))
		}
		for i := range got {
			if !bytes.Equal(got[i].Value, all[i]) {
				t.Fatalf("size %d: record %d differs from the primary-key order", size, i)
			}
		}
	}
	// Through an index, with a limit that ends inside a page.
	q := byName("n3")
	q.Limit = 11
	got, toks := pages(t, te, q, 4)
	if len(got) != 11 || len(toks) != 2 {
		t.Fatalf("limit 11 by 4: %d records over %d tokens, want 11 over 2", len(got), len(toks))
	}
	// A token survives a restart: the secret is stored.
	te = te.reopen()
	resp, err := query(te.E, t.Context(), &pb.QueryRequest{Query: q, PageSize: 4, PageToken: toks[0]})
	if err != nil || len(resp.Records) != 4 || !bytes.Equal(resp.Records[0].Value, got[4].Value) {
		t.Fatalf("token after reopen: %d records, %v", len(resp.GetRecords()), err)
	}
}

func TestPageTokensRejected(t *testing.T) {
	te := pagedEngine(t)
	q := byName("n1")
	_, toks := pages(t, te, q, 3)
	tok := toks[0]
	raw, err := base64.RawURLEncoding.DecodeString(tok)
	if err != nil {
		t.Fatalf("token is not base64url: %v", err)
	}
	flip := func(i int) string {
		b := append([]byte(nil), raw...)
		b[i] ^= 1
		return base64.RawURLEncoding.EncodeToString(b)
	}
	other := pagedEngine(t) // another database: another secret
	_, otherToks := pages(t, other, q, 3)

	cases := []struct {
		name, token string
		q           *pb.Query
		want        string
	}{
		{"not base64", "!!" + tok, q, "malformed"},
		{"truncated", tok[:len(tok)/3], q, ""},
		{"cut by one byte", base64.RawURLEncoding.EncodeToString(raw[:len(raw)-1]), q, "not issued"},
		{"forged key", flip(len(raw) - 1), q, "not issued"},
		{"forged mac", flip(0), q, "not issued"},
		{"another query", tok, byName("n2"), "another query"},
		{"another order", tok, &pb.Query{Type: "shop.User", Where: q.Where, Order: &pb.Order{Descending: true}}, "another query"},
		{"another database", otherToks[0], q, "not issued"},
		{"empty body", base64.RawURLEncoding.EncodeToString(make([]byte, 20)), q, "malformed"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := query(te.E, t.Context(), &pb.QueryRequest{Query: c.q, PageSize: 3, PageToken: c.token})
			var e *apierror.Error
			if !errors.As(err, &e) || e.Code != apierror.InvalidArgument || e.Field != "page_token" {
				t.Fatalf("want INVALID_ARGUMENT on page_token, got %v", err)
			}
			if !strings.Contains(e.Msg, "invalid page token") || !strings.Contains(e.Msg, c.want) {
				t.Fatalf("message %q, want it to say %q", e.Msg, c.want)
			}
		})
	}
}

// A token names the type instance and the index it was made for: after the
// type is dropped and re-created (new storage id), or the index it read is
// dropped and re-added, the old token is FAILED_PRECONDITION, never resumed
// against the new keys (a forward listing restarted at page one, a reverse
// one ended early).
func TestPageTokensStaleAfterRecreate(t *testing.T) {
	te := pagedEngine(t)
	queries := map[string]*pb.Query{
		"by key":            {Type: "shop.User"},
		"by key descending": {Type: "shop.User", Order: &pb.Order{Descending: true}},
		"by index":          byName("n2"),
	}
	toks := map[string]string{}
	for name, q := range queries {
		_, ts := pages(t, te, q, 5)
		toks[name] = ts[0]
	}
	user := shopProto[strings.Index(shopProto, "message User"):strings.Index(shopProto, "message Member")]
	if _, err := te.E.ApplySchema(t.Context(), &pb.ApplySchemaRequest{
		Files:     map[string]string{"shop.proto": strings.Replace(shopProto, user, "", 1)},
		AllowDrop: []string{"shop.User"},
	}); err != nil {
		t.Fatal(err)
	}
	te.Apply(map[string]string{"shop.proto": shopProto})
	var recs []*anypb.Any
	for i := 0; i < 95; i++ {
		recs = append(recs, te.Rec("shop.User", `{"id": `+itoa(i)+`, "name": "n`+itoa(i%5)+`", "email": "e`+itoa(i)+`"}`))
	}
	te.MustWrite(engine.OpInsert, recs)
	for name, q := range queries {
		wantStale(t, te, name, q, toks[name], "dropped and re-created")
		// Without a token the listing starts again and is whole.
		if got, _ := pages(t, te, q, 5); len(got) != 95 && len(got) != 19 {
			t.Errorf("%s: fresh listing has %d records", name, len(got))
		}
	}

	// The index dropped and re-added: the same type, another access path.
	q := queries["by index"]
	_, ts := pages(t, te, q, 5)
	te.ApplyDropping(map[string]string{"shop.proto": noNameIndex}, "shop.User.name")
	wantStale(t, te, "index dropped", q, ts[0], "access path changed")
	te.Apply(map[string]string{"shop.proto": shopProto})
	waitIndexNamed(t, te, "name")
	wantStale(t, te, "index re-added", q, ts[0], "access path changed")
	if got, _ := pages(t, te, q, 5); len(got) != 19 {
		t.Errorf("fresh listing by the re-added index has %d records, want 19", len(got))
	}
}

func wantStale(t *testing.T, te *testEngine, name string, q *pb.Query, tok, why string) {
	t.Helper()
	resp, err := query(te.E, t.Context(), &pb.QueryRequest{Query: q, PageSize: 5, PageToken: tok})
	var e *apierror.Error
	if !errors.As(err, &e) || e.Code != apierror.FailedPrecondition || e.Field != "page_token" {
		t.Fatalf("%s: old token gave %d records and %v, want FAILED_PRECONDITION on page_token", name, len(resp.GetRecords()), err)
	}
	if !strings.Contains(e.Msg, why) {
		t.Fatalf("%s: message %q, want it to say %q", name, e.Msg, why)
	}
}

// keyLikeFilters are text filters on shop.User that are, or look like,
// primary-key lookups, or are wrong.
var keyLikeFilters = []string{
	`id == 7`, `id = 7`, `id == -1`, `id == 95`, `(id == 7)`, `id == 7 and name == "n2"`,
	`id == 7 and name == "n1"`, `id in (7, 8)`, `id == 7.5`, `id == "7"`, `id == 99999999999999999999`,
	`name == "n2"`, `id ==`, `nosuch == 1`, "id == 7\xff", `id == 7 or id == 8`, `id > 93`,
}

// A unary Query whose text filter is a primary-key equality takes the
// lookup path that skips the planner; it must answer what the planner
// would (a query with explain always goes through the planner): the same
// records, the same errors, for keys present and absent, filters that
// only look like lookups, and filters that are wrong.
func TestTextFilterLookupAgreesWithPlanner(t *testing.T) {
	te := pagedEngine(t)
	for _, f := range keyLikeFilters {
		t.Run(f, func(t *testing.T) {
			fast, ferr := query(te.E, t.Context(), &pb.QueryRequest{Query: &pb.Query{Type: "shop.User", Filter: f}})
			planned, perr := query(te.E, t.Context(), &pb.QueryRequest{Query: &pb.Query{Type: "shop.User", Filter: f, Explain: true}})
			if (ferr == nil) != (perr == nil) || (ferr != nil && ferr.Error() != perr.Error()) {
				t.Fatalf("errors differ:\n  lookup:  %v\n  planner: %v", ferr, perr)
			}
			if ferr != nil {
				return
			}
			if len(fast.Records) != len(planned.Records) {
				t.Fatalf("%d records, planner %d", len(fast.Records), len(planned.Records))
			}
			for i := range fast.Records {
				if !bytes.Equal(fast.Records[i].GetValue(), planned.Records[i].GetValue()) {
					t.Errorf("record %d differs from the planner's", i)
				}
			}
		})
	}
	for _, c := range []struct {
		q    *pb.Query
		code apierror.Code
	}{
		{&pb.Query{Type: "shop.User", Filter: `id == 7`, Where: lookup(7).Where}, apierror.InvalidArgument},
		{&pb.Query{Type: "shop.Nope", Filter: `id == 7`}, apierror.NotFound},
		{&pb.Query{Filter: `id == 7`}, apierror.NotFound},
	} {
		if _, err := query(te.E, t.Context(), &pb.QueryRequest{Query: c.q}); apierror.CodeOf(err) != c.code {
			t.Errorf("%v: %v, want %v", c.q, err, c.code)
		}
	}
}

// In a Search too, a text filter that is a primary-key equality is looked
// up without the planner, and the answers (records, counts, errors) are
// the planner's (explain forces the planner), by messages and as wire
// bytes, for each query alone and for all of them in one request.
func TestSearchTextFilterLookupAgreesWithPlanner(t *testing.T) {
	te := pagedEngine(t)
	var filters []string // those a message can carry: proto strings are UTF-8
	for _, f := range keyLikeFilters {
		if utf8.ValidString(f) {
			filters = append(filters, f)
		}
	}
	n := len(filters)
	var reqs [][]*pb.Query
	var all, allExplained []*pb.Query
	for _, f := range filters {
		all = append(all, &pb.Query{Type: "shop.User", Filter: f})
		allExplained = append(allExplained, &pb.Query{Type: "shop.User", Filter: f, Explain: true})
	}
	for i := range all {
		reqs = append(reqs, all[i:i+1])
	}
	for i := range allExplained {
		reqs = append(reqs, allExplained[i:i+1])
	}
	reqs = append(reqs, all, allExplained)
	for _, wire := range []bool{false, true} {
		got, _, _ := searchAnswers(t, te.E, reqs, wire)
		for i, f := range filters {
			for _, pair := range [][2]uint64{{uint64(i), uint64(n + i)}, {uint64(2*n + i), uint64(3*n + i)}} {
				a, b := got[pair[0]], got[pair[1]]
				if a == nil || b == nil {
					t.Fatalf("wire %v, %q: no answer (%v, %v)", wire, f, a, b)
				}
				if fmt.Sprint(a.recs, a.count, a.errs, a.done) != fmt.Sprint(b.recs, b.count, b.errs, b.done) {
					t.Errorf("wire %v, %q: lookup %v %d %v, planner %v %d %v", wire, f, a.recs, a.count, a.errs, b.recs, b.count, b.errs)
				}
			}
		}
	}
}
