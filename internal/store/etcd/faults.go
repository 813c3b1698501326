package etcd

import (
	"errors"
	"log/slog"
	"sync/atomic"

	"github.com/protobase/protobase/internal/lograte"
	"github.com/protobase/protobase/internal/store"
)

// faults counts the attempts the cluster did not serve, by what they left
// behind, and logs them at warn, each kind at most once per lograte.Every
// with the count since its last line: with the cluster away, every
// request fails, and one line per request would bury everything else.
type faults struct {
	log         *slog.Logger // nil: no lines
	unavailable atomic.Uint64
	unknown     atomic.Uint64
	lines       [2]lograte.Limiter // by kind: unavailable, unknown
}

// note counts err when it is one of the store's faults and returns it.
func (f *faults) note(err error) error {
	switch {
	case errors.Is(err, store.ErrOutcomeUnknown):
		f.unknown.Add(1)
		f.line(1, "etcd: write batches sent without an answer (they may have been applied)", err)
	case errors.Is(err, store.ErrUnavailable):
		f.unavailable.Add(1)
		f.line(0, "etcd: requests failed unapplied, the cluster unreachable or not answering", err)
	}
	return err
}

func (f *faults) line(kind int, msg string, err error) {
	if f.log == nil {
		return
	}
	if n, ok := f.lines[kind].Allow(); ok {
		f.log.Warn(msg, "count", n, "error", err.Error())
	}
}

// Faults returns how many attempts of requests failed
// store.ErrUnavailable (nothing applied) and how many attempts of write
// batches failed store.ErrOutcomeUnknown since Open, for the server's
// metrics. Each is attempted again until the retry timeout (retry.go), so
// a fault reaches the caller only when the attempts run out.
func (s *Store) Faults() (unavailable, outcomeUnknown uint64) {
	return s.faults.unavailable.Load(), s.faults.unknown.Load()
}
