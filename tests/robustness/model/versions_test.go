package model_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/dynamicpb"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/protobase/protobase/client"
	pb "github.com/protobase/protobase/gen/protobase/v1"
	"github.com/protobase/protobase/server/servertest"
	"github.com/protobase/protobase/tests/robustness/harness"
)

// TestVersionModel holds the server to the version model: random batches
// of every operation, patches (fields, add, clears, overflows, missing
// records), per-record operations and pure checks, with conditions on
// records, keys and queries that hold or do not, sent on Write streams
// that ask for an acknowledgement per batch (whose position is the
// version of each record the batch wrote) and on client streams. After
// every stream the server must hold exactly the model's records at the
// model's versions, read by Scan, Get and Query; each failing batch must
// fail as the model says (ABORTED naming the condition and the version it
// found). After each round the server restarts, the checker verifies the
// indexes, and the restarted server must agree too.
func TestVersionModel(t *testing.T) {
	for _, b := range harness.Backends {
		t.Run(b.Name, func(t *testing.T) {
			seeds, rounds, streams := []uint64{1, 2, 3, 4, 5}, 4, 60
			if testing.Short() || b.Name != "pebble" {
				seeds = seeds[:1]
			}
			harness.RunSeeds(t, seeds, func(t *testing.T, seed uint64) {
				runVersionModel(t, b, rand.New(rand.NewPCG(seed, 31)), rounds, streams)
			})
		})
	}
}

// vmRun is one run of the version model.
type vmRun struct {
	t     *testing.T
	g     *vmGen
	model vmModel
	// seen counts what the batches came to, to show the run reached
	// every outcome.
	seen map[string]int
}

func runVersionModel(t *testing.T, b harness.Backend, rng *rand.Rand, rounds, streams int) {
	cfg := b.Config(t)
	r := &vmRun{t: t, g: &vmGen{rng: rng, mds: map[string]protoreflect.MessageDescriptor{}}, model: vmModel{}, seen: map[string]int{}}
	for round := range rounds {
		ts := servertest.New(t, cfg)
		if round == 0 {
			ts.MustApply(map[string]string{"vm.proto": versionModelProto})
			for _, typ := range vmTypes {
				r.g.mds[typ.name] = ts.Desc(typ.name)
			}
		}
		for s := range streams {
			label := fmt.Sprintf("round %d stream %d", round, s)
			if rng.IntN(4) == 0 {
				r.clientStream(ts, label)
			} else {
				r.writeStream(ts, label)
			}
			r.compare(ts, label)
			if s%5 == 4 {
				r.reads(ts, label)
			}
		}
		ts.Stop()
		b.MustCheck(t, cfg, fmt.Sprintf("after round %d", round))
		restarted := servertest.New(t, cfg)
		r.compare(restarted, fmt.Sprintf("after restart %d", round))
		r.reads(restarted, fmt.Sprintf("after restart %d", round))
		restarted.Stop()
	}
	// The random batches must reach every outcome, or the model compared
	// little.
	for _, what := range []string{"ok", "ok patch", "ok ops", "ok check", "ok conditional",
		"ABORTED", "ABORTED check", "NotFound", "OutOfRange", "AlreadyExists", "InvalidArgument"} {
		if r.seen[what] == 0 {
			t.Errorf("no batch came to %q: the generator is too tame (%v)", what, r.seen)
		}
	}
	t.Logf("%d records at the end; batches: %v", len(r.model), r.seen)
}

// writeStream sends 1-5 batches of random kinds on one Write stream,
// each asking for an acknowledgement, until one fails.
func (r *vmRun) writeStream(ts *servertest.Server, label string) {
	t := r.t
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	st, err := ts.C.API().Write(ctx)
	if err != nil {
		t.Fatal(err)
	}
	records := 0
	for n := range 1 + r.g.rng.IntN(5) {
		b := r.g.batch(r.model, pick(r.g.rng, vmKinds...))
		blabel := fmt.Sprintf("%s: batch %d (%s)", label, n, b)
		fails, next, written := r.model.evaluate(b)
		req := &pb.WriteStreamRequest{Op: b.op, Ops: b.ops, Records: b.anys(), Ack: true,
			Conditions: b.conditions(), Fields: b.fields, Add: b.add}
		if err := st.Send(req); err != nil && !errors.Is(err, io.EOF) {
			t.Fatalf("%s: send: %v", blabel, err)
		}
		ack, err := st.Recv()
		r.outcome(blabel, fails, n, records, err)
		if fails != nil {
			r.count(b, err)
			return
		}
		records += len(b.recs)
		if ack.GetBatch() != uint64(n) || ack.GetRecords() != uint64(records) {
			t.Fatalf("%s: ack names batch %d with %d records, want %d and %d", blabel, ack.GetBatch(), ack.GetRecords(), n, records)
		}
		r.commit(blabel, b, next, written, ack.GetPosition())
	}
	if err := st.CloseSend(); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Recv(); !errors.Is(err, io.EOF) {
		t.Fatalf("%s: stream ends with %v, want OK", label, err)
	}
}

// clientStream sends one batch with conditions (maybe none, maybe no
// records) on the client stream of a plain operation.
func (r *vmRun) clientStream(ts *servertest.Server, label string) {
	t := r.t
	t.Helper()
	kind := vmPlain
	if r.g.rng.IntN(4) == 0 {
		kind = vmCheck
	}
	b := r.g.batch(r.model, kind)
	b.fields, b.add = nil, nil
	if b.invalid != nil && b.invalid.cond < 0 {
		b.invalid = nil // a patch's fields, which a client stream cannot send
	}
	label = fmt.Sprintf("%s: client stream (%s)", label, b)
	fails, next, written := r.model.evaluate(b)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	api := ts.C.API()
	var st interface {
		Send(*pb.WriteRequest) error
		CloseAndRecv() (*pb.WriteResponse, error)
	}
	var err error
	switch b.op {
	case pb.WriteOp_WRITE_OP_INSERT:
		st, err = api.Insert(ctx)
	case pb.WriteOp_WRITE_OP_UPDATE:
		st, err = api.Update(ctx)
	case pb.WriteOp_WRITE_OP_UPSERT:
		st, err = api.Upsert(ctx)
	default:
		st, err = api.Remove(ctx)
	}
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Send(&pb.WriteRequest{Records: b.anys(), Conditions: b.conditions()}); err != nil && !errors.Is(err, io.EOF) {
		t.Fatalf("%s: send: %v", label, err)
	}
	resp, err := st.CloseAndRecv()
	r.outcome(label, fails, 0, 0, err)
	if fails != nil {
		r.count(b, err)
		return
	}
	if resp.GetBatches() != 1 || resp.GetRecords() != uint64(len(b.recs)) {
		t.Fatalf("%s: response counts %d batches %d records, want 1 and %d", label, resp.GetBatches(), resp.GetRecords(), len(b.recs))
	}
	r.commit(label, b, next, written, resp.GetPosition())
}

// commit makes the model the state after b, acknowledged at position pos,
// which is the version of every record b wrote.
func (r *vmRun) commit(label string, b *vmBatch, next vmModel, written []string, pos uint64) {
	if len(written) > 0 {
		if pos <= r.g.last {
			r.t.Fatalf("%s: acknowledged at position %d, not after the last one seen (%d)", label, pos, r.g.last)
		}
		r.g.last = pos
	}
	r.model.commit(next, written, pos)
	switch {
	case len(b.recs) == 0:
		r.seen["ok check"]++
	case b.op == pb.WriteOp_WRITE_OP_PATCH && len(b.ops) == 0:
		r.seen["ok patch"]++
	case len(b.ops) > 0:
		r.seen["ok ops"]++
	default:
		r.seen["ok"]++
	}
	if len(b.conds) > 0 {
		r.seen["ok conditional"]++
	}
}

// count records the failure a batch came to.
func (r *vmRun) count(b *vmBatch, err error) {
	code := status.Code(err)
	switch {
	case code == codes.Aborted && len(b.recs) == 0:
		r.seen["ABORTED check"]++
	case code == codes.Aborted:
		r.seen["ABORTED"]++
	default:
		r.seen[code.String()]++
	}
}

// outcome checks a stream's error against the ways the batch at index
// batch may fail (none: it must succeed); the batches before it, holding
// records records, stay applied.
func (r *vmRun) outcome(label string, fails []vmFail, batch, records int, err error) {
	t := r.t
	t.Helper()
	if fails == nil {
		if err != nil {
			t.Fatalf("%s: %v, want OK", label, err)
		}
		return
	}
	if err == nil {
		t.Fatalf("%s: OK, want one of %v", label, fails)
	}
	st, _ := status.FromError(err)
	var we *pb.WriteError
	for _, d := range st.Details() {
		if w, ok := d.(*pb.WriteError); ok {
			we = w
		}
	}
	if we == nil {
		t.Fatalf("%s: %v (%v) without a WriteError, want one of %v", label, st.Code(), st.Message(), fails)
	}
	got := fmt.Sprintf("%v record %d field %q url %s condition %s version %d; batch %d applied %d/%d",
		st.Code(), we.GetRecord(), we.GetField(), we.GetTypeUrl(), vmCondOf(we), we.GetVersion(), we.GetBatch(), we.GetBatchesApplied(), we.GetRecordsApplied())
	if we.GetBatch() != uint64(batch) || we.GetBatchesApplied() != uint64(batch) || we.GetRecordsApplied() != uint64(records) {
		t.Fatalf("%s: got %s (%v), want batch %d applied %d/%d", label, got, st.Message(), batch, batch, records)
	}
	for _, f := range fails {
		if f.matches(st.Code(), we) {
			return
		}
	}
	t.Fatalf("%s: got %s (%v), want one of %v", label, got, st.Message(), fails)
}

func vmCondOf(we *pb.WriteError) string {
	if we.Condition == nil {
		return "-"
	}
	return fmt.Sprint(*we.Condition)
}

// matches reports whether a failure with code and detail we is f.
func (f vmFail) matches(code codes.Code, we *pb.WriteError) bool {
	switch {
	case code != f.code,
		f.record >= 0 && we.GetRecord() != uint64(f.record),
		f.checkField && we.GetField() != f.field,
		f.url != "" && we.GetTypeUrl() != f.url,
		f.cond < 0 && we.Condition != nil,
		f.cond >= 0 && (we.Condition == nil || *we.Condition != uint32(f.cond)):
		return false
	}
	return f.code != codes.Aborted || we.GetVersion() == f.version
}

// compare checks that the server holds exactly the model's records, with
// their versions, read by one Scan of each type that asks for versions.
func (r *vmRun) compare(ts *servertest.Server, label string) {
	t := r.t
	t.Helper()
	for _, typ := range vmTypes {
		want := r.model.sorted(typ)
		sc := ts.C.Scan(t.Context(), &pb.Query{Type: typ.name, Versions: true, Order: &pb.Order{}}, client.ScanOptions{})
		var got []*anypb.Any
		var vers []uint64
		for sc.Next() {
			got = append(got, sc.Record())
			vers = append(vers, sc.Version())
		}
		if err := sc.Err(); err != nil {
			t.Fatalf("%s: scan %s: %v", label, typ.name, err)
		}
		r.same(label+": scan "+typ.name, want, got, vers)
	}
}

// same checks records got with versions vers, in order, against want.
func (r *vmRun) same(label string, want []*vmRec, got []*anypb.Any, vers []uint64) {
	t := r.t
	t.Helper()
	if len(got) != len(want) || len(vers) != len(got) {
		t.Fatalf("%s: %d records with %d versions, the model %d", label, len(got), len(vers), len(want))
	}
	for i, w := range want {
		if !r.sameRecord(w, got[i].GetValue()) {
			t.Fatalf("%s: record %d is %x, the model's (%s#%d) %x", label, i, got[i].GetValue(), w.t.name, w.pk, vmCanonical(w.msg))
		}
		if vers[i] != w.ver {
			t.Fatalf("%s: record %d (%s#%d) at version %d, the model's at %d", label, i, w.t.name, w.pk, vers[i], w.ver)
		}
	}
}

// sameRecord reports whether b is w's record: its bytes exactly while w
// is as written whole, its decoded contents once patched.
func (r *vmRun) sameRecord(w *vmRec, b []byte) bool {
	if w.raw != nil {
		return bytes.Equal(w.raw, b)
	}
	m := dynamicpb.NewMessage(r.g.md(w.t))
	if err := proto.Unmarshal(b, m); err != nil {
		return false
	}
	return bytes.Equal(vmCanonical(m), vmCanonical(w.msg))
}

// reads reads with versions by Get (keys held and not, one named twice)
// and by a Query page of a filtered, limited query, against the model.
func (r *vmRun) reads(ts *servertest.Server, label string) {
	t := r.t
	t.Helper()
	g := r.g
	for _, typ := range vmTypes {
		var keys []any
		var want []*vmRec
		for range 1 + g.rng.IntN(6) {
			k := g.rng.IntN(typ.keys)
			keys = append(keys, vmNewRec(g.rng, typ, g.md(typ), k, true).msg)
			want = append(want, r.model[vmKey(typ, k)])
		}
		got, vers, err := ts.C.GetVersioned(t.Context(), typ.name, keys...)
		if err != nil {
			t.Fatalf("%s: get %s: %v", label, typ.name, err)
		}
		for i, w := range want {
			switch {
			case w == nil && (got[i] != nil || vers[i] != 0):
				t.Fatalf("%s: get %s key %d: a record at version %d, the model has none", label, typ.name, i, vers[i])
			case w != nil && (got[i] == nil || !r.sameRecord(w, got[i].GetValue()) || vers[i] != w.ver):
				t.Fatalf("%s: get %s#%d: %x at version %d, the model's at %d", label, typ.name, w.pk, got[i].GetValue(), vers[i], w.ver)
			}
		}

		c := g.queryCondOf(r.model, typ, true)
		q := proto.Clone(c.pb.GetQuery()).(*pb.Query)
		q.Versions = true
		if q.Order == nil {
			q.Order = &pb.Order{}
		}
		page, err := ts.C.Query(t.Context(), q, 100, "")
		if err != nil {
			t.Fatalf("%s: query %v: %v", label, q, err)
		}
		var match []*vmRec
		for _, rec := range r.model.sorted(typ) {
			if c.filter == nil || c.filter.eval(rec.msg) {
				match = append(match, rec)
			}
		}
		if c.desc2 {
			slices.Reverse(match)
		}
		if c.limit > 0 && len(match) > c.limit {
			match = match[:c.limit]
		}
		r.same(fmt.Sprintf("%s: query %v", label, q), match, page.Records, page.Versions)
	}
}
