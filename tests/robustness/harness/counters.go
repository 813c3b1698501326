package harness

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/protobase/protobase/client"
	pb "github.com/protobase/protobase/gen/protobase/v1"
	"github.com/protobase/protobase/server/servertest"
)

// CountersSchema is the schema of the counters workload: counters that
// writers increment by conditional updates (read the counter, write n+1
// on condition that it is unchanged) and by patches (add 1), naming the
// batch that last wrote each.
const CountersSchema = `syntax = "proto3";
package ctr;
import "protobase/v1/options.proto";

message Counter {
  option (protobase.v1.record) = {
    primary_key: "id"
    index: { fields: "last" }
    index: { fields: "n" }
  };
  int64 id = 1;
  int64 n = 2;
  uint64 last = 3;
  string pad = 4;
}
`

// CountersFile is the file CountersSchema is applied as.
const CountersFile = "ctr.proto"

const (
	counterType = "ctr.Counter"
	counterURL  = "type.googleapis.com/" + counterType
	// counterKeys is how many counters there are: few, so that writers
	// meet on them and conditions fail.
	counterKeys = 8
)

// counterWrite is one counter a batch writes, and what it conditions the
// write on: the version the writer read (version), or that n is still
// what it read (n), or nothing (a patch adds 1 whatever the value).
type counterWrite struct {
	id            int64
	patch         bool
	version, n    uint64
	byVer, byFilt bool
}

// Counters is the model of the counters workload: every batch sent, which
// were acknowledged and at which position, which were refused by a
// condition, and which are known lost. A batch is numbered by its own
// counter (last), from 1; batch 0 created the counters. mu guards every
// field: the writers share it.
type Counters struct {
	mu   sync.Mutex
	next uint64
	sent map[uint64][]counterWrite
	// acked holds the position of each acknowledged batch whose
	// acknowledgement promises survival (promise was set when it came).
	acked map[uint64]uint64
	// aborted holds what the server said of each batch it refused with
	// ABORTED.
	aborted map[uint64]counterRefusal
	// durable is the highest position acknowledged with a promise: every
	// batch at or below it survives (batches are durable in commit
	// order).
	durable uint64
	// lost holds the batches sent and found absent by a Verify: they must
	// never appear.
	lost map[uint64]bool
	// promise says acknowledgements now promise survival: false once a
	// test cuts the power (a later acknowledgement may be of a batch the
	// cut lost).
	promise bool
	// OnAck, if set, is called after each acknowledgement, outside mu.
	OnAck func()
	// errs are the writers' errors that no kill or cut explains.
	errs []error
}

// NewCounters is the model of a store where no counter exists yet.
func NewCounters() *Counters {
	return &Counters{next: 1, sent: map[uint64][]counterWrite{}, acked: map[uint64]uint64{},
		aborted: map[uint64]counterRefusal{}, lost: map[uint64]bool{}, promise: true}
}

// counterRecord encodes counter id with n, last and some padding.
func counterRecord(id, n int64, last uint64) *anypb.Any {
	var b []byte
	b = protowire.AppendTag(b, 1, protowire.VarintType)
	b = protowire.AppendVarint(b, uint64(id))
	if n != 0 {
		b = protowire.AppendTag(b, 2, protowire.VarintType)
		b = protowire.AppendVarint(b, uint64(n))
	}
	if last != 0 {
		b = protowire.AppendTag(b, 3, protowire.VarintType)
		b = protowire.AppendVarint(b, last)
	}
	b = protowire.AppendTag(b, 4, protowire.BytesType)
	b = protowire.AppendString(b, strings.Repeat(fmt.Sprint(last%10), 50+int(last%200)))
	return &anypb.Any{TypeUrl: counterURL, Value: b}
}

// counterValue is the decoded counter.
type counterValue struct {
	id, n int64
	last  uint64
	ver   uint64
}

func decodeCounter(b []byte) (counterValue, error) {
	var v counterValue
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return v, protowire.ParseError(n)
		}
		b = b[n:]
		m := protowire.ConsumeFieldValue(num, typ, b)
		if m < 0 {
			return v, protowire.ParseError(m)
		}
		if typ == protowire.VarintType {
			x, _ := protowire.ConsumeVarint(b)
			switch num {
			case 1:
				v.id = int64(x)
			case 2:
				v.n = int64(x)
			case 3:
				v.last = x
			}
		}
		b = b[m:]
	}
	return v, nil
}

// SetPromise says whether acknowledgements from now on promise that their
// batches survive: a test that cuts the power sets false just before.
func (m *Counters) SetPromise(p bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.promise = p
}

// Setup creates the counters, at zero, as batch 0.
func (m *Counters) Setup(ctx context.Context, c *client.Client) error {
	var recs []proto.Message
	var writes []counterWrite
	for id := range int64(counterKeys) {
		recs = append(recs, counterRecord(id, 0, 0))
		writes = append(writes, counterWrite{id: id})
	}
	pos, err := c.Apply(ctx, client.Batch{Op: pb.WriteOp_WRITE_OP_INSERT, Records: recs})
	if err != nil {
		return fmt.Errorf("create the counters: %w", err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.sent[0], m.acked[0] = writes, pos
	return nil
}

// Write increments counters on one Write stream until ctx ends or the
// stream fails other than by a condition (then it opens another): each
// batch reads one to three counters and increments them by conditional
// updates, by patches with or without a condition, or by both (each
// record naming its operation), asking for an acknowledgement.
func (m *Counters) Write(ctx context.Context, c *client.Client, rng *rand.Rand) {
	for ctx.Err() == nil {
		st, err := c.API().Write(ctx)
		if err != nil {
			return
		}
		for ctx.Err() == nil {
			req, b, err := m.batch(ctx, c, rng)
			if err != nil {
				m.fail(ctx, err)
				return
			}
			if err := st.Send(req); err != nil {
				return
			}
			ack, err := st.Recv()
			if err != nil {
				if !m.refused(b, req, err) {
					m.fail(ctx, err)
					return
				}
				break // the stream ended with the batch: open another
			}
			m.mu.Lock()
			if m.promise {
				m.acked[b] = ack.GetPosition()
				m.durable = max(m.durable, ack.GetPosition())
			}
			m.mu.Unlock()
			if m.OnAck != nil {
				m.OnAck()
			}
		}
	}
}

// batch reads some counters and returns the next batch's request.
func (m *Counters) batch(ctx context.Context, c *client.Client, rng *rand.Rand) (*pb.WriteStreamRequest, uint64, error) {
	ids := rng.Perm(counterKeys)[:1+rng.IntN(3)]
	keys := make([]any, len(ids))
	for i, id := range ids {
		keys[i] = int64(id)
	}
	recs, vers, err := c.GetVersioned(ctx, counterType, keys...)
	if err != nil {
		return nil, 0, err
	}
	m.mu.Lock()
	b := m.next
	m.next++
	m.mu.Unlock()
	req := &pb.WriteStreamRequest{Ack: true, Fields: []string{"last", "pad"}, Add: []string{"n"}}
	mode := rng.IntN(3) // 0: updates; 1: patches; 2: each its own
	writes := make([]counterWrite, len(ids))
	for i, id := range ids {
		if recs[i] == nil {
			return nil, 0, fmt.Errorf("counter %d: not found", id)
		}
		cur, err := decodeCounter(recs[i].GetValue())
		if err != nil {
			return nil, 0, fmt.Errorf("counter %d: %w", id, err)
		}
		w := counterWrite{id: int64(id), patch: mode == 1 || mode == 2 && rng.IntN(2) == 0}
		switch {
		case !w.patch && rng.IntN(3) == 0, w.patch && rng.IntN(3) == 0:
			// On n unchanged, by a filter on the key.
			w.byFilt, w.n = true, uint64(cur.n)
			req.Conditions = append(req.Conditions, &pb.Condition{Target: &pb.Condition_Key{Key: counterRecord(int64(id), 0, 0)},
				Filter: fmt.Sprintf("n = %d", cur.n)})
		case !w.patch || rng.IntN(2) == 0:
			w.byVer, w.version = true, vers[i]
			req.Conditions = append(req.Conditions, &pb.Condition{Target: &pb.Condition_Record{Record: uint32(i)}, Version: &w.version})
		}
		op, rec := pb.WriteOp_WRITE_OP_UPDATE, counterRecord(int64(id), cur.n+1, b)
		if w.patch {
			op, rec = pb.WriteOp_WRITE_OP_PATCH, counterRecord(int64(id), 1, b)
		}
		req.Ops = append(req.Ops, op)
		req.Records = append(req.Records, rec)
		writes[i] = w
	}
	switch {
	case mode == 1:
		req.Op, req.Ops = pb.WriteOp_WRITE_OP_PATCH, nil
	case !slices.Contains(req.Ops, pb.WriteOp_WRITE_OP_PATCH):
		req.Op, req.Ops, req.Fields, req.Add = pb.WriteOp_WRITE_OP_UPDATE, nil, nil, nil
	default:
		req.Op = pb.WriteOp_WRITE_OP_UPDATE // ignored: each record names its own
	}
	m.mu.Lock()
	m.sent[b] = writes
	m.mu.Unlock()
	return req, b, nil
}

// refused records batch b refused by one of its conditions, and reports
// whether err is that refusal.
func (m *Counters) refused(b uint64, req *pb.WriteStreamRequest, err error) bool {
	st, _ := status.FromError(err)
	if st.Code() != codes.Aborted {
		return false
	}
	for _, d := range st.Details() {
		we, ok := d.(*pb.WriteError)
		if !ok || we.Condition == nil || int(*we.Condition) >= len(req.Conditions) {
			continue
		}
		m.mu.Lock()
		defer m.mu.Unlock()
		w := m.condWrite(b, int(*we.Condition))
		m.aborted[b] = counterRefusal{write: w, found: we.GetVersion(), floor: m.durable}
		if !m.promise {
			// The state refused on may be one the cut lost.
			m.aborted[b] = counterRefusal{write: w, floor: 0, lostState: true}
		}
		return true
	}
	return false
}

// counterRefusal is a batch refused by one of its conditions: the write
// the condition guarded, the version the server found, and the durable
// position when it was refused. The version found may be of a batch
// applied and not yet durable, which a kill or cut may lose; one at or
// below floor is durable, so the log holds it.
type counterRefusal struct {
	write        counterWrite
	found, floor uint64
	lostState    bool // refused after the power was cut: nothing to check
}

// condWrite is the write of batch b that condition i guards: conditions
// are made in the order of the batch's writes, one for each conditional
// one.
func (m *Counters) condWrite(b uint64, i int) counterWrite {
	for _, w := range m.sent[b] {
		if w.byVer || w.byFilt {
			if i == 0 {
				return w
			}
			i--
		}
	}
	return counterWrite{id: -1}
}

// fail keeps a writer's error unless a kill or cut explains it: a broken
// connection, or the end of ctx.
func (m *Counters) fail(ctx context.Context, err error) {
	switch status.Code(err) {
	case codes.Unavailable, codes.Canceled, codes.DeadlineExceeded:
		return
	}
	if ctx.Err() != nil || errors.Is(err, context.Canceled) {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.errs = append(m.errs, err)
}

// Errors fails t with the writers' errors that no kill or cut explains.
func (m *Counters) Errors(t *testing.T) {
	t.Helper()
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, err := range m.errs {
		t.Errorf("writer: %v", err)
	}
	m.errs = nil
}

// Stats is what a Verify found: batches acknowledged, refused by a
// condition, in the log (whether acknowledged or not), and sent and known
// lost.
type Stats struct {
	Acked, Aborted, Logged, Lost int
}

func (s Stats) String() string {
	return fmt.Sprintf("%d batches acknowledged, %d refused by a condition, %d in the log, %d lost", s.Acked, s.Aborted, s.Logged, s.Lost)
}

// Verify reads the change log of the counters whole and their current
// state on ts, and checks both against the model: each commit of the log
// is one whole batch, written once; every acknowledged batch is there at
// its position; no batch refused by a condition nor known lost is; each
// conditional write's condition held at its commit and each increment
// added one; the log replayed gives each counter's value and version, the
// version being the position of the batch that last wrote it. Batches
// sent and not in the log are lost from then on.
func (m *Counters) Verify(t *testing.T, ts *servertest.Server, when string) Stats {
	t.Helper()
	end := LastCommit(ts, counterType)
	log := NewWatcher(&pb.WatchRequest{Types: []string{counterType}, OldRecords: true})
	log.CatchUp(t, ts, end)
	m.mu.Lock()
	defer m.mu.Unlock()
	state, history, logged := m.replay(t, log.Got, when)
	for b, pos := range m.acked {
		if got, ok := logged[b]; !ok || got != pos {
			t.Fatalf("%s: batch %d acknowledged at %d is in the log at %d (present %v)", when, b, pos, got, ok)
		}
	}
	for b, ab := range m.aborted {
		if _, ok := logged[b]; ok {
			t.Fatalf("%s: batch %d was refused by a condition, and is in the log", when, b)
		}
		w := ab.write
		switch {
		case ab.lostState:
		case w.id < 0:
			t.Fatalf("%s: batch %d was refused naming a condition it does not have", when, b)
		case w.byVer && ab.found == w.version:
			t.Fatalf("%s: batch %d was refused finding counter %d at version %d, the version it asked for", when, b, w.id, ab.found)
		case ab.found != 0 && ab.found <= ab.floor && !slices.Contains(history[w.id], ab.found):
			t.Fatalf("%s: batch %d was refused finding counter %d at version %d, below the durable %d, which it never had (%v)",
				when, b, w.id, ab.found, ab.floor, history[w.id])
		}
	}
	for b := range m.sent {
		if _, refused := m.aborted[b]; !refused && !isLogged(logged, b) {
			m.lost[b] = true
		}
	}
	m.compareState(t, ts, state, when)
	return Stats{Acked: len(m.acked), Aborted: len(m.aborted), Logged: len(logged), Lost: len(m.lost)}
}

func isLogged(logged map[uint64]uint64, b uint64) bool {
	_, ok := logged[b]
	return ok
}

// replay replays the log's changes of counters, checking each commit
// against the batch it names, and returns the state they make, the
// versions each counter had, and the commit of each batch.
func (m *Counters) replay(t *testing.T, changes []*pb.Change, when string) (map[int64]counterValue, map[int64][]uint64, map[uint64]uint64) {
	t.Helper()
	state := map[int64]counterValue{}
	history := map[int64][]uint64{}
	logged := map[uint64]uint64{}
	for i := 0; i < len(changes); {
		commit := changes[i].GetPosition().GetCommit()
		j := i
		for j < len(changes) && changes[j].GetPosition().GetCommit() == commit {
			j++
		}
		var b uint64
		byID := map[int64]*pb.Change{}
		for _, ch := range changes[i:j] {
			v, err := decodeCounter(ch.GetRecord().GetValue())
			if err != nil || ch.GetOp() == pb.ChangeOp_CHANGE_OP_REMOVE {
				t.Fatalf("%s: commit %d: change %v (%v)", when, commit, ch, err)
			}
			if ch != changes[i] && v.last != b {
				t.Fatalf("%s: commit %d mixes batches %d and %d", when, commit, b, v.last)
			}
			b = v.last
			byID[v.id] = ch
		}
		writes, ok := m.sent[b]
		switch {
		case !ok:
			t.Fatalf("%s: commit %d is of batch %d, which was never sent", when, commit, b)
		case m.lost[b]:
			t.Fatalf("%s: commit %d is of batch %d, which an earlier check found lost", when, commit, b)
		case logged[b] != 0 || b == 0 && i > 0:
			t.Fatalf("%s: batch %d is in the log twice, at %d and %d", when, b, logged[b], commit)
		case len(byID) != len(writes) || j-i != len(writes):
			t.Fatalf("%s: commit %d holds %d changes of %d counters, batch %d wrote %d: half a batch", when, commit, j-i, len(byID), b, len(writes))
		}
		logged[b] = commit
		for _, w := range writes {
			ch := byID[w.id]
			if ch == nil {
				t.Fatalf("%s: commit %d of batch %d lacks counter %d", when, commit, b, w.id)
			}
			prev := state[w.id]
			next := counterValue{id: w.id, n: prev.n + 1, last: b, ver: commit}
			if b == 0 {
				next.n = 0
			}
			m.checkChange(t, ch, w, prev, next, when)
			state[w.id] = next
			history[w.id] = append(history[w.id], commit)
		}
		i = j
	}
	return state, history, logged
}

// checkChange checks the change of counter w.id in the commit of batch
// next.last against the counter before (prev) and what the batch makes of
// it (next): the batch's condition held, the old record is prev, the new
// one holds one more.
func (m *Counters) checkChange(t *testing.T, ch *pb.Change, w counterWrite, prev, next counterValue, when string) {
	t.Helper()
	b, commit := next.last, next.ver
	switch {
	case w.byVer && w.version != prev.ver:
		t.Fatalf("%s: batch %d committed at %d on condition that counter %d was at version %d; it was at %d", when, b, commit, w.id, w.version, prev.ver)
	case w.byFilt && int64(w.n) != prev.n:
		t.Fatalf("%s: batch %d committed at %d on condition that counter %d had n = %d; it had %d", when, b, commit, w.id, w.n, prev.n)
	}
	if got, _ := decodeCounter(ch.GetRecord().GetValue()); got.n != next.n {
		t.Fatalf("%s: commit %d of batch %d sets counter %d to %d, want %d (one more than before)", when, commit, b, w.id, got.n, next.n)
	}
	if b == 0 {
		return
	}
	old, err := decodeCounter(ch.GetOldRecord().GetValue())
	if ch.GetOldRecord() == nil || err != nil || old.n != prev.n || old.last != prev.last {
		t.Fatalf("%s: commit %d of batch %d: counter %d's old record is %+v (%v), the log made it %+v", when, commit, b, w.id, old, err, prev)
	}
}

// compareState checks the counters' current values and versions on ts
// against the replayed state.
func (m *Counters) compareState(t *testing.T, ts *servertest.Server, state map[int64]counterValue, when string) {
	t.Helper()
	sc := ts.C.Scan(t.Context(), &pb.Query{Type: counterType, Versions: true}, client.ScanOptions{})
	got := map[int64]counterValue{}
	for sc.Next() {
		v, err := decodeCounter(sc.Record().GetValue())
		if err != nil {
			t.Fatalf("%s: stored counter %x: %v", when, sc.Record().GetValue(), err)
		}
		v.ver = sc.Version()
		got[v.id] = v
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("%s: scan counters: %v", when, err)
	}
	if len(got) != len(state) {
		t.Fatalf("%s: %d counters stored, the log makes %d", when, len(got), len(state))
	}
	for id, want := range state {
		if got[id] != want {
			t.Fatalf("%s: counter %d is %+v, the log makes it %+v", when, id, got[id], want)
		}
	}
}
