package powercut_test

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/protobase/protobase/client"
	pb "github.com/protobase/protobase/gen/protobase/v1"
	"github.com/protobase/protobase/internal/store/pebble"
	"github.com/protobase/protobase/server"
	"github.com/protobase/protobase/server/servertest"
	"github.com/protobase/protobase/tests/robustness/harness"
)

var powercutRounds = flag.Int("powercut.rounds", 30, "power cuts of TestPowerCut and TestPowerCutConditional (at most 6 with -short or -race)")

// powercutSchema is the schema of the power-cut test, with or without its
// extra indexes: each apply toggles them, so most applies add a unique, a
// non-unique and an aggregate index over the data already there, and the
// cut often finds them building. A permanent aggregate index sums every
// payment into one group.
func powercutSchema(extra bool) map[string]string {
	acct, pay := "", ""
	if extra {
		acct = "\n    index: { fields: \"name\" }"
		pay = "\n    index: { fields: \"ref\" unique: true }" +
			"\n    aggregate: { name: \"by_account\" group_by: \"account_id\" sum: \"amount\" }"
	}
	return map[string]string{"pc.proto": fmt.Sprintf(`syntax = "proto3";
package pc;
import "protobase/v1/options.proto";

message Account {
  option (protobase.v1.record) = {
    primary_key: "id"
    index: { fields: "email" unique: true }%s
  };
  int64 id = 1;
  string name = 2;
  string email = 3;
}

message Payment {
  option (protobase.v1.record) = {
    primary_key: ["account_id", "id"]
    index: { fields: "amount" }
    aggregate: { name: "total" sum: "amount" }%s
  };
  int64 account_id = 1;
  uint64 id = 2;
  int64 amount = 3;
  string ref = 4;
}
`, acct, pay)}
}

const powercutBatch = 20 // accounts, and as many payments, per batch

// powercutRecords builds batch n: accounts and payments whose keys and
// unique values encode n, so each stored record names its batch.
func powercutRecords(n int) []*anypb.Any {
	recs := make([]*anypb.Any, 0, 2*powercutBatch)
	for i := range powercutBatch {
		id := int64(n*powercutBatch + i)
		var a []byte
		a = protowire.AppendTag(a, 1, protowire.VarintType)
		a = protowire.AppendVarint(a, uint64(id))
		a = protowire.AppendTag(a, 2, protowire.BytesType)
		a = protowire.AppendString(a, fmt.Sprintf("name %d", i%5))
		a = protowire.AppendTag(a, 3, protowire.BytesType)
		a = protowire.AppendString(a, fmt.Sprintf("a%d@example.com", id))
		var p []byte
		p = protowire.AppendTag(p, 1, protowire.VarintType)
		p = protowire.AppendVarint(p, uint64(id))
		p = protowire.AppendTag(p, 2, protowire.VarintType)
		p = protowire.AppendVarint(p, uint64(n))
		p = protowire.AppendTag(p, 3, protowire.VarintType)
		p = protowire.AppendVarint(p, uint64((n*7+i)%100))
		p = protowire.AppendTag(p, 4, protowire.BytesType)
		p = protowire.AppendString(p, fmt.Sprintf("r%d", id))
		recs = append(recs,
			&anypb.Any{TypeUrl: "type.googleapis.com/pc.Account", Value: a},
			&anypb.Any{TypeUrl: "type.googleapis.com/pc.Payment", Value: p})
	}
	return recs
}

// powercutModel is what the test knows of the data: which batches must be
// there, which may be, and which schema. mu guards every field: the
// writers, the schema apply and the cut share it.
type powercutModel struct {
	mu      sync.Mutex
	next    int             // next batch ordinal; a batch sent once is never sent again
	present map[int]bool    // batches that must be present: acknowledged, or found after a cut
	sent    map[int]bool    // sent since the last cut, acknowledged or not
	promise bool            // acknowledgements are before the cut, so must survive it
	version uint64          // schema version last acknowledged or found
	extra   bool            // whether that schema has the extra indexes
	pending bool            // a schema apply may have reached the store unacknowledged
	ready   map[string]bool // indexes found READY at schema version readyAt: they stay so
	readyAt uint64

	// What the cuts found, to show the test reaches the cases it is for.
	inFlight       map[int]bool // sent and not acknowledged when the cut began
	kept, lost     int          // of those, batches found whole, and not at all
	building       int          // cuts after which an index was still building
	applyUndecided int          // cuts that came during a schema apply

	// A watcher of both types that lives across the cuts: the changes it
	// received before each cut began, and its last progress then.
	watched   []*pb.Change
	watchLast *pb.Position
}

// TestPowerCut cuts the power under a server at many seeded points:
// writers stream batches of two types over gRPC while schema applies add
// and drop indexes over the data, and at a random acknowledgement the test
// keeps only what the in-memory filesystem had synced (some rounds also
// keep a random part of the rest: torn writes). The store must then check
// consistent, every acknowledged batch and schema must be there with its
// exact bytes, no other batch may be there in part, and a server must
// start on what is left, resume the index builds and take more writes:
// the next round runs on it.
func TestPowerCut(t *testing.T) { harness.RunSeeds(t, []uint64{1}, runPowerCut) }

func runPowerCut(t *testing.T, seed uint64) {
	rounds := *powercutRounds
	if testing.Short() || harness.RaceEnabled {
		rounds = min(rounds, 6)
	}
	t.Logf("%d rounds", rounds)
	rng := rand.New(rand.NewPCG(seed, 12))
	m := &powercutModel{present: map[int]bool{}, sent: map[int]bool{}, watchLast: &pb.Position{}}
	fs := pebble.NewMemFS()
	start := time.Now()
	for round := range rounds {
		keep := 0
		if round%2 == 1 {
			keep = 50
		}
		fs = powercutRound(t, rng, m, fs, round, keep)
	}
	ts := powercutStart(t, fs)
	m.verify(t, ts, "at the end")
	if m.extra { // the builds the cuts interrupted resume and finish
		ts.WaitIndex("pc.Account", "name", pb.IndexState_INDEX_STATE_READY)
		ts.WaitIndex("pc.Payment", "ref", pb.IndexState_INDEX_STATE_READY)
	}
	ts.Stop()
	mustCheckMemFS(t, fs, "at the end")
	t.Logf("%d power cuts in %v: %d batches present; batches in flight at the cut %d kept whole, %d lost; "+
		"%d cuts during a schema apply, %d with an index building; the watcher received %d changes before the cuts",
		rounds, time.Since(start).Round(time.Millisecond), len(m.present), m.kept, m.lost, m.applyUndecided, m.building, len(m.watched))
}

// powercutDir is the data directory on the in-memory filesystem; nested,
// so that the first start creates directories whose entries must be synced.
const powercutDir = "/srv/protobase/data"

// powercutStart starts a server on the data directory of fs.
func powercutStart(t *testing.T, fs *pebble.MemFS) *servertest.Server {
	t.Helper()
	return servertest.New(t, harness.WithMemFS(server.Config{DataDir: powercutDir}, fs))
}

// powercutRound runs one round on fs and returns what a power cut left of
// it.
func powercutRound(t *testing.T, rng *rand.Rand, m *powercutModel, fs *pebble.MemFS, round, keep int) *pebble.MemFS {
	t.Helper()
	when := fmt.Sprintf("round %d", round)
	ts := powercutStart(t, fs)
	if round == 0 {
		m.version = ts.MustApply(powercutSchema(false)).Version
	} else {
		m.verify(t, ts, when)
	}

	m.mu.Lock()
	m.promise = true
	m.mu.Unlock()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	acks := newAckCounter()
	errs := make(chan error, 4)
	var wg sync.WaitGroup
	run := func(f func() error) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := f(); err != nil && ctx.Err() == nil {
				errs <- err
			}
		}()
	}
	for _, depth := range []int{1, 1, 4} {
		run(func() error { return m.write(ctx, ts.C, acks, depth) })
	}
	run(func() error { return m.watch(ctx, ts.C) })
	cutNow := m.scheduleCut(ctx, rng, round, ts.C, acks, run)
	select {
	case <-cutNow:
	case err := <-errs:
		t.Fatalf("%s: before the cut: %v", when, err)
	case <-time.After(time.Minute):
		t.Fatalf("%s: the moment of the cut never came", when)
	}
	cut := m.cut(fs, rng, keep)
	cancel()
	wg.Wait()
	ts.Stop()

	mustCheckMemFS(t, cut, when+", after the power cut")
	return cut
}

// scheduleCut picks the moment of the cut, a random count of
// acknowledgements away, and maybe a schema apply (on run): with no apply,
// or with one that may still be running at the cut, or a few batches after
// an apply that added indexes, so that the cut often finds them building.
func (m *powercutModel) scheduleCut(ctx context.Context, rng *rand.Rand, round int, c *client.Client,
	acks *ackCounter, run func(func() error)) <-chan struct{} {
	cutAt := 1 + rng.IntN(40)
	mode := rng.IntN(3)
	if round == 0 || mode == 0 {
		return acks.reached(cutAt)
	}
	applied := make(chan struct{})
	applyAt := rng.IntN(cutAt)
	run(func() error { return m.apply(ctx, c, acks.reached(applyAt), applied) })
	if mode == 1 {
		return acks.reached(cutAt)
	}
	after := rng.IntN(4)
	cutNow := make(chan struct{})
	go func() {
		defer close(cutNow)
		select {
		case <-applied:
		case <-ctx.Done():
			return
		}
		select {
		case <-acks.reached(acks.count() + after):
		case <-ctx.Done():
		}
	}()
	return cutNow
}

// mustCheckMemFS fails the test unless server.Check finds the data
// directory on fs consistent.
func mustCheckMemFS(t *testing.T, fs *pebble.MemFS, when string) {
	t.Helper()
	report, err := harness.CheckMemFS(t.Context(), fs, powercutDir)
	if err != nil {
		t.Fatalf("%s: check: %v", when, err)
	}
	if !report.OK() {
		var out strings.Builder
		_, _ = report.WriteTo(&out)
		t.Fatalf("%s: the indexes disagree with the records:\n%s", when, out.String())
	}
}

// cut cuts the power on fs. An acknowledgement counted before the cut
// begins promises survival; one after promises nothing (it may come
// after the cut), and a batch sent at any time may survive.
func (m *powercutModel) cut(fs *pebble.MemFS, rng *rand.Rand, keep int) *pebble.MemFS {
	m.mu.Lock()
	m.promise = false
	m.inFlight = map[int]bool{}
	for n := range m.sent {
		if !m.present[n] {
			m.inFlight[n] = true
		}
	}
	m.mu.Unlock()
	return fs.PowerCut(rng, keep)
}

// write streams batches on one Write stream, each asking for an
// acknowledgement, with up to depth of them unacknowledged (1: each is
// acknowledged before the next is sent; more: the server acknowledges
// while later batches arrive), until ctx ends or the stream fails.
func (m *powercutModel) write(ctx context.Context, c *client.Client, acks *ackCounter, depth int) error {
	st, err := c.API().Write(ctx)
	if err != nil {
		return err
	}
	var waiting []int // sent, not yet acknowledged, oldest first
	for ctx.Err() == nil {
		m.mu.Lock()
		n := m.next
		m.next++
		m.sent[n] = true
		m.mu.Unlock()
		if err := st.Send(&pb.WriteStreamRequest{Op: pb.WriteOp_WRITE_OP_INSERT, Records: powercutRecords(n), Ack: true}); err != nil {
			return fmt.Errorf("send batch %d: %w", n, err)
		}
		waiting = append(waiting, n)
		for len(waiting) >= depth {
			if _, err := st.Recv(); err != nil {
				return fmt.Errorf("batch %d: %w", waiting[0], err)
			}
			m.mu.Lock()
			if m.promise {
				m.present[waiting[0]] = true
			}
			m.mu.Unlock()
			waiting = waiting[1:]
			acks.add()
		}
	}
	return nil
}

// apply toggles the extra indexes once start is closed, and closes
// applied when the server has acknowledged it.
func (m *powercutModel) apply(ctx context.Context, c *client.Client, start <-chan struct{}, applied chan<- struct{}) error {
	select {
	case <-start:
	case <-ctx.Done():
		return nil
	}
	m.mu.Lock()
	extra := !m.extra
	m.pending = true
	m.mu.Unlock()
	// Without the extra indexes the apply drops them, which it must name.
	resp, err := c.ApplySchema(ctx, powercutSchema(extra), client.SchemaOptions{AllowDrop: []string{"pc.Account.name", "pc.Payment.ref", "pc.Payment.by_account"}})
	if err != nil {
		return fmt.Errorf("apply schema (extra indexes %v): %w", extra, err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.promise {
		m.version, m.extra, m.pending = resp.Version, extra, false
	}
	close(applied)
	return nil
}

// verify checks the data and schema of a server started after a cut
// against m, and learns the fate of the batches and the schema apply the
// cut left undecided.
func (m *powercutModel) verify(t *testing.T, ts *servertest.Server, when string) {
	t.Helper()
	m.verifySchema(t, ts, when)
	stored := map[string]bool{} // record bytes, both types: the bytes hold the type's own keys
	for _, typ := range []string{"pc.Account", "pc.Payment"} {
		for _, b := range rawRecords(t, ts.C, typ) {
			stored[string(b)] = true
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	found := 0
	for n := range m.next {
		if !m.present[n] && !m.sent[n] {
			continue // known lost at an earlier cut
		}
		have := 0
		for _, r := range powercutRecords(n) {
			if stored[string(r.Value)] {
				have++
			}
		}
		switch {
		case m.present[n] && have != 2*powercutBatch:
			t.Fatalf("%s: acknowledged batch %d: %d of its %d records", when, n, have, 2*powercutBatch)
		case have != 0 && have != 2*powercutBatch:
			t.Fatalf("%s: unacknowledged batch %d half visible: %d of its %d records", when, n, have, 2*powercutBatch)
		case m.present[n]:
			found += have
		case have != 0:
			m.present[n] = true
			found += have
			if m.inFlight[n] {
				m.kept++
			}
		case m.inFlight[n]:
			m.lost++
		}
	}
	if found != len(stored) {
		t.Fatalf("%s: %d records stored, %d of them from whole batches that were sent", when, len(stored), found)
	}
	m.verifyLog(t, ts, when)
	m.sent = map[int]bool{}
	for n := range m.present { // the unique index refuses a value it holds
		var a []byte
		a = protowire.AppendTag(a, 1, protowire.VarintType)
		a = protowire.AppendVarint(a, uint64(-1-int64(n)))
		a = protowire.AppendTag(a, 3, protowire.BytesType)
		a = protowire.AppendString(a, fmt.Sprintf("a%d@example.com", n*powercutBatch))
		_, err := ts.Write(harness.Insert, []*anypb.Any{{TypeUrl: "type.googleapis.com/pc.Account", Value: a}})
		if we := servertest.WriteErr(t, err, codes.AlreadyExists); we.Field != "email" {
			t.Fatalf("%s: batch %d's email again refused on field %q, want email", when, n, we.Field)
		}
		break
	}
}

// verifySchema checks the schema the server found after a cut is the one
// last acknowledged, or the one applied when the power was cut, never a
// mix, and that no index build failed.
func (m *powercutModel) verifySchema(t *testing.T, ts *servertest.Server, when string) {
	t.Helper()
	resp, err := ts.C.GetSchema(t.Context())
	if err != nil {
		t.Fatalf("%s: get schema: %v", when, err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	want := m.extra
	if m.pending && resp.Version == m.version+1 {
		want = !want
	} else if resp.Version != m.version {
		t.Fatalf("%s: schema version %d, want %d (an apply pending: %v)", when, resp.Version, m.version, m.pending)
	}
	if got := resp.Files["pc.proto"]; got != powercutSchema(want)["pc.proto"] {
		t.Fatalf("%s: schema version %d holds the wrong source (want extra indexes %v):\n%s", when, resp.Version, want, got)
	}
	if m.pending {
		m.applyUndecided++
	}
	if resp.Version != m.readyAt || m.ready == nil {
		m.ready, m.readyAt = map[string]bool{}, resp.Version
	}
	m.version, m.extra, m.pending = resp.Version, want, false
	building := false
	for _, rt := range resp.Types {
		for _, ix := range rt.Indexes {
			name := rt.Name + "." + ix.Name
			switch ix.State {
			case pb.IndexState_INDEX_STATE_FAILED:
				t.Fatalf("%s: index %s failed: %s", when, name, ix.Error)
			case pb.IndexState_INDEX_STATE_BUILDING:
				if m.ready[name] {
					t.Fatalf("%s: index %s is building again: it was READY after an earlier cut", when, name)
				}
				building = true
			case pb.IndexState_INDEX_STATE_READY:
				m.ready[name] = true
			}
		}
	}
	if building {
		m.building++
	}
}

// rawRecords returns the stored bytes of every record of typ, read by one
// Scan.
func rawRecords(t *testing.T, c *client.Client, typ string) [][]byte {
	t.Helper()
	st, err := c.API().Scan(t.Context(), &pb.ScanRequest{Query: &pb.Query{Type: typ}, Parallelism: 1})
	if err != nil {
		t.Fatalf("scan %s: %v", typ, err)
	}
	var out [][]byte
	for {
		resp, err := st.Recv()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatalf("scan %s: %v", typ, err)
		}
		for _, a := range resp.Records {
			out = append(out, a.GetValue())
		}
	}
}

// ackCounter counts acknowledgements and tells when a count is reached.
type ackCounter struct {
	mu      sync.Mutex
	n       int                   // acknowledgements so far
	waiters map[int]chan struct{} // closed once n reaches the key
}

func newAckCounter() *ackCounter { return &ackCounter{waiters: map[int]chan struct{}{}} }

// reached returns a channel closed once n acknowledgements are counted.
func (a *ackCounter) reached(n int) <-chan struct{} {
	a.mu.Lock()
	defer a.mu.Unlock()
	ch, ok := a.waiters[n]
	if !ok {
		ch = make(chan struct{})
		a.waiters[n] = ch
		if a.n >= n {
			close(ch)
		}
	}
	return ch
}

func (a *ackCounter) count() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.n
}

func (a *ackCounter) add() {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.n++
	if ch, ok := a.waiters[a.n]; ok {
		close(ch)
	}
}

// watch receives changes from the watcher's last position until ctx ends,
// keeping those received before the cut began.
func (m *powercutModel) watch(ctx context.Context, c *client.Client) error {
	m.mu.Lock()
	start := m.watchLast
	m.mu.Unlock()
	st, err := c.API().Watch(ctx, &pb.WatchRequest{Types: []string{"pc.Account", "pc.Payment"},
		Start: &pb.WatchStart{Start: &pb.WatchStart_After{After: start}}})
	if err != nil {
		return err
	}
	for {
		resp, err := st.Recv()
		if err != nil {
			return fmt.Errorf("watch: %w", err) // run ignores it once ctx has ended
		}
		m.mu.Lock()
		if m.promise {
			m.watched = append(m.watched, resp.Changes...)
			m.watchLast = resp.Progress
		}
		m.mu.Unlock()
	}
}

// verifyLog reads the change log whole and checks it against the batches
// present (each commit one whole batch, every present batch once) and
// against what the watcher received before the cuts: the log's first
// changes, exactly (it never saw a change the cut lost). verify calls it
// holding m.mu.
func (m *powercutModel) verifyLog(t *testing.T, ts *servertest.Server, when string) {
	t.Helper()
	end := harness.LastCommit(ts, "pc.Account")
	log := harness.NewWatcher(&pb.WatchRequest{Types: []string{"pc.Account", "pc.Payment"}})
	log.CatchUp(t, ts, end)
	batchOf := map[uint64]int{}
	count := map[uint64]int{}
	batches := map[int]bool{}
	for _, ch := range log.Got {
		c := ch.Position.GetCommit()
		v, n := protowire.ConsumeVarint(ch.Record.GetValue()[1:])
		if n < 0 {
			t.Fatalf("%s: change log record %x", when, ch.Record.GetValue())
		}
		b := int(v) / powercutBatch
		if prev, ok := batchOf[c]; ok && prev != b {
			t.Fatalf("%s: commit %d of the change log mixes batches %d and %d", when, c, prev, b)
		}
		batchOf[c] = b
		count[c]++
		batches[b] = true
	}
	for c, n := range count {
		if n != 2*powercutBatch {
			t.Fatalf("%s: commit %d of the change log holds %d changes, want %d", when, c, n, 2*powercutBatch)
		}
	}
	if len(batches) != len(m.present) {
		t.Fatalf("%s: the change log holds %d batches, the store %d", when, len(batches), len(m.present))
	}
	for n := range m.present {
		if !batches[n] {
			t.Fatalf("%s: batch %d is stored but not in the change log", when, n)
		}
	}
	if len(m.watched) > len(log.Got) {
		t.Fatalf("%s: the watcher received %d changes before the cuts, the log holds %d", when, len(m.watched), len(log.Got))
	}
	for i, ch := range m.watched {
		if !proto.Equal(ch, log.Got[i]) {
			t.Fatalf("%s: watched change %d at %v is not the log's (%v): the watcher saw a change the cut lost", when, i, ch.Position, log.Got[i].Position)
		}
	}
}
