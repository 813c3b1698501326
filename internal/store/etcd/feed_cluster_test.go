package etcd_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"net/url"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"

	"github.com/protobase/protobase/internal/store"
	"github.com/protobase/protobase/internal/store/etcd"
	"github.com/protobase/protobase/internal/store/etcd/etcdtest"
)

// member is one etcd member of a test cluster, in this process, that can be
// stopped and started again on the same data directory and ports.
type member struct {
	t   *testing.T
	cfg func() *embed.Config
	e   *embed.Etcd // nil while stopped
}

func (m *member) start() {
	m.t.Helper()
	e, err := embed.StartEtcd(m.cfg())
	if err != nil {
		m.t.Fatalf("start etcd member: %v", err)
	}
	m.e = e
}

func (m *member) ready() {
	m.t.Helper()
	select {
	case <-m.e.Server.ReadyNotify():
	case err := <-m.e.Err():
		m.t.Fatalf("etcd member: %v", err)
	case <-time.After(30 * time.Second):
		m.t.Fatal("etcd member not ready after 30 s")
	}
}

func (m *member) stop() {
	if m.e != nil {
		m.e.Close()
		m.e = nil
	}
}

func (m *member) leader() bool {
	return m.e != nil && m.e.Server.Leader() == m.e.Server.MemberID()
}

// startCluster runs an n-member cluster and returns its members and their
// client endpoints; the members stop when the test ends. tune, when not
// nil, changes each member's configuration.
func startCluster(t *testing.T, n int, tune func(*embed.Config)) ([]*member, []string) {
	t.Helper()
	client, peer := make([]url.URL, n), make([]url.URL, n)
	var initial []string
	for i := range n {
		client[i], peer[i] = etcdtest.FreeURL(t), etcdtest.FreeURL(t)
		initial = append(initial, fmt.Sprintf("m%d=%s", i, peer[i].String()))
	}
	ms := make([]*member, n)
	eps := make([]string, n)
	for i := range n {
		dir := t.TempDir()
		ms[i] = &member{t: t, cfg: func() *embed.Config {
			cfg := embed.NewConfig()
			cfg.Name = fmt.Sprintf("m%d", i)
			cfg.Dir = dir
			cfg.Logger = "zap"
			cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.NewNop())
			cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{client[i]}, []url.URL{client[i]}
			cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{peer[i]}, []url.URL{peer[i]}
			cfg.InitialCluster = strings.Join(initial, ",")
			cfg.InitialClusterToken = t.Name()
			cfg.TickMs, cfg.ElectionMs = 50, 500
			if tune != nil {
				tune(cfg)
			}
			return cfg
		}}
		eps[i] = client[i].Host
		t.Cleanup(ms[i].stop)
	}
	for _, m := range ms {
		m.start()
	}
	for _, m := range ms {
		m.ready()
	}
	return ms, eps
}

// loseQuorum stops the leader and one more member, waits until a feed has
// watched again (the remaining member ends watches that require a leader
// after three election timeouts without one, and refuses new ones), and
// starts them again.
func loseQuorum(ctx context.Context, t *testing.T, ms []*member) {
	t.Helper()
	watches := etcd.FeedWatches()
	var leader *member
	for _, m := range ms {
		if m.leader() {
			leader = m
		}
	}
	if leader == nil {
		t.Fatal("no member is the leader")
	}
	leader.stop()
	for _, m := range ms {
		if m != leader {
			m.stop()
			break
		}
	}
	for etcd.FeedWatches() == watches {
		if ctx.Err() != nil {
			t.Fatal("the feed did not watch again while the cluster had no majority")
		}
		time.Sleep(50 * time.Millisecond) // polls a condition
	}
	for _, m := range ms {
		if m.e == nil {
			m.start()
		}
	}
	for _, m := range ms {
		m.ready()
	}
}

// written is one batch of the writer: its operations in order, and its
// revision once known (0: not applied).
type written struct {
	marker string
	ops    []op
	rev    int64
	known  bool // the writer saw the outcome; otherwise the marker tells
}

type op struct {
	key, value string
	del        bool
}

// While the leader of a three-member cluster is stopped and started again,
// twice, a feed sees every committed batch once, in revision order, with
// the previous values the history implies: the cluster ends the watch (no
// leader, member gone) and Changes watches again from where it was.
func TestFeedLeaderRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a three-member cluster and restarts its leader")
	}
	ms, eps := startCluster(t, 3, nil)
	s, err := etcd.Open(etcd.Options{Endpoints: eps, Prefix: "/feed/", RequestTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	r0, err := s.Revision(ctx)
	if err != nil {
		t.Fatal(err)
	}

	got := make(chan []string, 1)
	go func() {
		var ds []string
		err := s.Changes(ctx, nil, r0, func(rev int64, evs []store.Event) error {
			if len(evs) == 0 {
				return nil // a progress mark
			}
			ds = append(ds, show(rev, evs))
			if len(evs) > 0 && string(evs[0].Key) == "end" {
				return errStop
			}
			return nil
		})
		if !errors.Is(err, errStop) {
			t.Errorf("Changes = %v", err)
		}
		got <- ds
	}()

	rng := rand.New(rand.NewPCG(17, 1))
	var batches []*written
	write := func(n int) {
		for range n {
			w := &written{marker: fmt.Sprintf("m/%04d", len(batches))}
			w.ops = append(w.ops, op{key: w.marker, value: "x"})
			for _, k := range rng.Perm(16)[:1+rng.IntN(5)] {
				o := op{key: fmt.Sprintf("k/%02d", k), del: rng.IntN(3) == 0}
				if !o.del {
					o.value = fmt.Sprintf("%d.%d", len(batches), k)
				}
				w.ops = append(w.ops, o)
			}
			b := s.NewWriteBatch()
			for _, o := range w.ops {
				if o.del {
					b.Delete([]byte(o.key))
				} else {
					b.Set([]byte(o.key), []byte(o.value))
				}
			}
			if err := s.ApplyBatch(b); err == nil {
				w.rev, w.known = int64(b.Position()), true
			}
			b.Close()
			batches = append(batches, w)
		}
	}
	restartLeader := func() {
		for _, m := range ms {
			if m.leader() {
				m.stop()
				write(40)
				m.start()
				m.ready()
				return
			}
		}
		t.Fatal("no member is the leader")
	}
	write(40)
	restartLeader()
	write(40)
	restartLeader()
	write(40)
	// Without a majority, the remaining member ends the watch (it requires
	// a leader) and refuses new ones until the others are back: the feed
	// watches again, maybe several times, and must take up where it was.
	loseQuorum(ctx, t, ms)
	write(40)
	apply(t, s, func(b store.WriteBatch) { b.Set([]byte("end"), nil) })

	// Batches whose outcome the writer did not see (the leader went away
	// with them) applied if and only if their marker is there.
	failed := 0
	for _, w := range batches {
		if w.known {
			continue
		}
		failed++
		_, ver, found, err := s.GetVersioned([]byte(w.marker), nil)
		if err != nil {
			t.Fatal(err)
		}
		if found {
			w.rev = int64(ver) //nolint:gosec // a revision, below 2^63
		}
	}
	applied := slices.DeleteFunc(slices.Clone(batches), func(w *written) bool { return w.rev == 0 })
	slices.SortFunc(applied, func(a, b *written) int { return int(a.rev - b.rev) })
	state := map[string]string{}
	var want []string
	for _, w := range applied {
		var evs []store.Event
		for _, o := range w.ops {
			prev, had := state[o.key]
			e := store.Event{Key: []byte(o.key), Delete: o.del}
			if had {
				e.Prev = []byte(prev)
			}
			if o.del {
				if !had {
					continue // etcd reports no deletion of an absent key
				}
				delete(state, o.key)
			} else {
				e.Value = []byte(o.value)
				state[o.key] = o.value
			}
			evs = append(evs, e)
		}
		want = append(want, show(w.rev, evs))
	}
	ds := <-got
	texts := ds[:max(len(ds)-1, 0)] // all but "end"
	t.Logf("%d batches written, %d applied, %d with their outcome unseen; %d revisions delivered",
		len(batches), len(applied), failed, len(texts))
	equalLines(t, "changes across leader restarts", texts, want)
}

// A feed whose prefix sees no writes still moves on with the cluster's
// progress notifications, so that when its watch ends after a compaction
// of those quiet revisions it resumes past them instead of failing. (etcd's
// client resumes a watch itself when only its connection breaks, from the
// revision the last response named; a watch the cluster ends is the
// feed's to resume.)
func TestFeedQuietPrefixResumesAfterCompaction(t *testing.T) {
	ms, eps := startCluster(t, 3, func(cfg *embed.Config) {
		cfg.WatchProgressNotifyInterval = 100 * time.Millisecond
	})
	s, err := etcd.Open(etcd.Options{Endpoints: eps, Prefix: "/quiet/", RequestTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	r0, err := s.Revision(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var quiet atomic.Int64
	quiet.Store(math.MaxInt64)
	passed := make(chan struct{})
	signalled := false // by fn only
	got := make(chan string, 10)
	done := make(chan error, 1)
	go func() {
		done <- s.Changes(ctx, []byte("p/"), r0, func(rev int64, evs []store.Event) error {
			if len(evs) == 0 { // a progress mark
				if rev >= quiet.Load() && !signalled {
					signalled = true
					close(passed)
				}
				return nil
			}
			got <- show(rev, evs)
			return errStop
		})
	}()
	var last int64
	for i := range 5 {
		last = apply(t, s, func(b store.WriteBatch) { b.Set(fmt.Appendf(nil, "q/%d", i), nil) })
	}
	quiet.Store(last)
	select {
	case <-passed:
	case <-ctx.Done():
		t.Fatal("no progress mark past the quiet revisions reached the feed")
	}
	if _, err := s.Client().Compact(ctx, last); err != nil {
		t.Fatal(err)
	}
	loseQuorum(ctx, t, ms)
	rp := apply(t, s, func(b store.WriteBatch) { b.Set([]byte("p/x"), []byte("1")) })
	if err := <-done; !errors.Is(err, errStop) {
		t.Fatalf("Changes = %v; want the change after the compaction", err)
	}
	if g, want := <-got, fmt.Sprintf(`%d: set p/x="1" (was nil);`, rp); g != want {
		t.Errorf("first change = %s; want %s", g, want)
	}
}
