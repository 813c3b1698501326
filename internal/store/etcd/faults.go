package etcd

import (
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/protobase/protobase/internal/store"
)

// faultLogEvery is how often at most the store logs one kind of fault:
// with the cluster away, every request fails, and one line per request
// would bury everything else.
const faultLogEvery = 10 * time.Second

// faults counts the attempts the cluster did not serve, by what they left
// behind, and logs them at warn, each kind at most once per faultLogEvery
// with the count since its last line.
type faults struct {
	log         *slog.Logger // nil: no lines
	unavailable atomic.Uint64
	unknown     atomic.Uint64

	mu sync.Mutex
	// lines are the last line of each kind: when, and the count then.
	lines [2]struct {
		at    time.Time
		count uint64
	}
}

// note counts err when it is one of the store's faults and returns it.
func (f *faults) note(err error) error {
	switch {
	case errors.Is(err, store.ErrOutcomeUnknown):
		f.line(1, f.unknown.Add(1), "etcd: write batches sent without an answer (they may have been applied)", err)
	case errors.Is(err, store.ErrUnavailable):
		f.line(0, f.unavailable.Add(1), "etcd: requests failed unapplied, the cluster unreachable or not answering", err)
	}
	return err
}

func (f *faults) line(kind int, n uint64, msg string, err error) {
	if f.log == nil {
		return
	}
	f.mu.Lock()
	l := &f.lines[kind]
	if !l.at.IsZero() && time.Since(l.at) < faultLogEvery {
		f.mu.Unlock()
		return
	}
	since := n - l.count
	l.at, l.count = time.Now(), n
	f.mu.Unlock()
	f.log.Warn(msg, "count", since, "error", err.Error())
}

// Faults returns how many attempts of requests failed
// store.ErrUnavailable (nothing applied) and how many attempts of write
// batches failed store.ErrOutcomeUnknown since Open, for the server's
// metrics. Each is attempted again until the retry timeout (retry.go), so
// a fault reaches the caller only when the attempts run out.
func (s *Store) Faults() (unavailable, outcomeUnknown uint64) {
	return s.faults.unavailable.Load(), s.faults.unknown.Load()
}
