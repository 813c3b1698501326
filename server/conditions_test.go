package server_test

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/protobase/protobase/client"
	pb "github.com/protobase/protobase/gen/protobase/v1"
	"github.com/protobase/protobase/internal/store/etcd/etcdtest"
	"github.com/protobase/protobase/server"
	"github.com/protobase/protobase/server/servertest"
)

// condEnv is a server holding users 1 (Ann), 2 (Bob) and 3 (Cy), and what
// the condition tests share.
type condEnv struct {
	t  *testing.T
	ts *testServer
}

func newCondEnv(t *testing.T, cfg server.Config) *condEnv {
	t.Helper()
	e := &condEnv{t: t, ts: startServer(t, cfg)}
	e.ts.MustApply(map[string]string{"shop.proto": shopProto})
	e.ts.MustWrite(insert, []*anypb.Any{e.user(1, "Ann"), e.user(2, "Bob"), e.user(3, "Cy")})
	return e
}

func (e *condEnv) user(id int, name string) *anypb.Any {
	return e.ts.Rec("shop.User", fmt.Sprintf(`{"id": %d, "name": %q, "email": "%d@x"}`, id, name, id))
}

// key is a key record of user id.
func (e *condEnv) key(id int) *anypb.Any { return e.ts.Rec("shop.User", fmt.Sprintf(`{"id": %d}`, id)) }

func (e *condEnv) version(id int) uint64 {
	e.t.Helper()
	_, v := getVersions(e.t, e.ts, id)
	return v[0]
}

// state renders users 1-30 with their versions: what a batch that
// failed must leave as it was.
func (e *condEnv) state() string {
	e.t.Helper()
	ids := make([]int, 30)
	for i := range ids {
		ids[i] = i + 1
	}
	recs, vers := getVersions(e.t, e.ts, ids...)
	var b strings.Builder
	for i, r := range recs {
		fmt.Fprintf(&b, "%d:%s@%d ", ids[i], hex.EncodeToString(r.GetValue()), vers[i])
	}
	return b.String()
}

// apply applies one batch through the Go client.
func (e *condEnv) apply(b client.Batch) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := e.ts.C.Apply(ctx, b)
	return err
}

func (e *condEnv) mustApply(what string, b client.Batch) {
	e.t.Helper()
	if err := e.apply(b); err != nil {
		e.t.Fatalf("%s: %v", what, err)
	}
}

// aborted applies b, which must fail with ABORTED naming condition cond,
// record rec and the version found, and leave the state as it was.
func (e *condEnv) aborted(what string, b client.Batch, cond uint32, rec, found uint64) *pb.WriteError {
	e.t.Helper()
	before := e.state()
	we := servertest.WriteErr(e.t, e.apply(b), codes.Aborted)
	if we.Condition == nil || *we.Condition != cond || we.Record != rec || we.Version != found || we.TypeUrl != "type.googleapis.com/shop.User" {
		e.t.Errorf("%s: %v, want condition %d, record %d, version %d of shop.User", what, we, cond, rec, found)
	}
	if e.state() != before {
		e.t.Errorf("%s: a batch whose condition failed changed the records", what)
	}
	return we
}

func msgs(as ...*anypb.Any) []proto.Message {
	out := make([]proto.Message, len(as))
	for i, a := range as {
		out[i] = a
	}
	return out
}

func conds(cs ...*pb.Condition) []*pb.Condition { return cs }

// Each target and each check, holding and failing: a batch applies when
// its conditions hold; when one fails nothing of it applies, and ABORTED
// names the condition, the record of a record condition and the version
// found (the highest among a query's matches).
func TestConditionChecks(t *testing.T) {
	for _, be := range versionBackends() {
		t.Run(be.name, func(t *testing.T) {
			e := newCondEnv(t, be.cfg(t))
			testRecordConditions(e)
			testKeyConditions(e)
			testQueryConditions(e)
		})
	}
}

func testRecordConditions(e *condEnv) {
	v1 := e.version(1)
	e.mustApply("record at its version", client.Batch{Op: upsert, Records: msgs(e.user(1, "Ann2"), e.user(10, "Ten")),
		Conditions: conds(client.IfVersion(0, v1))})
	v1b := e.version(1)
	if v1b <= v1 || e.version(10) != v1b {
		e.t.Fatalf("versions after the conditional upsert: user 1 %d (was %d), user 10 %d", v1b, v1, e.version(10))
	}
	e.aborted("record at an old version", client.Batch{Op: upsert, Records: msgs(e.user(1, "Ann3"), e.user(11, "Eleven")),
		Conditions: conds(client.IfVersion(0, v1))}, 0, 0, v1b)
	e.aborted("second record at an old version", client.Batch{Op: upsert, Records: msgs(e.user(11, "Eleven"), e.user(1, "Ann3")),
		Conditions: conds(client.IfVersion(1, v1))}, 0, 1, v1b)

	// Version 0: the record must not exist.
	e.mustApply("absent record", client.Batch{Op: upsert, Records: msgs(e.user(4, "Dee")), Conditions: conds(client.IfVersion(0, 0))})
	e.aborted("present record expected absent", client.Batch{Op: upsert, Records: msgs(e.user(4, "Dee2")),
		Conditions: conds(client.IfVersion(0, 0))}, 0, 0, e.version(4))

	// Filters: the stored record exists and matches.
	e.mustApply("record matching", client.Batch{Op: update, Records: msgs(e.user(2, "Bob2")),
		Conditions: conds(client.IfMatches(0, `name = "Bob"`))})
	we := e.aborted("record no longer matching", client.Batch{Op: update, Records: msgs(e.user(2, "Bob3")),
		Conditions: conds(client.IfMatches(0, `name = "Bob"`))}, 0, 0, e.version(2))
	if !strings.Contains(we.Reason, "filter") {
		e.t.Errorf("reason %q does not say the filter failed", we.Reason)
	}
	e.aborted("absent record with a filter", client.Batch{Op: upsert, Records: msgs(e.user(9, "Nine")),
		Conditions: conds(client.IfMatches(0, `id = 9`))}, 0, 0, 0)

	// Both checks at once must both hold.
	both := func(v uint64, filter string) *pb.Condition {
		c := client.IfVersion(0, v)
		c.Filter = filter
		return c
	}
	v2 := e.version(2)
	e.aborted("right version, filter failing", client.Batch{Op: update, Records: msgs(e.user(2, "Bob3")),
		Conditions: conds(both(v2, `name = "Bob"`))}, 0, 0, v2)
	e.aborted("filter holding, wrong version", client.Batch{Op: update, Records: msgs(e.user(2, "Bob3")),
		Conditions: conds(both(v2-1, `name = "Bob2"`))}, 0, 0, v2)
	e.mustApply("both holding", client.Batch{Op: update, Records: msgs(e.user(2, "Bob3")), Conditions: conds(both(v2, `name = "Bob2"`))})
}

func testKeyConditions(e *condEnv) {
	v1 := e.version(1)
	e.mustApply("key at its version", client.Batch{Op: update, Records: msgs(e.user(3, "Cy2")), Conditions: conds(client.IfKey(e.key(1), v1))})
	e.mustApply("absent key", client.Batch{Op: update, Records: msgs(e.user(3, "Cy3")), Conditions: conds(client.IfKey(e.key(99), 0))})
	e.aborted("key at another version", client.Batch{Op: update, Records: msgs(e.user(3, "Cy4")),
		Conditions: conds(client.IfKey(e.key(1), v1-1))}, 0, 0, v1)
	e.aborted("key expected absent", client.Batch{Op: update, Records: msgs(e.user(3, "Cy4")),
		Conditions: conds(client.IfKey(e.key(1), 0))}, 0, 0, v1)
	// A key record's other fields are ignored.
	e.mustApply("key record with more fields", client.Batch{Op: update, Records: msgs(e.user(3, "Cy4")),
		Conditions: conds(client.IfKey(e.user(1, "whatever"), v1))})
	e.mustApply("key matching", client.Batch{Op: update, Records: msgs(e.user(3, "Cy5")),
		Conditions: conds(client.IfKeyMatches(e.key(2), `name = "Bob3" and email = "2@x"`))})
	e.aborted("key not matching", client.Batch{Op: update, Records: msgs(e.user(3, "Cy6")),
		Conditions: conds(client.IfKeyMatches(e.key(2), `email = "nope"`))}, 0, 0, e.version(2))
	e.aborted("absent key with a filter", client.Batch{Op: update, Records: msgs(e.user(3, "Cy6")),
		Conditions: conds(client.IfKeyMatches(e.key(98), `id = 98`))}, 0, 0, 0)
}

// matches reads q with versions: its count and highest version.
func (e *condEnv) matches(q *pb.Query) (count, top uint64) {
	e.t.Helper()
	q = proto.Clone(q).(*pb.Query)
	q.Versions = true
	page, err := e.ts.C.Query(context.Background(), q, 1000, "")
	if err != nil {
		e.t.Fatal(err)
	}
	for _, v := range page.Versions {
		top = max(top, v)
	}
	return uint64(len(page.Records)), top
}

func testQueryConditions(e *condEnv) {
	bs := &pb.Query{Type: "shop.User", Filter: `name prefix "B"`}
	n, top := e.matches(bs)
	if n != 1 || top == 0 {
		e.t.Fatalf("users named B...: %d, highest version %d", n, top)
	}
	e.mustApply("query unchanged", client.Batch{Op: upsert, Records: msgs(e.user(5, "Eve")), Conditions: conds(client.IfQuery(bs, n, top))})
	// A write that changes no match leaves the query's answer as it was.
	e.mustApply("query still unchanged", client.Batch{Op: upsert, Records: msgs(e.user(5, "Eve2")), Conditions: conds(client.IfQuery(bs, n, top))})
	e.mustApply("a new match", client.Batch{Op: upsert, Records: msgs(e.user(6, "Ben"))})
	_, top6 := e.matches(bs)
	we := e.aborted("query with a new match", client.Batch{Op: upsert, Records: msgs(e.user(7, "Gus")),
		Conditions: conds(client.IfQuery(bs, n, top))}, 0, 0, top6)
	if !strings.Contains(we.Reason, "matches 2 records") {
		e.t.Errorf("reason %q does not give the count found", we.Reason)
	}
	e.mustApply("count alone", client.Batch{Op: upsert, Records: msgs(e.user(7, "Gus")), Conditions: conds(client.IfCount(bs, 2))})
	e.aborted("count alone, wrong", client.Batch{Op: upsert, Records: msgs(e.user(8, "Hal")),
		Conditions: conds(client.IfCount(bs, 1))}, 0, 0, top6)
	maxOnly := func(q *pb.Query, v uint64) *pb.Condition {
		return &pb.Condition{Target: &pb.Condition_Query{Query: q}, MaxVersion: &v}
	}
	e.mustApply("highest version alone", client.Batch{Op: upsert, Records: msgs(e.user(8, "Hal")), Conditions: conds(maxOnly(bs, top6))})
	e.aborted("highest version alone, wrong", client.Batch{Op: upsert, Records: msgs(e.user(8, "Hal2")),
		Conditions: conds(maxOnly(bs, top))}, 0, 0, top6)

	// The query's limit and order apply: the last user by id alone.
	all, _ := e.matches(&pb.Query{Type: "shop.User"})
	last := &pb.Query{Type: "shop.User", Order: &pb.Order{Descending: true}, Limit: 1}
	_, lastTop := e.matches(last)
	e.mustApply("limited query", client.Batch{Op: upsert, Records: msgs(e.user(8, "Hal2")),
		Conditions: conds(client.IfCount(&pb.Query{Type: "shop.User", Limit: 2}, 2), client.IfQuery(last, 1, lastTop))})
	e.aborted("limited query, all its matches expected", client.Batch{Op: upsert, Records: msgs(e.user(8, "Hal3")),
		Conditions: conds(client.IfCount(&pb.Query{Type: "shop.User", Limit: 2}, all))}, 0, 0, max(e.version(1), e.version(2)))
	e.mustApply("query without matches", client.Batch{Op: upsert, Records: msgs(e.user(8, "Hal3")),
		Conditions: conds(client.IfQuery(&pb.Query{Type: "shop.Order"}, 0, 0), client.IfQuery(&pb.Query{Type: "shop.User", Where: client.Eq("id", 404)}, 0, 0))})

	// Several conditions: the first that fails is named.
	v1 := e.version(1)
	e.aborted("third of three conditions", client.Batch{Op: upsert, Records: msgs(e.user(1, "Ann4")),
		Conditions: conds(client.IfVersion(0, v1), client.IfKey(e.key(404), 0), client.IfCount(bs, 5), client.IfKey(e.key(1), 0))}, 2, 0, top6)
}

// A failed condition ends the stream with ABORTED: the batches before
// it stay applied and the error's counts say so, the ones after it are
// never applied. The same on the client streams of one op.
func TestConditionFailureKeepsEarlierBatches(t *testing.T) {
	for _, be := range versionBackends() {
		t.Run(be.name, func(t *testing.T) {
			e := newCondEnv(t, be.cfg(t))
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			st, err := e.ts.C.API().Write(ctx)
			if err != nil {
				t.Fatal(err)
			}
			for _, req := range []*pb.WriteStreamRequest{
				{Op: upsert, Records: []*anypb.Any{e.user(20, "T")}, Ack: true},
				{Op: upsert, Records: []*anypb.Any{e.user(21, "T")}, Conditions: conds(client.IfVersion(0, 12345))},
				{Op: upsert, Records: []*anypb.Any{e.user(22, "T")}},
			} {
				if err := st.Send(req); err != nil && !errors.Is(err, io.EOF) {
					t.Fatal(err)
				}
			}
			_ = st.CloseSend()
			var acks int
			for err == nil {
				if _, err = st.Recv(); err == nil {
					acks++
				}
			}
			we := servertest.WriteErr(t, err, codes.Aborted)
			if acks != 1 || we.Batch != 1 || we.BatchesApplied != 1 || we.RecordsApplied != 1 || we.Condition == nil || *we.Condition != 0 || we.Version != 0 {
				t.Fatalf("after %d acks: %v, want batch 1 failing on condition 0 (version 0 found) after one batch of one record", acks, we)
			}
			if e.version(20) == 0 || e.version(21) != 0 || e.version(22) != 0 {
				t.Fatalf("users 20-22 at versions %d %d %d: want the first batch's only", e.version(20), e.version(21), e.version(22))
			}

			ins, err := e.ts.C.API().Insert(ctx)
			if err != nil {
				t.Fatal(err)
			}
			_ = ins.Send(&pb.WriteRequest{Records: []*anypb.Any{e.user(23, "T")}})
			_ = ins.Send(&pb.WriteRequest{Records: []*anypb.Any{e.user(24, "T")}, Conditions: conds(client.IfKey(e.key(23), 0))})
			_, err = ins.CloseAndRecv()
			we = servertest.WriteErr(t, err, codes.Aborted)
			if v := e.version(23); we.Batch != 1 || we.BatchesApplied != 1 || we.Version != v || v == 0 || e.version(24) != 0 {
				t.Fatalf("insert stream: %v, user 23 at %d, want batch 1 failing on user 23's version", we, v)
			}
		})
	}
}

// A batch of conditions and no records is a pure check: it succeeds or
// fails as its conditions do, and writes nothing either way.
func TestConditionCheckOnly(t *testing.T) {
	for _, be := range versionBackends() {
		t.Run(be.name, func(t *testing.T) {
			e := newCondEnv(t, be.cfg(t))
			v1, v2 := e.version(1), e.version(2)
			all := &pb.Query{Type: "shop.User"}
			before := e.state()
			e.mustApply("check that holds", client.Batch{Op: update,
				Conditions: conds(client.IfKey(e.key(1), v1), client.IfKey(e.key(50), 0), client.IfCount(all, 3))})
			e.aborted("check that fails", client.Batch{Op: update,
				Conditions: conds(client.IfKey(e.key(1), v1), client.IfKey(e.key(2), 0))}, 1, 0, v2)
			if e.state() != before {
				t.Fatal("a check changed the records")
			}
			e.mustApply("a write", client.Batch{Op: update, Records: msgs(e.user(1, "Ann2"))})
			e.aborted("check after the write", client.Batch{Op: update, Conditions: conds(client.IfKey(e.key(1), v1))}, 0, 0, e.version(1))
			e.aborted("query check after the write", client.Batch{Op: remove,
				Conditions: conds(client.IfQuery(all, 3, v1))}, 0, 0, e.version(1))
		})
	}
}

// Every malformed condition is INVALID_ARGUMENT naming it and its field,
// before anything of the batch is checked or applied.
func TestConditionMalformed(t *testing.T) {
	for _, be := range versionBackends() {
		t.Run(be.name, func(t *testing.T) {
			e := newCondEnv(t, be.cfg(t))
			zero, one := uint64(0), uint64(1)
			rec := func(i uint32) *pb.Condition_Record { return &pb.Condition_Record{Record: i} }
			qry := func(q *pb.Query) *pb.Condition_Query { return &pb.Condition_Query{Query: q} }
			users := &pb.Query{Type: "shop.User"}
			for _, tc := range []struct {
				name  string
				c     *pb.Condition
				field string
			}{
				{"no target", &pb.Condition{Version: &zero}, "target"},
				{"record without a check", &pb.Condition{Target: rec(0)}, "version"},
				{"record out of range", &pb.Condition{Target: rec(1), Version: &zero}, "record"},
				{"record with a count", &pb.Condition{Target: rec(0), Count: &one}, "count"},
				{"record with a highest version", &pb.Condition{Target: rec(0), Version: &zero, MaxVersion: &one}, "max_version"},
				{"key of an unknown type", &pb.Condition{Target: &pb.Condition_Key{Key: &anypb.Any{TypeUrl: "type.googleapis.com/shop.Nope"}}, Version: &zero}, "key"},
				{"key without a type", &pb.Condition{Target: &pb.Condition_Key{Key: &anypb.Any{}}, Version: &zero}, "key"},
				{"key that does not decode", &pb.Condition{Target: &pb.Condition_Key{Key: &anypb.Any{TypeUrl: "type.googleapis.com/shop.User", Value: []byte{0x08}}}, Version: &zero}, "key"},
				{"key without a check", &pb.Condition{Target: &pb.Condition_Key{Key: e.key(1)}}, "version"},
				{"filter that does not parse", &pb.Condition{Target: rec(0), Filter: `name =`}, "filter"},
				{"filter on an unknown field", &pb.Condition{Target: rec(0), Filter: `nickname = "x"`}, "filter"},
				{"filter of the wrong kind", &pb.Condition{Target: rec(0), Filter: `id = "x"`}, "filter"},
				{"query without a check", &pb.Condition{Target: qry(users)}, "count"},
				{"query with a version", &pb.Condition{Target: qry(users), Count: &one, Version: &zero}, "version"},
				{"query with a filter", &pb.Condition{Target: qry(users), Count: &one, Filter: "id = 1"}, "filter"},
				{"query missing", &pb.Condition{Target: qry(nil), Count: &one}, "query"},
				{"query of an unknown type", &pb.Condition{Target: qry(&pb.Query{Type: "shop.Nope"}), Count: &one}, "query"},
				{"query without a type", &pb.Condition{Target: qry(&pb.Query{}), Count: &one}, "query"},
				{"query that does not compile", &pb.Condition{Target: qry(&pb.Query{Type: "shop.User", Filter: "nickname > 1"}), Count: &one}, "query"},
				{"query with filter and where", &pb.Condition{Target: qry(&pb.Query{Type: "shop.User", Filter: "id > 1", Where: client.Eq("id", 1)}), Count: &one}, "query"},
				{"query ordered by an unknown index", &pb.Condition{Target: qry(&pb.Query{Type: "shop.User", Order: &pb.Order{Index: "nope"}}), Count: &one}, "query"},
			} {
				before := e.state()
				err := e.apply(client.Batch{Op: upsert, Records: msgs(e.user(1, "Changed")),
					Conditions: conds(client.IfKey(e.key(99), 0), tc.c)})
				we := servertest.WriteErr(t, err, codes.InvalidArgument)
				if we.Condition == nil || *we.Condition != 1 || we.Field != tc.field || !strings.Contains(err.Error(), "condition 1") {
					t.Errorf("%s: %v (%v), want condition 1, field %q", tc.name, we, err, tc.field)
				}
				if e.state() != before {
					t.Errorf("%s: the batch changed the records", tc.name)
				}
			}
		})
	}
}

// The limits: conditions per batch, and the records the query conditions
// of one batch read together (matches or not): RESOURCE_EXHAUSTED naming
// the condition past them.
func TestConditionLimits(t *testing.T) {
	for _, be := range versionBackends() {
		t.Run(be.name, func(t *testing.T) {
			cfg := be.cfg(t)
			cfg.MaxConditionsPerBatch, cfg.MaxConditionReads = 3, 5
			e := newCondEnv(t, cfg)
			e.ts.MustWrite(insert, []*anypb.Any{e.user(4, "D"), e.user(5, "E"), e.user(6, "F"), e.user(7, "G"), e.user(8, "H")})
			absent := client.IfKey(e.key(99), 0)
			e.mustApply("as many conditions as allowed", client.Batch{Op: upsert, Records: msgs(e.user(9, "I")), Conditions: conds(absent, absent, absent)})
			exhausted := func(what string, b client.Batch, cond uint32) {
				t.Helper()
				before := e.state()
				we := servertest.WriteErr(t, e.apply(b), codes.ResourceExhausted)
				if we.Condition == nil || *we.Condition != cond {
					t.Errorf("%s: %v, want condition %d named", what, we, cond)
				}
				if e.state() != before {
					t.Errorf("%s: the batch changed the records", what)
				}
			}
			exhausted("one condition too many", client.Batch{Op: upsert, Records: msgs(e.user(10, "J")), Conditions: conds(absent, absent, absent, absent)}, 3)
			exhausted("a check of one condition too many", client.Batch{Op: upsert, Conditions: conds(absent, absent, absent, absent)}, 3)

			users := &pb.Query{Type: "shop.User"}
			exhausted("a query reading 9 records", client.Batch{Op: upsert, Records: msgs(e.user(10, "J")), Conditions: conds(client.IfCount(users, 9))}, 0)
			// The records a filter passes over count: one match among 9 read.
			exhausted("a query reading 9 records for one match", client.Batch{Op: upsert, Records: msgs(e.user(10, "J")),
				Conditions: conds(client.IfCount(&pb.Query{Type: "shop.User", Filter: `email contains "9@"`}, 1))}, 0)
			few := &pb.Query{Type: "shop.User", Filter: "id <= 3"}
			exhausted("two queries reading 6 records together", client.Batch{Op: upsert, Records: msgs(e.user(10, "J")),
				Conditions: conds(client.IfCount(few, 3), client.IfCount(few, 3))}, 1)
			e.mustApply("queries within the bound", client.Batch{Op: upsert, Records: msgs(e.user(10, "J")),
				Conditions: conds(client.IfCount(&pb.Query{Type: "shop.User", Limit: 2}, 2), client.IfCount(few, 3))})
		})
	}
}

// Concurrent conditional writes from 8 clients, round after round: every
// client reads user 1's version, then all update it on that version at
// once, and exactly one wins each round; and all insert an order on
// condition that the round's user has none, and exactly one order is
// stored per round (no write skew). On etcd also across two servers
// sharing the store, where only the store's preconditions order them.
func TestConditionRace(t *testing.T) {
	for _, be := range versionBackends() {
		t.Run(be.name, func(t *testing.T) {
			e := newCondEnv(t, be.cfg(t))
			raceRounds(e, []*testServer{e.ts})
		})
	}
	t.Run("etcd, two servers", func(t *testing.T) {
		a, b, _ := sharedPair(t, etcdtest.Roomy)
		e := &condEnv{t: t, ts: a}
		e.ts.MustWrite(insert, []*anypb.Any{e.user(1, "Ann")})
		raceRounds(e, []*testServer{a, b})
	})
}

// raceRounds runs the rounds of TestConditionRace with 8 clients spread
// over servers.
func raceRounds(e *condEnv, servers []*testServer) {
	t := e.t
	const clients, rounds = 8, 6
	cs := make([]*client.Client, clients)
	for i := range cs {
		c, err := client.Dial(servers[i%len(servers)].Srv.Addr())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		cs[i] = c
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	all := func(fn func(i int) error) []error {
		errs := make([]error, clients)
		var wg sync.WaitGroup
		for i := range clients {
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs[i] = fn(i)
			}()
		}
		wg.Wait()
		return errs
	}
	winners := func(what string, round int, errs []error) int {
		t.Helper()
		won := -1
		for i, err := range errs {
			if err == nil {
				if won >= 0 {
					t.Errorf("%s, round %d: clients %d and %d both won", what, round, won, i)
				}
				won = i
				continue
			}
			servertest.WriteErr(t, err, codes.Aborted)
		}
		if won < 0 {
			t.Errorf("%s, round %d: no client won", what, round)
		}
		return won
	}
	for round := range rounds {
		vers := make([]uint64, clients)
		for i, err := range all(func(i int) error {
			_, v, err := cs[i].GetVersioned(ctx, "shop.User", 1)
			vers[i] = v[0]
			return err
		}) {
			if err != nil || vers[i] != vers[0] {
				t.Fatalf("round %d: client %d read version %d (%v), client 0 %d", round, i, vers[i], err, vers[0])
			}
		}
		won := winners("update", round, all(func(i int) error {
			_, err := cs[i].Apply(ctx, client.Batch{Op: update, Records: msgs(e.user(1, fmt.Sprintf("r%d-c%d", round, i))),
				Conditions: conds(client.IfVersion(0, vers[i]))})
			return err
		}))
		recs, _ := getVersions(t, e.ts, 1)
		if won >= 0 && !proto.Equal(recs[0], e.user(1, fmt.Sprintf("r%d-c%d", round, won))) {
			t.Errorf("round %d: user 1 is %v, want the winner's (client %d)", round, recs[0], won)
		}

		orders := &pb.Query{Type: "shop.Order", Filter: fmt.Sprintf("user_id = %d", round)}
		winners("insert", round, all(func(i int) error {
			order := e.ts.Rec("shop.Order", fmt.Sprintf(`{"user_id": %d, "id": %d}`, round, i))
			_, err := cs[i].Apply(ctx, client.Batch{Op: insert, Records: msgs(order), Conditions: conds(client.IfCount(orders, 0))})
			return err
		}))
		if n, _ := e.matches(orders); n != 1 {
			t.Errorf("round %d: %d orders stored, want 1", round, n)
		}
	}
}
