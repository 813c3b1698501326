package changelog

import (
	"fmt"

	"github.com/protobase/protobase/internal/store"
)

// Reader reads the log for one watcher, in rounds: each round reads the
// entries of consecutive commits from a first one on, from the tail when
// the tail holds that commit, else from storage on a fresh iterator, so
// that a reader far behind never pins one storage version for long, and
// comes back to the tail once caught up. While a Reader is open, writers
// hand their entries to the tail. A Reader belongs to one goroutine.
//
// A round:
//
//	r.Round(from, to)
//	defer r.End()
//	for r.More() {
//		c, e, err := r.Next() // e is nil: the round ends here
//		... e.Next(&change) until it reports the end ...
//		err = r.Done()
//	}
//	err = r.Err()
type Reader struct {
	l *Log
	// parts reads the entries stored in parts, its carry reused from
	// entry to entry.
	parts parts

	// The round: commits from..to, next the one to read next.
	from, next, to uint64
	src            source
	it             store.Iterator // src is fromStorage: the round's iterator
	valid          bool           // the iterator is on a key
	read           bool           // Next read the entry under the iterator: More moves on
	held           *tailEntry     // src is fromTail: the entry being read
	ent            Entry
}

// source is where a round reads.
type source uint8

const (
	undecided source = iota
	fromTail
	fromStorage
)

// NewReader opens a reader on the log. reserve, when set, is called with
// the size of a change before a buffer grows past 1 MiB to hold it, the
// change straddling parts of an entry: a watcher covers it in its result
// budget, and its error ends the reading of the entry.
func (l *Log) NewReader(reserve func(n int) error) *Reader {
	l.tail.join()
	return &Reader{l: l, parts: parts{reserve: reserve}}
}

// Close ends the round under way, if any, and the reader.
func (r *Reader) Close() {
	r.End()
	r.l.tail.leave()
}

// Round starts a round over the commits from..to (from ≤ to; to no
// further than the durable watermark). Whether it reads the tail or
// storage is decided by its first Next.
func (r *Reader) Round(from, to uint64) {
	r.End()
	r.from, r.next, r.to = from, from, to
	r.src, r.valid, r.read = undecided, false, false
}

// More reports whether the round may hold another entry; Next says
// whether it does.
func (r *Reader) More() bool {
	if r.src != fromStorage {
		return r.next <= r.to
	}
	if r.read {
		r.read = false
		r.valid = r.it.Next()
	}
	return r.valid
}

// Next returns the next entry of the round and its commit; the entry is
// nil when the round ends here (the tail no longer holds the next commit,
// or storage holds no more: then Err says whether that is an error). The
// entry is valid until Done. Errors are an *EntryError for an entry that
// does not read, ErrGap for an entry missing before the end of the round,
// or the store's.
func (r *Reader) Next() (uint64, *Entry, error) {
	if r.src == undecided {
		if te := r.l.tail.get(r.next); te != nil {
			r.src = fromTail
			return r.tailEntry(te)
		}
		r.src = fromStorage
		it, err := r.l.st.NewIterator(logKey(r.from), logKey(r.to+1))
		if err != nil {
			return 0, nil, err
		}
		r.it, r.valid = it, it.First()
	}
	if r.src == fromTail {
		te := r.l.tail.get(r.next)
		if te == nil {
			return 0, nil, nil
		}
		return r.tailEntry(te)
	}
	if !r.valid {
		return 0, nil, nil
	}
	c, part, ok := entryCommit(r.it.Key())
	if !ok || part {
		return 0, nil, &EntryError{Commit: r.next, Err: errMalformed} // a part with no entry before it
	}
	if c != r.next {
		return 0, nil, ErrGap
	}
	ent, err := readEntry(r.it, c, &r.parts)
	if err != nil {
		return 0, nil, &EntryError{Commit: c, Err: err}
	}
	r.ent, r.read = ent, true
	return c, &r.ent, nil
}

func (r *Reader) tailEntry(te *tailEntry) (uint64, *Entry, error) {
	r.held = te
	ent, err := parseEntry(te.b)
	if err != nil {
		return 0, nil, &EntryError{Commit: te.commit, Err: err}
	}
	r.ent = ent
	return te.commit, &r.ent, nil
}

// Done finishes the entry Next returned, whatever its changes read of
// it: the iterator moves past its parts, or the tail's entry is given
// back. Its error is the entry's (a part missing, or the store's).
func (r *Reader) Done() error {
	r.next++
	if r.src == fromTail {
		r.l.tail.release(r.held)
		r.held = nil
		return nil
	}
	return r.ent.parts.done()
}

// Err returns why a round from storage read less than it should have:
// the iterator's error, or ErrGap when the log held no entry of the
// round's first commit (trimmed meanwhile).
func (r *Reader) Err() error {
	if r.src != fromStorage || r.it == nil {
		return nil
	}
	if err := r.it.Error(); err != nil {
		return fmt.Errorf("read the change log at commit %d: %w", r.next, err)
	}
	if r.next == r.from {
		return ErrGap
	}
	return nil
}

// End ends the round: its iterator is closed, a tail entry given back.
func (r *Reader) End() {
	if r.held != nil {
		r.l.tail.release(r.held)
		r.held = nil
	}
	if r.it != nil {
		r.it.Close()
		r.it = nil
	}
	r.ent = Entry{}
}
