package cluster_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/protobase/protobase/client"
	pb "github.com/protobase/protobase/gen/protobase/v1"
	"github.com/protobase/protobase/internal/cluster"
	"github.com/protobase/protobase/server"
)

// bins builds both programs once for the test binary.
var bins = sync.OnceValues(func() (cluster.Binaries, error) {
	dir, err := cluster.BinCache(context.Background())
	if err != nil {
		return cluster.Binaries{}, err
	}
	return cluster.Build(context.Background(), dir)
})

// startCluster starts three members (roomy transactions, so that a batch
// of ingestBatch records fits) and n servers over them, under t.TempDir().
func startCluster(t *testing.T, n int) *cluster.Cluster {
	t.Helper()
	if testing.Short() {
		t.Skip("starts an etcd cluster and servers as processes")
	}
	b, err := bins()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 3*cluster.StartTimeout)
	defer cancel()
	start := time.Now()
	c, err := cluster.Start(ctx, b, t.TempDir(), cluster.Options{
		Etcd: cluster.EtcdOptions{Args: roomyArgs}, Servers: n})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("three members and %d servers serve after %v", n, time.Since(start).Round(time.Millisecond))
	t.Cleanup(func() {
		for _, s := range c.Servers {
			_ = s.Kill()
		}
		c.Etcd.KillAll()
		if t.Failed() {
			for _, s := range c.Servers {
				logTail(t, s.Log)
			}
		}
	})
	return c
}

const ingestProto = `syntax = "proto3";
package ingest;
import "protobase/v1/options.proto";

message Item {
  option (protobase.v1.record) = {
    primary_key: "id"
    index: { fields: "tag" unique: true }
    index: { fields: "batch" }
  };
  int64 id = 1;
  int64 batch = 2;
  string tag = 3;
}
`

// ingestBatch is the records per batch: a batch half visible would show as
// fewer of them.
const ingestBatch = 20

// ingestRecords builds batch n, whose ids and tags encode n.
func ingestRecords(n int) []*anypb.Any {
	recs := make([]*anypb.Any, ingestBatch)
	for i := range recs {
		var b []byte
		b = protowire.AppendTag(b, 1, protowire.VarintType)
		b = protowire.AppendVarint(b, uint64(n*ingestBatch+i))
		b = protowire.AppendTag(b, 2, protowire.VarintType)
		b = protowire.AppendVarint(b, uint64(n))
		b = protowire.AppendTag(b, 3, protowire.BytesType)
		b = protowire.AppendString(b, fmt.Sprintf("tag-%d-%d", n, i))
		recs[i] = &anypb.Any{TypeUrl: "type.googleapis.com/ingest.Item", Value: b}
	}
	return recs
}

// ingester writes batches through Write streams with acknowledgements, on
// whichever of its servers answers, and records what was acknowledged. A
// batch whose stream failed before its acknowledgement is never sent again:
// its outcome is unknown, so it may be present (whole) or absent.
//
// Invariant: mu guards acked, next and failures; progress is signalled
// (without blocking) after every acknowledgement.
type ingester struct {
	servers  []*cluster.Server
	mu       sync.Mutex
	acked    map[int]bool
	next     int
	failures int
	progress chan struct{}
}

func newIngester(servers ...*cluster.Server) *ingester {
	return &ingester{servers: servers, acked: map[int]bool{}, progress: make(chan struct{}, 1)}
}

// streamBatches is how many batches one stream carries before it closes,
// so that the writer comes back to its first server once that one is up.
const streamBatches = 5

// run writes until ctx ends. Each stream goes to the first server; when a
// stream fails the next one goes to the next server, and after a stream
// that ended well the writer starts again from the first.
func (w *ingester) run(ctx context.Context) {
	i := 0
	for ctx.Err() == nil {
		if w.stream(ctx, w.servers[i%len(w.servers)].Addr()) {
			i = 0
			continue
		}
		if ctx.Err() != nil {
			return
		}
		i++
		w.mu.Lock()
		w.failures++
		w.mu.Unlock()
		// A server being killed or a member electing a leader: give it a
		// moment rather than spinning on refused connections.
		select {
		case <-ctx.Done():
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// stream writes streamBatches batches on one stream and reports whether
// the stream ended well.
func (w *ingester) stream(ctx context.Context, addr string) bool {
	c, err := client.Dial(addr)
	if err != nil {
		return false
	}
	defer c.Close()
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	st, err := c.API().Write(sctx)
	if err != nil {
		return false
	}
	for range streamBatches {
		w.mu.Lock()
		n := w.next
		w.next++
		w.mu.Unlock()
		if err := st.Send(&pb.WriteStreamRequest{Op: pb.WriteOp_WRITE_OP_INSERT, Records: ingestRecords(n), Ack: true}); err != nil {
			return false
		}
		if _, err := st.Recv(); err != nil {
			return false
		}
		w.mu.Lock()
		w.acked[n] = true
		w.mu.Unlock()
		select {
		case w.progress <- struct{}{}:
		default:
		}
	}
	if err := st.CloseSend(); err != nil {
		return false
	}
	_, err = st.Recv()
	return errors.Is(err, io.EOF)
}

// waitAcks blocks until n more batches are acknowledged, or fails the test
// after a bound.
func (w *ingester) waitAcks(t *testing.T, n int, what string) {
	t.Helper()
	start := time.Now()
	defer func() {
		t.Logf("%s: %d batches acknowledged in %v", what, n, time.Since(start).Round(time.Millisecond))
	}()
	deadline := time.NewTimer(90 * time.Second)
	defer deadline.Stop()
	w.mu.Lock()
	want := len(w.acked) + n
	w.mu.Unlock()
	for {
		w.mu.Lock()
		got := len(w.acked)
		w.mu.Unlock()
		if got >= want {
			return
		}
		select {
		case <-w.progress:
		case <-deadline.C:
			t.Fatalf("%s: %d of %d batches acknowledged after 90s", what, got, want)
		}
	}
}

// start runs the ingester until the returned stop is called.
func (w *ingester) start() (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); w.run(ctx) }()
	return func() { cancel(); <-done }
}

// checkIngest reads every Item through addr and checks that each
// acknowledged batch is there whole and no batch is there in part, then
// runs the index checker on the cluster's store.
func checkIngest(t *testing.T, c *cluster.Cluster, addr string, w *ingester) {
	t.Helper()
	cl, err := client.Dial(addr)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	present := map[int]int{}
	sc := cl.Scan(ctx, &pb.Query{Type: "ingest.Item"}, client.ScanOptions{Parallelism: 4})
	for sc.Next() {
		batch, ok := itemBatch(sc.Record().GetValue())
		if !ok {
			t.Fatalf("undecodable item %x", sc.Record().GetValue())
		}
		present[batch]++
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("scan: %v", err)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for b, n := range present {
		if n != ingestBatch {
			t.Errorf("batch %d half visible: %d of %d records", b, n, ingestBatch)
		}
	}
	for b := range w.acked {
		if present[b] != ingestBatch {
			t.Errorf("acknowledged batch %d lost: %d of %d records", b, present[b], ingestBatch)
		}
	}
	t.Logf("%d batches acknowledged, %d present, %d streams failed", len(w.acked), len(present), w.failures)
	check := time.Now()
	defer func() { t.Logf("index check took %v", time.Since(check).Round(time.Millisecond)) }()
	report, err := server.CheckEtcd(ctx, server.EtcdConfig{Endpoints: c.Etcd.Endpoints()})
	if err != nil {
		t.Fatalf("index check: %v", err)
	}
	if !report.OK() {
		var out strings.Builder
		_, _ = report.WriteTo(&out)
		t.Fatalf("the indexes disagree with the records:\n%s", out.String())
	}
}

// itemBatch reads field 2 (batch) of an Item.
func itemBatch(b []byte) (int, bool) {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return 0, false
		}
		b = b[n:]
		if num == 2 && typ == protowire.VarintType {
			v, n := protowire.ConsumeVarint(b)
			return int(v), n >= 0
		}
		n = protowire.ConsumeFieldValue(num, typ, b)
		if n < 0 {
			return 0, false
		}
		b = b[n:]
	}
	return 0, false
}

func applyIngestSchema(t *testing.T, addr string) {
	t.Helper()
	cl, err := client.Dial(addr)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if _, err := cl.ApplySchema(t.Context(), map[string]string{"ingest.proto": ingestProto}, client.SchemaOptions{}); err != nil {
		t.Fatal(err)
	}
}

// TestIngestEtcdMemberKilled kills the etcd leader with SIGKILL while a
// Protobase server ingests: writes go on, and after the member's restart
// every acknowledged batch is there whole, none in part, and the indexes
// agree with the records.
func TestIngestEtcdMemberKilled(t *testing.T) {
	c := startCluster(t, 1)
	s := c.Servers[0]
	applyIngestSchema(t, s.Addr())
	w := newIngester(s)
	stop := w.start()
	defer stop()

	w.waitAcks(t, 5, "before the kill")
	victim := leaderOf(t, c.Etcd)
	if err := c.Etcd.Kill(victim); err != nil {
		t.Fatal(err)
	}
	w.waitAcks(t, 10, "with the leader killed")
	ctx, cancel := context.WithTimeout(t.Context(), 2*cluster.StartTimeout)
	defer cancel()
	restart := time.Now()
	if err := c.Etcd.Restart(ctx, victim); err != nil {
		t.Fatal(err)
	}
	t.Logf("%s restarted in %v", c.Etcd.Members()[victim].Name, time.Since(restart).Round(time.Millisecond))
	w.waitAcks(t, 5, "after the member's restart")
	stop()
	checkIngest(t, c, s.Addr(), w)
}

// TestIngestServerKilled kills an ingesting Protobase server with SIGKILL;
// the writer moves to the other server. What the killed server acknowledged
// stays, whole; no batch is half visible, read through either server; the
// killed server restarts and serves the same data.
func TestIngestServerKilled(t *testing.T) {
	c := startCluster(t, 1)
	a := c.Servers[0]
	applyIngestSchema(t, a.Addr())
	// The second server starts after the schema is applied, so that this
	// test does not depend on a running server picking up a schema change
	// (which the etcd backend's own tests cover).
	b, err := c.AddServer(t.Context(), cluster.ServerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	w := newIngester(a, b)
	stop := w.start()
	defer stop()

	for round := range 2 {
		w.waitAcks(t, 5, fmt.Sprintf("round %d, before the kill", round))
		if err := a.Kill(); err != nil {
			t.Fatal(err)
		}
		w.waitAcks(t, 5, fmt.Sprintf("round %d, with %s killed", round, a.Name))
		ctx, cancel := context.WithTimeout(t.Context(), 2*cluster.StartTimeout)
		err := a.Restart(ctx)
		cancel()
		if err != nil {
			t.Fatal(err)
		}
	}
	w.waitAcks(t, 5, "after the restarts")
	stop()
	checkIngest(t, c, b.Addr(), w)
	checkIngest(t, c, a.Addr(), w)
}

// logTail logs the end of a process's log, to explain a failure.
func logTail(t *testing.T, path string) {
	b, err := os.ReadFile(path)
	if err != nil {
		t.Logf("%s: %v", path, err)
		return
	}
	if len(b) > 3000 {
		b = b[len(b)-3000:]
	}
	t.Logf("--- end of %s ---\n%s", path, b)
}
