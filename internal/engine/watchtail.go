package engine

import "sync"

// The log's tail: the newest committed change-log entries, kept in memory
// as written while watchers run on the change log, so that a watcher at
// the tail reads an entry without a storage iterator. Opening an iterator
// and seeking it in every level for each batch was the largest part of a
// tail watcher's reading (issue 17). A watcher whose next commit is not in
// the tail (it is further behind) reads the log from storage, as without
// it, and comes back to the tail once caught up.
//
// The tail holds what storage holds: a writer adds its batch's entry
// after the storage batch applied (under writeMu, so in commit order),
// and watchers read no further than the durable watermark, as from
// storage. Trimming the log drops the same entries from the tail.
//
// Writers pay nothing for it while no watcher runs on the log. While one
// does, the writer hands its entry's buffer over (Pebble copied the bytes
// into its batch) and takes back a buffer of an entry evicted earlier, so
// keeping an entry copies nothing.

// DefaultWatchTailBytes is the tail's default bound (Options.WatchTailBytes).
const DefaultWatchTailBytes = 32 << 20

// tailFree bounds the evicted buffers kept for writers to reuse.
const tailFree = 8

// logTail is the engine's tail of the change log. mu guards every field
// and the readers and evicted fields of its entries; an entry's bytes are
// immutable while it is in ents or a reader holds it.
//
// Invariant: ents holds consecutive commits, oldest first, totalling
// bytes ≤ max; it is empty while watchers is 0.
type logTail struct {
	mu       sync.Mutex
	max      int // bytes; 0: no tail
	watchers int // watches reading the log
	ents     []*tailEntry
	bytes    int
	free     [][]byte // buffers of evicted entries no reader holds
	// hits and misses count get's answers, for tests.
	hits, misses uint64
}

// tailEntry is one commit's log entry value.
type tailEntry struct {
	commit  uint64
	b       []byte
	readers int  // watches reading b
	evicted bool // no longer in ents: b is recycled once readers is 0
}

// join counts a watch reading the log in; the tail fills from the next
// commit on.
func (t *logTail) join() {
	t.mu.Lock()
	t.watchers++
	t.mu.Unlock()
}

// leave counts a watch out; with none left the tail is emptied.
func (t *logTail) leave() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.watchers--; t.watchers == 0 {
		t.evictLocked(len(t.ents))
		t.free = nil
	}
}

// add keeps b, the entry of commit c that was just applied, and returns
// the buffer the writer builds its next entry in: b itself when the tail
// does not keep it (no watcher, or larger than the bound), else an
// evicted entry's buffer, or a new one. Called under writeMu.
func (t *logTail) add(c uint64, b []byte) []byte {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.watchers == 0 || len(b) > t.max {
		return b
	}
	if n := len(t.ents); n > 0 && t.ents[n-1].commit+1 != c {
		t.evictLocked(n) // not the next commit: start again from c
	}
	drop := 0
	for drop < len(t.ents) && t.bytes+len(b) > t.max {
		t.bytes -= len(t.ents[drop].b)
		drop++
	}
	t.evictLocked(drop)
	t.ents = append(t.ents, &tailEntry{commit: c, b: b})
	t.bytes += len(b)
	if n := len(t.free); n > 0 {
		next := t.free[n-1]
		t.free = t.free[:n-1]
		return next[:0]
	}
	// Sized at once: grown by append, the entry would be copied again
	// and again.
	return make([]byte, 0, len(b))
}

// evictLocked drops the n oldest entries; bytes must already exclude them
// unless all are dropped.
func (t *logTail) evictLocked(n int) {
	for _, te := range t.ents[:n] {
		te.evicted = true
		if te.readers == 0 {
			t.recycleLocked(te)
		}
	}
	if n == len(t.ents) {
		t.bytes = 0
	}
	clear(t.ents[:n])
	t.ents = t.ents[n:]
}

func (t *logTail) recycleLocked(te *tailEntry) {
	if t.watchers > 0 && len(t.free) < tailFree && cap(te.b) <= maxKeptLogBuf {
		t.free = append(t.free, te.b)
	}
	te.b = nil
}

// get returns the entry of commit c, held until release, or nil when the
// tail does not have it.
func (t *logTail) get(c uint64) *tailEntry {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.ents) == 0 || c < t.ents[0].commit || c-t.ents[0].commit >= uint64(len(t.ents)) {
		t.misses++
		return nil
	}
	t.hits++
	te := t.ents[c-t.ents[0].commit]
	te.readers++
	return te
}

// release gives back an entry get returned.
func (t *logTail) release(te *tailEntry) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if te.readers--; te.readers == 0 && te.evicted {
		t.recycleLocked(te)
	}
}

// trimBefore drops the entries of commits before c: the log's trimming
// deleted them from storage.
func (t *logTail) trimBefore(c uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := 0
	for n < len(t.ents) && t.ents[n].commit < c {
		t.bytes -= len(t.ents[n].b)
		n++
	}
	t.evictLocked(n)
}

// tailBytes is the tail's bound for the option's value.
func tailBytes(opt int64) int {
	switch {
	case opt == 0:
		return DefaultWatchTailBytes
	case opt < 0:
		return 0
	}
	return int(min(opt, 1<<40))
}
