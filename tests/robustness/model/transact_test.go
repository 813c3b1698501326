package model_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/protobase/protobase/client"
	pb "github.com/protobase/protobase/gen/protobase/v1"
	"github.com/protobase/protobase/server/servertest"
	"github.com/protobase/protobase/tests/robustness/harness"
)

// TestTransactModel runs transactions (client.Transact) from several
// goroutines, on two servers sharing the store on etcd, and checks them
// against a model replayed from the change log. Every write transaction
// inserts a mark naming it, so each commit of the log is known to be one
// transaction's; replayed in commit order, each committed transaction
// must have read exactly the state before its commit (keys and query
// windows), its writes must be the commit's changes, and the state the
// log makes must be the store's, at the versions the log gives. Every
// read-only transaction that committed must have read one state the log
// passed through. A transaction that failed (ABORTED after its attempts,
// or another error) must not be in the log, and the condition an ABORTED
// names must be one of its reads, the version found one the record had,
// holding something else than the transaction read. The servers restart
// between phases, and the checker runs on the store.
func TestTransactModel(t *testing.T) {
	for _, b := range harness.Backends {
		t.Run(b.Name, func(t *testing.T) {
			txs := 60
			if testing.Short() {
				txs = 15
			}
			harness.RunSeeds(t, []uint64{1}, func(t *testing.T, seed uint64) { runTransactModel(t, b, seed, txs) })
		})
	}
}

const txModelProto = `syntax = "proto3";
package tm;
import "protobase/v1/options.proto";

message Slot {
  option (protobase.v1.record) = {
    primary_key: "id"
    index: { fields: "group" }
  };
  int64 id = 1;
  int64 value = 2;
  string group = 3;
  uint64 by = 4;
}

message Mark {
  option (protobase.v1.record) = { primary_key: "tx" };
  uint64 tx = 1;
}
`

const (
	tmSlots = 12 // slots 0..11 are read and written; 0..7 exist at first
	tmTotal = 12 // the slot a group's total is written to
	// tmGoroutines run transactions at once; the first gives up after
	// two aborted attempts, so that some transactions fail ABORTED.
	tmGoroutines = 6
)

// tmSlot is a slot record; by names the transaction that wrote it last,
// so that no two writes leave the same bytes.
type tmSlot struct {
	id, value int64
	group     string
	by        uint64
}

func tmGroup(id int64) string { return fmt.Sprintf("g%d", id%3) }

func (s tmSlot) any() *anypb.Any {
	b := appendInt(nil, 1, uint64(s.id))
	b = appendInt(b, 2, uint64(s.value))
	b = appendStr(b, 3, s.group)
	b = appendInt(b, 4, s.by)
	return &anypb.Any{TypeUrl: "type.googleapis.com/tm.Slot", Value: b}
}

func tmMark(tx uint64) *anypb.Any {
	return &anypb.Any{TypeUrl: "type.googleapis.com/tm.Mark", Value: appendInt(nil, 1, tx)}
}

// tmDecode decodes a slot, or a mark (into by).
func tmDecode(b []byte) (tmSlot, error) {
	var s tmSlot
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return s, protowire.ParseError(n)
		}
		b = b[n:]
		m := protowire.ConsumeFieldValue(num, typ, b)
		if m < 0 {
			return s, protowire.ParseError(m)
		}
		v, _ := protowire.ConsumeVarint(b)
		switch {
		case num == 1:
			s.id = int64(v)
		case num == 2:
			s.value = int64(v)
		case num == 3 && typ == protowire.BytesType:
			str, _ := protowire.ConsumeString(b)
			s.group = str
		case num == 4:
			s.by = v
		}
		b = b[m:]
	}
	return s, nil
}

// tmRead is one condition of a transaction's last attempt, in the order
// the client makes them: a key read (seen nil: absent), or a query of a
// group's slots in id order, limited, with the slots it returned.
type tmRead struct {
	query bool
	id    int64
	seen  *tmSlot
	group string
	limit int
	desc  bool
	seenQ []tmSlot
}

func (rd tmRead) String() string {
	if rd.query {
		return fmt.Sprintf("query group %s limit %d desc %v: %+v", rd.group, rd.limit, rd.desc, rd.seenQ)
	}
	if rd.seen == nil {
		return fmt.Sprintf("slot %d: absent", rd.id)
	}
	return fmt.Sprintf("slot %d: %+v", rd.id, *rd.seen)
}

// tmWrite is one write of a transaction; a patch's value is the amount
// added.
type tmWrite struct {
	op pb.WriteOp
	s  tmSlot
}

// tmRun is one transaction: what its last attempt read and wrote, and
// what Transact returned.
type tmRun struct {
	tx     uint64
	desc   string
	reads  []tmRead
	writes []tmWrite
	err    error
	// conditioned holds the slots the attempt made key conditions of.
	conditioned map[int64]bool
}

func (r *tmRun) get(tx *client.Tx, ids ...int64) ([]*tmSlot, error) {
	keys := make([]any, len(ids))
	for i, id := range ids {
		keys[i] = id
	}
	recs, err := tx.Get("tm.Slot", keys...)
	if err != nil {
		return nil, err
	}
	out := make([]*tmSlot, len(ids))
	for i, a := range recs {
		if a != nil {
			s, err := tmDecode(a.GetValue())
			if err != nil {
				return nil, err
			}
			out[i] = &s
		}
		if !r.conditioned[ids[i]] {
			r.conditioned[ids[i]] = true
			r.reads = append(r.reads, tmRead{id: ids[i], seen: out[i]})
		}
	}
	return out, nil
}

func (r *tmRun) query(tx *client.Tx, group string, limit int, desc bool) ([]tmSlot, error) {
	recs, err := tx.Query(&pb.Query{Type: "tm.Slot", Filter: fmt.Sprintf("group = %q", group),
		Limit: uint64(limit), Order: &pb.Order{Descending: desc}})
	if err != nil {
		return nil, err
	}
	read := tmRead{query: true, group: group, limit: limit, desc: desc}
	for _, a := range recs {
		s, err := tmDecode(a.GetValue())
		if err != nil {
			return nil, err
		}
		read.seenQ = append(read.seenQ, s)
	}
	r.reads = append(r.reads, read)
	if limit > 0 && len(recs) == limit { // a full window: its slots are key conditions too
		for _, s := range read.seenQ {
			if !r.conditioned[s.id] {
				r.conditioned[s.id] = true
				r.reads = append(r.reads, tmRead{id: s.id, seen: &s})
			}
		}
	}
	return read.seenQ, nil
}

func (r *tmRun) write(tx *client.Tx, op pb.WriteOp, s tmSlot) error {
	r.writes = append(r.writes, tmWrite{op: op, s: s})
	switch op {
	case pb.WriteOp_WRITE_OP_INSERT:
		return tx.Insert(s.any())
	case pb.WriteOp_WRITE_OP_UPDATE:
		return tx.Update(s.any())
	case pb.WriteOp_WRITE_OP_UPSERT:
		return tx.Upsert(s.any())
	case pb.WriteOp_WRITE_OP_REMOVE:
		return tx.Remove(s.any())
	}
	return tx.Patch([]string{"by"}, []string{"value"}, s.any())
}

// tmPlan is what one transaction sets out to do, drawn before it runs so
// that every attempt means the same.
type tmPlan struct {
	kind    int
	a, b, c int64
	amount  int64
	group   string
	limit   int
	desc    bool
}

func tmNewPlan(rng *rand.Rand) tmPlan {
	ids := rng.Perm(tmSlots)
	return tmPlan{kind: rng.IntN(6), a: int64(ids[0]), b: int64(ids[1]), c: int64(ids[2]),
		amount: 1 + rng.Int64N(4), group: tmGroup(rng.Int64N(3)), limit: pick(rng, 0, 0, 2, 3), desc: rng.IntN(2) == 0}
}

// fn is the transaction's function: it reads, decides on what it read,
// and writes (with the mark) or only reads.
func (p tmPlan) fn(run *tmRun) func(tx *client.Tx) error {
	return func(tx *client.Tx) error {
		*run = tmRun{tx: run.tx, desc: run.desc, conditioned: map[int64]bool{}}
		err := p.body(tx, run)
		if err == nil && len(run.writes) > 0 {
			err = tx.Insert(tmMark(run.tx))
		}
		return err
	}
}

func (p tmPlan) body(tx *client.Tx, run *tmRun) error {
	by := run.tx
	switch p.kind {
	case 0, 1: // move amount from a to b, creating either if absent
		ss, err := run.get(tx, p.a, p.b)
		switch {
		case err != nil:
			return err
		case ss[0] == nil:
			return run.write(tx, pb.WriteOp_WRITE_OP_INSERT, tmSlot{id: p.a, value: 5, group: tmGroup(p.a), by: by})
		case ss[1] == nil:
			return run.write(tx, pb.WriteOp_WRITE_OP_UPSERT, tmSlot{id: p.b, value: 5, group: tmGroup(p.b), by: by})
		case ss[0].value >= p.amount:
			a, b := *ss[0], *ss[1]
			a.value, a.by, b.value, b.by = a.value-p.amount, by, b.value+p.amount, by
			if err := run.write(tx, pb.WriteOp_WRITE_OP_UPDATE, a); err != nil {
				return err
			}
			return run.write(tx, pb.WriteOp_WRITE_OP_UPDATE, b)
		}
		return nil // too little to move: a read-only transaction
	case 2: // create a, remove it when low, or take one from it
		ss, err := run.get(tx, p.a)
		switch {
		case err != nil:
			return err
		case ss[0] == nil:
			return run.write(tx, pb.WriteOp_WRITE_OP_INSERT, tmSlot{id: p.a, value: 3, group: tmGroup(p.a), by: by})
		case ss[0].value < 3:
			return run.write(tx, pb.WriteOp_WRITE_OP_REMOVE, tmSlot{id: p.a})
		}
		s := *ss[0]
		s.value, s.by = s.value-1, by
		return run.write(tx, pb.WriteOp_WRITE_OP_UPDATE, s)
	case 3: // write the total of a group's window
		ss, err := run.query(tx, p.group, p.limit, p.desc)
		if err != nil {
			return err
		}
		var sum int64
		for _, s := range ss {
			sum += s.value
		}
		return run.write(tx, pb.WriteOp_WRITE_OP_UPSERT, tmSlot{id: tmTotal, value: sum, group: "total", by: by})
	case 4: // add to c without reading it, and maybe move one from a to c's total
		if err := run.write(tx, pb.WriteOp_WRITE_OP_PATCH, tmSlot{id: p.c, value: p.amount, by: by}); err != nil {
			return err
		}
		ss, err := run.get(tx, p.a)
		if err != nil || ss[0] == nil {
			return err
		}
		s := *ss[0]
		s.value, s.by = s.value+1, by
		return run.write(tx, pb.WriteOp_WRITE_OP_UPDATE, s)
	}
	// An audit: read only.
	if _, err := run.get(tx, p.a, p.b, p.c); err != nil {
		return err
	}
	_, err := run.query(tx, p.group, p.limit, p.desc)
	return err
}

func runTransactModel(t *testing.T, b harness.Backend, seed uint64, txs int) {
	cfg := b.Config(t)
	var runs []*tmRun
	for phase := range 2 {
		servers := []*servertest.Server{servertest.New(t, cfg)}
		if cfg.Etcd.Endpoints != nil { // a second server on the same store
			cfg2 := cfg
			cfg2.DataDir = t.TempDir()
			servers = append(servers, servertest.New(t, cfg2))
		}
		if phase == 0 {
			v := servers[0].MustApply(map[string]string{"tm.proto": txModelProto}).Version
			for _, s := range servers[1:] {
				tmAwaitSchema(t, s, v) // the other server learns it from the store
			}
			var seedRecs []*anypb.Any
			for id := range int64(8) {
				seedRecs = append(seedRecs, tmSlot{id: id, value: 10, group: tmGroup(id)}.any())
			}
			servers[0].MustWrite(harness.Insert, seedRecs)
		}
		runs = append(runs, tmPhase(t, servers, seed, phase, txs)...)
		for _, s := range servers {
			s.Stop()
		}
		when := fmt.Sprintf("after phase %d", phase)
		b.MustCheck(t, cfg, when)
		ts := servertest.New(t, cfg)
		stats := tmVerify(t, ts, runs, when)
		ts.Stop()
		t.Logf("%s: %v", when, stats)
	}
}

// tmAwaitSchema waits until s serves schema version v.
func tmAwaitSchema(t *testing.T, s *servertest.Server, v uint64) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := s.C.GetSchema(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if resp.Version >= v {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the second server still serves schema version %d, not %d", resp.Version, v)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// tmPhase runs txs transactions on each of tmGoroutines goroutines,
// spread over servers, and returns them.
func tmPhase(t *testing.T, servers []*servertest.Server, seed uint64, phase, txs int) []*tmRun {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	out := make([][]*tmRun, tmGoroutines)
	var wg sync.WaitGroup
	for g := range tmGoroutines {
		c := servers[g%len(servers)].C
		rng := rand.New(rand.NewPCG(seed, uint64(1000*phase+g)))
		opts := client.TxOptions{MaxAttempts: 8, Backoff: time.Millisecond, MaxBackoff: 20 * time.Millisecond}
		if g == 0 {
			opts.MaxAttempts = 2
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := range txs {
				p := tmNewPlan(rng)
				run := &tmRun{tx: uint64(1_000_000*(phase+1) + 1000*g + n), desc: fmt.Sprintf("%+v", p)}
				run.err = c.Transact(ctx, p.fn(run), opts)
				out[g] = append(out[g], run)
			}
		}()
	}
	wg.Wait()
	var all []*tmRun
	for _, rs := range out {
		all = append(all, rs...)
	}
	for _, r := range all {
		r.checkErr(t)
	}
	return all
}

// checkErr fails t unless r committed, gave up ABORTED, or failed on a
// blind write: a patch of a slot it did not read, removed meanwhile
// (NOT_FOUND). A write to a slot it read cannot fail on the slot's
// existence: the read's condition fails first, and the commit is ABORTED.
func (r *tmRun) checkErr(t *testing.T) {
	t.Helper()
	var ce *client.Error
	switch {
	case r.err == nil, errors.Is(r.err, client.ErrAborted):
		return
	case !errors.As(r.err, &ce) || ce.Status.Code() != codes.NotFound && ce.Status.Code() != codes.AlreadyExists:
		t.Fatalf("transaction %d (%s): %v", r.tx, r.desc, r.err)
	}
	i := int(ce.Write.GetRecord())
	if i >= len(r.writes) {
		t.Fatalf("transaction %d (%s): %v names record %d of its %d writes and a mark", r.tx, r.desc, r.err, i, len(r.writes))
	}
	if id := r.writes[i].s.id; r.conditioned[id] {
		t.Errorf("transaction %d (%s) failed with %v on slot %d, which it read: the read's condition should have failed the commit with ABORTED, for Transact to run it again (reads %v)",
			r.tx, r.desc, r.err, id, r.reads)
	}
}
