package etcd_test

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/protobase/protobase/client"
	pb "github.com/protobase/protobase/gen/protobase/v1"
	"github.com/protobase/protobase/internal/cluster"
	"github.com/protobase/protobase/internal/store/etcd"
	"github.com/protobase/protobase/internal/store/etcd/etcdtest"
	"github.com/protobase/protobase/server"
	"github.com/protobase/protobase/server/servertest"
)

const killProto = `syntax = "proto3";
package kill;
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
  bytes pad = 4;
}

message Counter {
  option (protobase.v1.record) = { primary_key: "id" };
  int64 id = 1;
  int64 n = 2;
}
`

// killBatch is the records of one ingest batch: a batch half applied
// shows as fewer of them. Each carries killPad bytes, so that a commit is
// far larger than any read (the lossy link tells them apart by size).
const (
	killBatch = 20
	killPad   = 1 << 10
	killCount = 30
)

// killItems builds batch n: ids, tags and the batch field encode n.
func killItems(n int) []*anypb.Any {
	recs := make([]*anypb.Any, killBatch)
	pad := make([]byte, killPad)
	for i := range recs {
		var b []byte
		b = protowire.AppendTag(b, 1, protowire.VarintType)
		b = protowire.AppendVarint(b, uint64(n*killBatch+i))
		b = protowire.AppendTag(b, 2, protowire.VarintType)
		b = protowire.AppendVarint(b, uint64(n))
		b = protowire.AppendTag(b, 3, protowire.BytesType)
		b = protowire.AppendString(b, fmt.Sprintf("tag-%d-%d", n, i))
		b = protowire.AppendTag(b, 4, protowire.BytesType)
		b = protowire.AppendBytes(b, pad)
		recs[i] = &anypb.Any{TypeUrl: "type.googleapis.com/kill.Item", Value: b}
	}
	return recs
}

// varintField reads varint field num of an encoded message.
func varintField(b []byte, num protowire.Number) (int64, bool) {
	for len(b) > 0 {
		n, typ, l := protowire.ConsumeTag(b)
		if l < 0 {
			return 0, false
		}
		b = b[l:]
		if n == num && typ == protowire.VarintType {
			v, l := protowire.ConsumeVarint(b)
			return int64(v), l >= 0 //nolint:gosec // the test's own small numbers
		}
		l = protowire.ConsumeFieldValue(n, typ, b)
		if l < 0 {
			return 0, false
		}
		b = b[l:]
	}
	return 0, false
}

func counterRec(n int64) *anypb.Any {
	var b []byte
	b = protowire.AppendTag(b, 1, protowire.VarintType)
	b = protowire.AppendVarint(b, 1)
	b = protowire.AppendTag(b, 2, protowire.VarintType)
	b = protowire.AppendVarint(b, uint64(n)) //nolint:gosec // a count
	return &anypb.Any{TypeUrl: "type.googleapis.com/kill.Counter", Value: b}
}

// killLoad is what the test's clients did: ingest batches and counter
// increments, acknowledged or failed, and each batch's latency.
//
// Invariant: mu guards every field but next and incs.
type killLoad struct {
	next atomic.Int64 // the next ingest batch number
	incs atomic.Int64 // counter increments acknowledged

	mu       sync.Mutex
	acked    map[int]bool
	errs     []string
	lat      []span
	progress chan struct{}
}

// span is one acknowledged batch: when it was sent and answered.
type span struct{ from, to time.Time }

func (l *killLoad) fail(what string, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.errs = append(l.errs, fmt.Sprintf("%s: %v", what, err))
}

func (l *killLoad) ackCount() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.acked)
}

// ingest inserts batches through c until ctx ends, each on a stream of
// its own, acknowledged when the stream's response comes back.
func (l *killLoad) ingest(ctx context.Context, c *client.Client) {
	for ctx.Err() == nil {
		n := int(l.next.Add(1) - 1)
		start := time.Now()
		err := func() error {
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Minute)
			defer cancel()
			st, err := c.API().Insert(cctx)
			if err != nil {
				return err
			}
			if err := st.Send(&pb.WriteRequest{Records: killItems(n)}); err != nil {
				return err
			}
			_, err = st.CloseAndRecv()
			return err
		}()
		if err != nil {
			l.fail(fmt.Sprintf("insert batch %d", n), err)
			continue
		}
		l.mu.Lock()
		l.acked[n] = true
		l.lat = append(l.lat, span{start, time.Now()})
		l.mu.Unlock()
		select {
		case l.progress <- struct{}{}:
		default:
		}
	}
}

// increment adds one to the counter with read-modify-write transactions
// through c until ctx ends.
func (l *killLoad) increment(ctx context.Context, c *client.Client) {
	for ctx.Err() == nil {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Minute)
		err := c.Transact(cctx, func(tx *client.Tx) error {
			recs, err := tx.Get("kill.Counter", 1)
			if err != nil {
				return err
			}
			n, _ := varintField(recs[0].GetValue(), 2)
			return tx.Update(counterRec(n + 1))
		}, client.TxOptions{MaxAttempts: 1000})
		cancel()
		if err != nil {
			l.fail("increment", err)
			continue
		}
		l.incs.Add(1)
	}
}

// waitAcks waits until n more ingest batches are acknowledged.
func (l *killLoad) waitAcks(t *testing.T, n int, what string) {
	t.Helper()
	want := l.ackCount() + n
	deadline := time.NewTimer(90 * time.Second)
	defer deadline.Stop()
	for l.ackCount() < want {
		select {
		case <-l.progress:
		case <-deadline.C:
			t.Fatalf("%s: %d of %d batches acknowledged after 90 s", what, l.ackCount(), want)
		}
	}
}

// leaderOf returns the index of the cluster's leader among its members,
// asking those that answer.
func leaderOf(t *testing.T, cli *clientv3.Client, eps []string) int {
	t.Helper()
	for range 100 {
		ids := make([]uint64, len(eps))
		var lead uint64
		for i, ep := range eps {
			ctx, cancel := context.WithTimeout(t.Context(), time.Second)
			st, err := cli.Status(ctx, ep)
			cancel()
			if err == nil {
				ids[i] = st.Header.MemberId
				if st.Leader != 0 {
					lead = st.Leader
				}
			}
		}
		if i := slices.Index(ids, lead); lead != 0 && i >= 0 {
			return i
		}
		time.Sleep(100 * time.Millisecond) // polls for an elected leader
	}
	t.Fatal("no member is the leader")
	return -1
}

// scrapeStore sums the store retry counters of the servers' metrics.
func scrapeStore(t *testing.T, srvs ...*servertest.Server) map[string]float64 {
	t.Helper()
	got := map[string]float64{}
	for _, s := range srvs {
		resp, err := http.Get("http://" + s.Srv.MetricsAddr() + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			name, v, ok := strings.Cut(sc.Text(), " ")
			if !ok || !strings.HasPrefix(name, "protobase_store_") {
				continue
			}
			f, err := strconv.ParseFloat(v, 64)
			if err == nil {
				got[name] += f
			}
		}
		resp.Body.Close()
	}
	return got
}

// Thirty SIGKILLs of etcd members, the leader and followers in turn, each
// restarted, while two servers ingest batches and increment a counter in
// transactions: no client sees an error, every acknowledged batch is there
// whole and no batch is there in part, the counter is the number of
// acknowledged increments (none committed twice, none lost), and the
// checker finds the indexes consistent. Server A reaches one member
// through a link that now and then loses a commit's connection (passing
// the commit on or not), so the commit marker settles unknown outcomes
// whatever the kills do; the test reports how many it settled.
//
// The servers give up an attempt after 2 s (--etcd-timeout): a commit
// that a follower forwarded to a leader just killed is otherwise held for
// etcd's own request timeout (7 s), and the test kills a leader every few
// seconds. docs/scaling.md gives the latencies it logs, with this setting
// and the default.
//
// PROTOBASE_TEST_MARKER_OFF=1 runs it with the marker off: commits of
// unknown outcome are then sent again blindly, and the test fails.
func TestMemberKillsArePauses(t *testing.T) {
	if testing.Short() {
		t.Skip("kills and restarts etcd member processes thirty times")
	}
	if os.Getenv("PROTOBASE_TEST_MARKER_OFF") != "" {
		etcd.SetMarkerOff(true)
		defer etcd.SetMarkerOff(false)
	}
	bin, err := cluster.CachedEtcd()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*cluster.StartTimeout)
	defer cancel()
	c, err := cluster.StartEtcd(ctx, bin, t.TempDir(), cluster.EtcdOptions{Args: []string{
		"--max-txn-ops", strconv.FormatUint(uint64(etcdtest.Roomy.MaxTxnOps), 10),
		"--max-request-bytes", strconv.FormatUint(uint64(etcdtest.Roomy.MaxRequestBytes), 10)}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.KillAll)
	eps := c.Endpoints()
	link := newLossyLink(t, eps[0])
	start := func(endpoints ...string) *servertest.Server {
		return servertest.New(t, server.Config{Store: server.StoreEtcd, MetricsAddr: "127.0.0.1:0",
			Etcd: server.EtcdConfig{Endpoints: endpoints, Prefix: "/kill/", RequestTimeout: 2 * time.Second}})
	}
	a := start(append([]string{link.l.Addr().String()}, eps[1:]...)...)
	a.MustApply(map[string]string{"kill.proto": killProto})
	a.MustWrite(pb.WriteOp_WRITE_OP_INSERT, []*anypb.Any{counterRec(0)})
	b := start(eps...)
	cli, err := clientv3.New(clientv3.Config{Endpoints: eps, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()

	l := &killLoad{acked: map[int]bool{}, progress: make(chan struct{}, 1)}
	lctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for _, s := range []*servertest.Server{a, b} {
		wg.Go(func() { l.ingest(lctx, s.C) })
		wg.Go(func() { l.increment(lctx, s.C) })
	}
	stopLoad := sync.OnceFunc(func() { stop(); wg.Wait() })
	defer stopLoad()

	l.waitAcks(t, 20, "before the kills")
	var leaderDown, followerDown [][2]time.Time // when each kind of member was down
	rng := rand.New(rand.NewPCG(33, 1))
	began := time.Now()
	for i := range killCount {
		link.arm(8<<10, i%2 == 0)
		victim := leaderOf(t, cli, eps)
		if i%2 == 1 {
			victim = (victim + 1 + rng.IntN(2)) % 3
		}
		killed := time.Now()
		if err := c.Kill(victim); err != nil {
			t.Fatal(err)
		}
		l.waitAcks(t, 4, fmt.Sprintf("kill %d, member %d down", i, victim))
		rctx, rcancel := context.WithTimeout(t.Context(), 2*cluster.StartTimeout)
		err := c.Restart(rctx, victim)
		rcancel()
		if err != nil {
			t.Fatal(err)
		}
		down := [2]time.Time{killed, time.Now()}
		if i%2 == 0 {
			leaderDown = append(leaderDown, down)
		} else {
			followerDown = append(followerDown, down)
		}
		l.waitAcks(t, 4, fmt.Sprintf("kill %d, member %d back", i, victim))
	}
	t.Logf("%d kills in %v; the link lost %d commits' connections", killCount, time.Since(began).Round(time.Second), link.fired.Load())
	l.waitAcks(t, 5, "after the kills")
	stopLoad()

	for _, e := range l.errs {
		t.Errorf("a client saw an error: %s", e)
	}
	checkKilled(t, a, l)
	stats := scrapeStore(t, a, b)
	t.Logf("store counters of both servers: %v", stats)
	settled := stats[`protobase_store_ambiguous_commits_total{outcome="applied"}`] +
		stats[`protobase_store_ambiguous_commits_total{outcome="not_applied"}`]
	if settled == 0 {
		t.Error("no commit of unknown outcome was settled by the marker")
	}
	reportPauses(t, l, leaderDown, followerDown)
}

// checkKilled reads everything back through s and runs the checker.
func checkKilled(t *testing.T, s *servertest.Server, l *killLoad) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	present := map[int]int{}
	sc := s.C.Scan(ctx, &pb.Query{Type: "kill.Item"}, client.ScanOptions{Parallelism: 2})
	for sc.Next() {
		n, ok := varintField(sc.Record().GetValue(), 2)
		if !ok {
			t.Fatalf("undecodable item %x", sc.Record().GetValue())
		}
		present[int(n)]++
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("scan: %v", err)
	}
	for n, k := range present {
		if k != killBatch {
			t.Errorf("batch %d half applied: %d of %d records", n, k, killBatch)
		}
	}
	for n := range l.acked {
		if present[n] != killBatch {
			t.Errorf("acknowledged batch %d lost: %d of %d records", n, present[n], killBatch)
		}
	}
	recs, err := s.C.Get(ctx, "kill.Counter", 1)
	if err != nil {
		t.Fatal(err)
	}
	n, _ := varintField(recs[0].GetValue(), 2)
	if n != l.incs.Load() {
		t.Errorf("the counter is %d after %d acknowledged increments", n, l.incs.Load())
	}
	t.Logf("%d batches acknowledged, %d present; %d increments acknowledged, counter %d",
		len(l.acked), len(present), l.incs.Load(), n)
	report, err := server.CheckEtcd(ctx, server.EtcdConfig{Endpoints: s.Cfg.Etcd.Endpoints[1:], Prefix: "/kill/"})
	if err != nil {
		t.Fatalf("index check: %v", err)
	}
	if !report.OK() {
		var out strings.Builder
		_, _ = report.WriteTo(&out)
		t.Errorf("the indexes disagree with the records:\n%s", out.String())
	}
}

// reportPauses logs the batch latencies of batches that overlapped a
// leader's or a follower's absence, and of the others.
func reportPauses(t *testing.T, l *killLoad, leaderDown, followerDown [][2]time.Time) {
	overlaps := func(s span, ws [][2]time.Time) bool {
		for _, w := range ws {
			if s.from.Before(w[1]) && s.to.After(w[0]) {
				return true
			}
		}
		return false
	}
	var lead, follow, calm []time.Duration
	for _, s := range l.lat {
		d := s.to.Sub(s.from)
		switch {
		case overlaps(s, leaderDown):
			lead = append(lead, d)
		case overlaps(s, followerDown):
			follow = append(follow, d)
		default:
			calm = append(calm, d)
		}
	}
	show := func(what string, ds []time.Duration) {
		if len(ds) == 0 {
			return
		}
		slices.Sort(ds)
		t.Logf("batch latency %s: %d batches, p50 %v, p99 %v, max %v", what, len(ds),
			ds[len(ds)/2].Round(time.Millisecond), ds[len(ds)*99/100].Round(time.Millisecond), ds[len(ds)-1].Round(time.Millisecond))
	}
	show("with no member down", calm)
	show("while a follower was down", follow)
	show("while the leader was down (its election included)", lead)
}
