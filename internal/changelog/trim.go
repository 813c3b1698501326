package changelog

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/protobase/protobase/internal/keyspace"
	"github.com/protobase/protobase/internal/store"
)

// TrimEvery trims the log every interval until ctx ends; a failed round
// is logged and the next one tries again. The engine runs it on a
// goroutine of its own while the log is on.
func (l *Log) TrimEvery(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if err := l.Trim(); err != nil {
				l.opts.Logger.Warn("change log trim failed", "err", err)
			}
		}
	}
}

// Trim deletes the entries older than the retention on the log's clock or
// beyond the retention bytes, with one DeleteRange, and drops them from
// the tail. TrimEvery calls it; tests call it to trim at a time of their
// choosing.
func (l *Log) Trim() error {
	if !l.on {
		return nil
	}
	it, err := l.st.NewIterator(logStart, logEnd)
	if err != nil {
		return fmt.Errorf("trim change log: %w", err)
	}
	cut, err := l.trimPoint(it, l.clock.now())
	if cerr := it.Close(); err == nil {
		err = cerr
	}
	if err != nil || cut == nil {
		return err
	}
	b := l.st.NewWriteBatch()
	defer b.Close()
	b.DeleteRange(logStart, cut)
	if err := l.st.ApplyBatch(b); err != nil {
		return fmt.Errorf("trim change log: %w", err)
	}
	keep := uint64(math.MaxUint64) // cut is logEnd: nothing is kept
	if c, ok := keyspace.LogCommit(cut); ok {
		keep = c
	}
	l.tail.trimBefore(keep)
	return nil
}

// trimPoint returns the key of the first entry to keep at the log's time
// now (logEnd when none is), or nil when nothing is to be trimmed. It
// reads the entries' headers only, stepping over their parts.
func (l *Log) trimPoint(it store.Iterator, now int64) ([]byte, error) {
	_, last, found, err := lastEntry(it)
	if err != nil || !found {
		return nil, err
	}
	total := last.cum + last.stored
	oldest := now - int64(l.opts.Retention)
	var lowCum uint64
	if rb := uint64(l.opts.RetentionBytes); rb > 0 && total > rb {
		lowCum = total - rb
	}
	first := true
	for ok := it.First(); ok; first = false {
		c, part, _ := entryCommit(it.Key())
		if !part {
			h, err := readHead(it.Key(), it.Value())
			if err != nil {
				return nil, err
			}
			if h.at >= oldest && h.cum >= lowCum {
				if first {
					return nil, nil
				}
				return append([]byte(nil), it.Key()...), nil
			}
			if h.parts == 0 {
				ok = it.Next()
				continue
			}
		}
		ok = it.SeekGE(logKey(c + 1))
	}
	if err := it.Error(); err != nil {
		return nil, err
	}
	return logEnd, nil
}

// lastEntry returns the commit of the log's last entry and what its
// header says (zero when it does not read: the log is then dropped or
// trimmed whole as if it held nothing, not refused).
func lastEntry(it store.Iterator) (c uint64, h entryHead, found bool, err error) {
	if !it.Last() {
		return 0, entryHead{}, false, it.Error()
	}
	c, part, ok := entryCommit(it.Key())
	if ok && part && !it.SeekGE(logKey(c)) {
		ok = false
	}
	if ok {
		h, _ = readHead(it.Key(), it.Value())
	}
	return c, h, true, it.Error()
}
