package changelog

import "sync"

// The log's tail: the newest committed entries, kept in memory as written
// while readers run on the log, so that a watcher at the tail reads an
// entry without a storage iterator. Opening an iterator and seeking it in
// every level for each batch was the largest part of a tail watcher's
// reading. A reader whose next commit is not in the tail (it is further
// behind) reads the log from storage, as without it, and comes back to
// the tail once caught up.
//
// The tail holds what storage holds: a writer adds its batch's entry
// after the storage batch applied (Applied, under the engine's write
// lock, so in commit order), and readers read no further than the
// durable watermark, as from storage. Trimming the log drops the same
// entries from the tail.
//
// Writers pay nothing for it while no reader runs on the log. While one
// does, the writer hands its entry's buffer over (Pebble copied the bytes
// into its batch) and takes back a buffer of an entry evicted earlier, so
// keeping an entry copies nothing.

// DefaultTailBytes is the tail's default bound (Options.TailBytes).
const DefaultTailBytes = 32 << 20

// tailFree bounds the evicted buffers kept for writers to reuse.
const tailFree = 8

// tail is the log's tail. An entry's bytes are immutable while it is in
// mu.ents or a reader holds it.
type tail struct {
	max int // bytes; 0: no tail. Set by Open, immutable after.

	// mu guards the tail's state and the readers and evicted fields of
	// its entries.
	//
	// Invariant: ents holds consecutive commits, oldest first, totalling
	// bytes ≤ max; it is empty while readers is 0.
	mu struct {
		sync.Mutex
		readers int // Readers open on the log
		ents    []*tailEntry
		bytes   int
		free    [][]byte // buffers of evicted entries no reader holds
		// hits and misses count get's answers.
		hits, misses uint64
	}
}

// tailEntry is one commit's entry value.
type tailEntry struct {
	commit  uint64
	b       []byte
	readers int  // reads of b under way
	evicted bool // no longer in ents: b is recycled once readers is 0
}

// join counts a reader in; the tail fills from the next commit on.
func (t *tail) join() {
	t.mu.Lock()
	t.mu.readers++
	t.mu.Unlock()
}

// leave counts a reader out; with none left the tail is emptied.
func (t *tail) leave() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.mu.readers--; t.mu.readers == 0 {
		t.evictLocked(len(t.mu.ents))
		t.mu.free = nil
	}
}

// add keeps b, the entry of commit c that was just applied, and returns
// the buffer the writer builds its next entry in: b itself when the tail
// does not keep it (no reader, or larger than the bound), else an evicted
// entry's buffer, or a new one. Called under the engine's write lock.
func (t *tail) add(c uint64, b []byte) []byte {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.mu.readers == 0 || len(b) > t.max {
		return b
	}
	if n := len(t.mu.ents); n > 0 && t.mu.ents[n-1].commit+1 != c {
		t.evictLocked(n) // not the next commit: start again from c
	}
	drop := 0
	for drop < len(t.mu.ents) && t.mu.bytes+len(b) > t.max {
		t.mu.bytes -= len(t.mu.ents[drop].b)
		drop++
	}
	t.evictLocked(drop)
	t.mu.ents = append(t.mu.ents, &tailEntry{commit: c, b: b})
	t.mu.bytes += len(b)
	if n := len(t.mu.free); n > 0 {
		next := t.mu.free[n-1]
		t.mu.free = t.mu.free[:n-1]
		return next[:0]
	}
	// Sized at once: grown by append, the entry would be copied again
	// and again.
	return make([]byte, 0, len(b))
}

// evictLocked drops the n oldest entries; bytes must already exclude them
// unless all are dropped.
func (t *tail) evictLocked(n int) {
	for _, te := range t.mu.ents[:n] {
		te.evicted = true
		if te.readers == 0 {
			t.recycleLocked(te)
		}
	}
	if n == len(t.mu.ents) {
		t.mu.bytes = 0
	}
	clear(t.mu.ents[:n])
	t.mu.ents = t.mu.ents[n:]
}

func (t *tail) recycleLocked(te *tailEntry) {
	if t.mu.readers > 0 && len(t.mu.free) < tailFree && cap(te.b) <= maxKeptBuf {
		t.mu.free = append(t.mu.free, te.b)
	}
	te.b = nil
}

// get returns the entry of commit c, held until release, or nil when the
// tail does not have it.
func (t *tail) get(c uint64) *tailEntry {
	t.mu.Lock()
	defer t.mu.Unlock()
	ents := t.mu.ents
	if len(ents) == 0 || c < ents[0].commit || c-ents[0].commit >= uint64(len(ents)) {
		t.mu.misses++
		return nil
	}
	t.mu.hits++
	te := ents[c-ents[0].commit]
	te.readers++
	return te
}

// release gives back an entry get returned.
func (t *tail) release(te *tailEntry) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if te.readers--; te.readers == 0 && te.evicted {
		t.recycleLocked(te)
	}
}

// trimBefore drops the entries of commits before c: the log's trimming
// deleted them from storage.
func (t *tail) trimBefore(c uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := 0
	for n < len(t.mu.ents) && t.mu.ents[n].commit < c {
		t.mu.bytes -= len(t.mu.ents[n].b)
		n++
	}
	t.evictLocked(n)
}

// tailBytes is the tail's bound for the option's value.
func tailBytes(opt int64) int {
	switch {
	case opt == 0:
		return DefaultTailBytes
	case opt < 0:
		return 0
	}
	return int(min(opt, 1<<40))
}

// TailStats is what the tail holds and how readers found it.
type TailStats struct {
	// Hits counts the entries read from the tail, Misses the times a
	// reader found it without the commit it needed.
	Hits, Misses uint64
	// Bytes is what the tail holds now.
	Bytes int
}

// TailStats returns the tail's counters.
func (l *Log) TailStats() TailStats {
	l.tail.mu.Lock()
	defer l.tail.mu.Unlock()
	return TailStats{Hits: l.tail.mu.hits, Misses: l.tail.mu.misses, Bytes: l.tail.mu.bytes}
}
