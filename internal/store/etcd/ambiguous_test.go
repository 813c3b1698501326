package etcd_test

import (
	"errors"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/protobase/protobase/internal/store"
	"github.com/protobase/protobase/internal/store/etcd"
	"github.com/protobase/protobase/internal/store/etcd/etcdtest"
)

// lossyLink relays TCP connections to an etcd member and, once armed,
// loses the connection that carries the next large request: either after
// passing the request on (the member applies it; its answer is lost) or
// before (the member never sees it). Either way the client has sent its
// commit and sees the connection end: an outcome it cannot know.
type lossyLink struct {
	l  net.Listener
	to string

	// armed is the size from which a read of the client's bytes is taken
	// as the commit (0: pass everything); passOn says whether the commit
	// reaches the member.
	armed  atomic.Int64
	passOn atomic.Bool
	fired  atomic.Int64
	// onFire, when set, runs once the armed read has been passed on or
	// dropped, before the client's connection is closed.
	onFire atomic.Pointer[func()]

	mu    sync.Mutex
	conns []net.Conn
}

func newLossyLink(t *testing.T, to string) *lossyLink {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	k := &lossyLink{l: l, to: to}
	go k.accept()
	t.Cleanup(func() {
		l.Close()
		k.mu.Lock()
		defer k.mu.Unlock()
		for _, c := range k.conns {
			c.Close()
		}
	})
	return k
}

// arm loses the connection of the next client read of at least size bytes.
func (k *lossyLink) arm(size int64, passOn bool) {
	k.passOn.Store(passOn)
	k.armed.Store(size)
}

func (k *lossyLink) accept() {
	for {
		in, err := k.l.Accept()
		if err != nil {
			return
		}
		out, err := net.Dial("tcp", k.to)
		if err != nil {
			in.Close()
			continue
		}
		k.mu.Lock()
		k.conns = append(k.conns, in, out)
		k.mu.Unlock()
		lost := new(atomic.Bool)
		go k.requests(in, out, lost)
		go func() {
			buf := make([]byte, 64<<10)
			for {
				n, err := out.Read(buf)
				if lost.Load() {
					return
				}
				if n > 0 {
					if _, werr := in.Write(buf[:n]); werr != nil {
						return
					}
				}
				if err != nil {
					in.Close()
					return
				}
			}
		}()
	}
}

// requests passes the client's bytes on. The armed read is passed on or
// not, the member's answers are dropped from then on, and then the
// client's side of the connection is closed: a commit passed on is
// applied as any other (the link waits a moment for that), and its
// answer goes nowhere.
func (k *lossyLink) requests(in, out net.Conn, lost *atomic.Bool) {
	buf := make([]byte, 256<<10)
	for {
		n, err := in.Read(buf)
		if n > 0 && !lost.Load() {
			if th := k.armed.Load(); th > 0 && int64(n) >= th && k.armed.CompareAndSwap(th, 0) {
				lost.Store(true)
				k.fired.Add(1)
				if fn := k.onFire.Swap(nil); fn != nil {
					(*fn)()
				}
				if !k.passOn.Load() {
					in.Close()
					time.AfterFunc(2*time.Second, func() { out.Close() })
					return
				}
				// The rest of the commit follows in later reads: pass
				// them on for a moment, in which the member applies it.
				_ = in.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
			}
		}
		if n > 0 {
			if _, werr := out.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			in.Close()
			if lost.Load() {
				time.AfterFunc(2*time.Second, func() { out.Close() })
			} else {
				out.Close()
			}
			return
		}
	}
}

// The commit marker settles a commit whose connection was lost after it
// was sent: when the member applied it, the batch is acknowledged at the
// revision that applied it, once; when the member never got it, it is
// sent again and applied once. With the marker off, the same batch sent
// again after a lost answer fails its own precondition: an insert the
// cluster applied would be reported to its client as a duplicate.
func TestCommitOutcomeUnknownSettled(t *testing.T) {
	link := newLossyLink(t, etcdtest.Start(t, etcdtest.Roomy))
	s, err := etcd.Open(etcd.Options{Endpoints: []string{link.l.Addr().String()}, Prefix: "/ambiguous/",
		RequestTimeout: 5 * time.Second, RetryTimeout: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	big := strings.Repeat("v", 32<<10) // far larger than any other request
	// insert writes key if absent, as the engine's inserts do: its read
	// of the key is the batch's precondition.
	insert := func(key string) (uint64, error) {
		b := s.NewWriteBatch()
		defer b.Close()
		if _, found, err := b.Read([]byte(key), nil, true); err != nil || found {
			t.Fatalf("read %s: found %v, %v", key, found, err)
		}
		b.Set([]byte(key), []byte(big))
		err := s.ApplyBatch(b)
		return b.Position(), err
	}
	stored := func(key string, pos uint64) {
		t.Helper()
		_, ver, found, err := s.GetVersioned([]byte(key), nil)
		if err != nil || !found || ver != pos {
			t.Fatalf("%s: found %v at %d (%v); acknowledged at %d", key, found, ver, err, pos)
		}
	}

	for _, tc := range []struct {
		key                   string
		passOn                bool
		wantApplied, wantSent uint64
	}{
		{"answer-lost", true, 1, 0},
		{"request-lost", false, 1, 1},
	} {
		link.arm(16<<10, tc.passOn)
		pos, err := insert(tc.key)
		if err != nil {
			t.Fatalf("%s: %v", tc.key, err)
		}
		stored(tc.key, pos)
		rs := s.RetryStats()
		if rs.AmbiguousApplied != tc.wantApplied || rs.AmbiguousResent != tc.wantSent {
			t.Fatalf("%s: %+v; want %d applied and %d sent again", tc.key, rs, tc.wantApplied, tc.wantSent)
		}
		t.Logf("%s: acknowledged at %d; %+v", tc.key, pos, rs)
	}
	if link.fired.Load() != 2 {
		t.Fatalf("the link lost %d connections, want 2", link.fired.Load())
	}

	etcd.SetMarkerOff(true)
	defer etcd.SetMarkerOff(false)
	link.arm(16<<10, true)
	if _, err := insert("marker-off"); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("without the marker, an applied insert sent again: %v; want its precondition to fail", err)
	}
	if _, found, err := s.Get([]byte("marker-off"), nil); err != nil || !found {
		t.Fatalf("marker-off: found %v (%v); the cluster applied it", found, err)
	}
	t.Log("without the marker, the insert the cluster applied failed its precondition when sent again")
}

// A commit whose request was lost, and whose precondition another writer
// then breaks before it is sent again, fails ErrConflict, and the marker
// counts it settled as not applied: the store moved its slot (the fence)
// before reporting the conflict, so the lost attempt cannot apply later.
// The store's next batch commits under the moved slot.
func TestCommitOutcomeUnknownConflictFenced(t *testing.T) {
	member := etcdtest.Start(t, etcdtest.Roomy)
	link := newLossyLink(t, member)
	open := func(ep string) *etcd.Store {
		s, err := etcd.Open(etcd.Options{Endpoints: []string{ep}, Prefix: "/fenced/",
			RequestTimeout: 5 * time.Second, RetryTimeout: 20 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
	s, other := open(link.l.Addr().String()), open(member)
	big := strings.Repeat("v", 32<<10)
	b := s.NewWriteBatch()
	defer b.Close()
	if _, found, err := b.Read([]byte("k"), nil, true); err != nil || found {
		t.Fatalf("read k: found %v, %v", found, err)
	}
	b.Set([]byte("k"), []byte(big))
	steal := func() {
		ob := other.NewWriteBatch()
		defer ob.Close()
		ob.Set([]byte("k"), []byte("theirs"))
		if err := other.ApplyBatch(ob); err != nil {
			t.Errorf("the other writer: %v", err)
		}
	}
	link.onFire.Store(&steal)
	link.arm(16<<10, false)
	if err := s.ApplyBatch(b); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("ApplyBatch = %v; want ErrConflict", err)
	}
	if rs := s.RetryStats(); rs.AmbiguousResent != 1 || rs.AmbiguousApplied != 0 {
		t.Fatalf("%+v; want one commit settled as not applied", rs)
	}
	if v, _, err := s.Get([]byte("k"), nil); err != nil || string(v) != "theirs" {
		t.Fatalf("k = %.10q (%v); want the other writer's", v, err)
	}
	b2 := s.NewWriteBatch()
	defer b2.Close()
	b2.Set([]byte("next"), []byte("1"))
	if err := s.ApplyBatch(b2); err != nil {
		t.Fatalf("the next batch: %v", err)
	}
}
