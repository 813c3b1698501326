package engine

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/protobase/protobase/internal/keyspace"
	"github.com/protobase/protobase/internal/store"
)

// The change log (Pebble, or any store that is not Shared). Every write
// batch that commits a sequence number also writes one log entry under
// keyspace.LogPrefix, in the same storage batch, so a batch and its
// changes become visible and durable together. Watch reads the log; it
// never sees a fan-out of batches in memory.
//
// Entry value (logVersion 1):
//
//	version(1) | unix time ns (8 BE) | log bytes written before it (8 BE) |
//	per change: op(1) | type id (uvarint) | new record (uvarint length, bytes) |
//	            old record (uvarint length, bytes)
//
// op is what happened to the key (changeInsert, changeUpdate, changeRemove):
// an upsert is logged as the insert or update it turned out to be. A
// remove has no new record, an insert no old one. The primary key is not
// stored: the record (the old one for a remove) holds it.
//
// An entry larger than logPartBytes is stored in parts (watchparts.go):
// under the commit's key a header (logVersionParts) naming the entry's
// time, the log bytes before it, its changes' bytes and its parts, and
// under the part keys (keyspace.AppendLogPartKey) the changes' bytes cut
// into pieces of logPartBytes, where a change may straddle two parts. No
// stored value is then larger than logPartBytes: Pebble keeps a value in
// one block, and reading a damaged block costs Pebble a search for a
// flipped bit that grows with the block (about 3 s for 256 KiB on a
// current core, a quarter of an hour for 80 MB), which no context stops.
// Smaller entries keep the one-value form, so a batch under the bound
// writes and reads exactly as before.
//
// The time is the log's clock (logClock), which never goes back. It is
// what trimming by age reads.
//
// Invariant: the log holds one contiguous run of commits ending at the
// last commit (or nothing). Open drops entries left before a gap (the log
// was off for a while), and trimming deletes a prefix.

const (
	logVersion    = 1
	logHeaderSize = 1 + 8 + 8
)

// logPartBytes bounds every stored value of the log; see above.
const logPartBytes = 256 << 10

// The change ops of the log; their values are the API's ChangeOp numbers.
const (
	changeInsert byte = 1
	changeUpdate byte = 2
	changeRemove byte = 3
)

// errLogEntry reports an entry this version cannot read.
var errLogEntry = errors.New("change log entry is malformed")

// logEntry reads the changes of one entry, in order.
type logEntry struct {
	at    int64  // unix ns of the commit
	cum   uint64 // log bytes written before the entry
	size  int    // the changes' bytes
	rest  []byte // the changes' bytes not yet read (of those at hand)
	index uint32 // of the next change
	// parts reads the rest of an entry stored in parts (watchparts.go);
	// nil when rest holds all of it.
	parts *logParts
}

// parseLogEntry reads an entry held in one value (logVersion), as stored
// or as the writer built it.
func parseLogEntry(v []byte) (logEntry, error) {
	if len(v) < logHeaderSize || v[0] != logVersion {
		return logEntry{}, errLogEntry
	}
	return logEntry{
		at:   int64(binary.BigEndian.Uint64(v[1:9])),
		cum:  binary.BigEndian.Uint64(v[9:17]),
		size: len(v) - logHeaderSize,
		rest: v[logHeaderSize:],
	}, nil
}

// logChange is one change of an entry; its slices alias the entry.
type logChange struct {
	op       byte
	typeID   uint32
	rec, old []byte
	index    uint32
}

// next reads the next change into c; ok is false at the end. Filling the
// caller's change, not returning one, saves copying it. A change whose
// type id and lengths are each one byte (records under 128 bytes) is read
// here, without a call: reading every change through protowire was a
// fifth of the engine's work per watched change (issue 17). Anything else
// goes to nextSlow, which reads every change the same (FuzzLogEntry).
func (le *logEntry) next(c *logChange) (ok bool, err error) {
	b := le.rest
	if len(b) >= 4 && b[1] < 0x80 && b[2] < 0x80 && b[0]-changeInsert <= changeRemove-changeInsert {
		r := 3 + int(b[2])
		if r < len(b) && b[r] < 0x80 {
			if end := r + 1 + int(b[r]); end <= len(b) {
				*c = logChange{op: b[0], typeID: uint32(b[1]), rec: b[3:r], old: b[r+1 : end], index: le.index}
				le.rest = b[end:]
				le.index++
				return true, nil
			}
		}
	}
	return le.nextSlow(c)
}

// nextSlow is next for any change, through protowire. A change that
// does not end in the bytes at hand continues in the entry's next part.
func (le *logEntry) nextSlow(c *logChange) (ok bool, err error) {
	for {
		if ok, err = le.read(c); err == nil || !le.parts.more() {
			if le.parts != nil {
				le.parts.reserved = false
			}
			return ok, err
		}
		if err := le.refill(); err != nil {
			return false, err
		}
	}
}

// read reads the next change from the bytes at hand; errLogEntry when
// they do not hold a whole one (or are malformed), without consuming
// them.
func (le *logEntry) read(c *logChange) (ok bool, err error) {
	if len(le.rest) == 0 {
		if le.parts.more() {
			return false, errLogEntry
		}
		return false, nil
	}
	b := le.rest
	c.op, b = b[0], b[1:]
	id, n := protowire.ConsumeVarint(b)
	if n < 0 || id > 1<<32-1 || c.op < changeInsert || c.op > changeRemove {
		return false, errLogEntry
	}
	c.typeID, b = uint32(id), b[n:]
	if c.rec, n = protowire.ConsumeBytes(b); n < 0 {
		return false, errLogEntry
	}
	b = b[n:]
	if c.old, n = protowire.ConsumeBytes(b); n < 0 {
		return false, errLogEntry
	}
	le.rest = b[n:]
	c.index = le.index
	le.index++
	return true, nil
}

// appendLogHeader starts an entry; the writer fills time and size later.
func appendLogHeader(dst []byte) []byte {
	var h [logHeaderSize]byte
	h[0] = logVersion
	return append(dst, h[:]...)
}

func appendLogChange(dst []byte, op byte, typeID uint32, rec, old []byte) []byte {
	dst = append(dst, op)
	dst = protowire.AppendVarint(dst, uint64(typeID))
	dst = protowire.AppendBytes(dst, rec)
	return protowire.AppendBytes(dst, old)
}

// watermark is the last commit known durable, with a broadcast to the
// watchers waiting for it to move: ch is closed and replaced on every
// advance. mu guards ch and serializes advances; n is read without it.
type watermark struct {
	n  atomic.Uint64
	mu sync.Mutex
	ch chan struct{}
}

func newWatermark(n uint64) *watermark {
	w := &watermark{ch: make(chan struct{})}
	w.n.Store(n)
	return w
}

// advance raises the watermark to n (never lowers it) and wakes watchers.
func (w *watermark) advance(n uint64) {
	if n <= w.n.Load() {
		return
	}
	w.mu.Lock()
	if n > w.n.Load() {
		w.n.Store(n)
		close(w.ch)
		w.ch = make(chan struct{})
	}
	w.mu.Unlock()
}

// load returns the watermark and a channel closed when it next moves.
func (w *watermark) load() (uint64, <-chan struct{}) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.n.Load(), w.ch
}

var (
	logStart = []byte(keyspace.LogPrefix)
	logEnd   = keyspace.PrefixEnd([]byte(keyspace.LogPrefix))
)

// openLog makes the log one contiguous run ending at the last commit, as
// the invariant says: with the log off every entry goes, and with it on
// the entries go when the last one is not the last commit (the log was off
// for a while, so they end before a gap). It sets logBytes from the last
// entry kept, and starts the log's clock no earlier than its time. Called
// by Open, before any writer.
func (e *Engine) openLog() error {
	it, err := e.st.NewIterator(logStart, logEnd)
	if err != nil {
		return fmt.Errorf("open change log: %w", err)
	}
	last, h, found, err := lastLogEntry(it)
	if cerr := it.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("open change log: %w", err)
	}
	if !found {
		return nil
	}
	if e.logOn && last == e.seq {
		e.logBytes = h.cum + h.stored
		e.clock.startAt(h.at)
		return nil
	}
	b := e.st.NewWriteBatch()
	defer b.Close()
	b.DeleteRange(logStart, logEnd)
	if err := e.st.ApplyBatch(b); err != nil {
		return fmt.Errorf("drop change log: %w", err)
	}
	return b.Wait()
}

// lastLogEntry returns the commit of the log's last entry and what its
// header says (zero when it does not read: the log is then dropped or
// trimmed whole as if it held nothing, not refused).
func lastLogEntry(it store.Iterator) (c uint64, h logHead, found bool, err error) {
	if !it.Last() {
		return 0, logHead{}, false, it.Error()
	}
	c, part, ok := entryCommit(it.Key())
	if ok && part && !it.SeekGE(keyspace.AppendLogKey(nil, c)) {
		ok = false
	}
	if ok {
		h, _ = readLogHead(it.Key(), it.Value())
	}
	return c, h, true, it.Error()
}

// logChange appends the change that record p made to the batch's log
// entry: old is the record it replaced or removed (found), as the batch
// left it.
func (w *Writer) logChange(op Op, p *prep, old []byte, found bool) {
	c := changeInsert
	switch {
	case op == OpRemove:
		w.logBuf = appendLogChange(w.logBuf, changeRemove, p.t.rt.ID, nil, old)
		return
	case found:
		c = changeUpdate
	default:
		old = nil
	}
	w.logBuf = appendLogChange(w.logBuf, c, p.t.rt.ID, p.val, old)
}

// sizedLogBuf returns the writer's log buffer emptied, with room for the
// batch's new records and their changes' framing. Grown by append, an
// entry larger than the buffer kept between batches (maxKeptLogBuf) was
// copied and cleared once per doubling: 4.8 % of the process's CPU in a
// profile of 10,000-record batches, 0.9 % sized at once. The old records
// of updates and removes are not known yet; they grow it once more at
// most.
func (w *Writer) sizedLogBuf() []byte {
	n := logHeaderSize
	for i := range w.preps {
		n += len(w.preps[i].val) + logChangeFraming
	}
	if cap(w.logBuf) < n {
		return make([]byte, 0, n)
	}
	return w.logBuf[:0]
}

// logChangeFraming bounds a change's bytes besides its records: the op,
// the type id's varint and two length varints of up to 3 bytes (records
// under 2 MiB; longer ones only make the estimate short).
const logChangeFraming = 1 + 5 + 3 + 3

// putLog completes the batch's entry and adds it to b, under writeMu,
// once the batch's commit sequence is known: as one value, or in parts
// when larger than logPartBytes. logStored is then what it adds to the
// log.
func (w *Writer) putLog(b store.WriteBatch, seq uint64) {
	e := w.e
	binary.BigEndian.PutUint64(w.logBuf[1:9], uint64(e.clock.now()))
	binary.BigEndian.PutUint64(w.logBuf[9:17], e.logBytes)
	w.logKey = keyspace.AppendLogKey(w.logKey[:0], seq)
	if len(w.logBuf) > logPartBytes {
		w.putLogParts(b, seq)
		return
	}
	b.Set(w.logKey, w.logBuf)
	w.logStored = uint64(len(w.logKey) + len(w.logBuf))
}

// trimLoop trims the log every interval until Close.
func (e *Engine) trimLoop(interval time.Duration) {
	defer e.bg.Done()
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-e.bgCtx.Done():
			return
		case <-t.C:
			if err := e.TrimLog(); err != nil {
				e.log.Warn("change log trim failed", "err", err)
			}
		}
	}
}

// TrimLog deletes the log entries older than the retention on the log's
// clock or beyond the retention bytes, with one DeleteRange. The trimming
// goroutine calls it; tests call it to trim at a time of their choosing.
func (e *Engine) TrimLog() error {
	if !e.logOn {
		return nil
	}
	it, err := e.st.NewIterator(logStart, logEnd)
	if err != nil {
		return fmt.Errorf("trim change log: %w", err)
	}
	cut, err := e.trimPoint(it, e.clock.now())
	if cerr := it.Close(); err == nil {
		err = cerr
	}
	if err != nil || cut == nil {
		return err
	}
	b := e.st.NewWriteBatch()
	defer b.Close()
	b.DeleteRange(logStart, cut)
	if err := e.st.ApplyBatch(b); err != nil {
		return fmt.Errorf("trim change log: %w", err)
	}
	keep := uint64(math.MaxUint64) // cut is logEnd: nothing is kept
	if c, ok := logCommit(cut); ok {
		keep = c
	}
	e.tail.trimBefore(keep)
	return nil
}

// trimPoint returns the key of the first entry to keep at the log's time
// now (logEnd when none is), or nil when nothing is to be trimmed. It
// reads the entries' headers only, stepping over their parts.
func (e *Engine) trimPoint(it store.Iterator, now int64) ([]byte, error) {
	_, last, found, err := lastLogEntry(it)
	if err != nil || !found {
		return nil, err
	}
	total := last.cum + last.stored
	oldest := now - int64(e.opts.WatchRetention)
	var lowCum uint64
	if rb := uint64(e.opts.WatchRetentionBytes); rb > 0 && total > rb {
		lowCum = total - rb
	}
	first := true
	for ok := it.First(); ok; first = false {
		c, part, _ := entryCommit(it.Key())
		if !part {
			h, err := readLogHead(it.Key(), it.Value())
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
		ok = it.SeekGE(keyspace.AppendLogKey(nil, c+1))
	}
	if err := it.Error(); err != nil {
		return nil, err
	}
	return logEnd, nil
}

// syncLog makes every applied batch durable and raises the watermark to
// it. Watchers call it when a batch stays applied but not known durable
// for watchSyncDelay: its writer has not waited for its sync (a Write
// stream that asked for no acknowledgement and has gone quiet), and
// without this the batch would reach watchers only when some writer next
// waits. It writes the commit sequence again, unchanged, with a sync: the
// WAL is synced in order, so every batch before it is durable too.
func (e *Engine) syncLog() error {
	e.syncMu.Lock()
	defer e.syncMu.Unlock()
	b := e.st.NewWriteBatch()
	defer b.Close()
	var v [8]byte
	e.writeMu.Lock()
	seq := e.seq
	if seq <= e.durable.n.Load() {
		e.writeMu.Unlock()
		return nil
	}
	binary.BigEndian.PutUint64(v[:], seq)
	b.Set(keySeq, v[:])
	err := e.st.ApplyBatch(b)
	e.writeMu.Unlock()
	if err == nil {
		err = b.Wait()
	}
	if err != nil {
		return fmt.Errorf("sync the change log: %w", err)
	}
	e.durable.advance(seq)
	return nil
}

// StopWatches ends every Watch call, now and later, with UNAVAILABLE: a
// server shutting down calls it first, as watches never end on their own
// and would hold up a graceful stop.
func (e *Engine) StopWatches() {
	e.watchStopOnce.Do(func() { close(e.watchStop) })
}
