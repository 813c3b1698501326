package pebble

// Index batches held back and applied together. Every batch of an indexed
// ingest writes about one operand per group of its entries (groups.go) to
// the index instance's memtable, and a memtable insert is a search
// through a skiplist that holds every operand of every batch since the
// last flush: at a few million records, 1.6 µs an operand, most of it
// memory misses. Consecutive batches of one ingest mostly write the same
// groups (the same tags, the same high bytes of rising keys), so a batch
// whose index writes are large (Options.AsyncIndexBytes) is held instead:
// its main batch, which carries its index writes in its journal entry, is
// applied and durable as any, and its index writes wait beside those
// of the batches after it until they reach Options.IndexHoldBytes. They
// are then applied as one batch, each key written once: a group's
// operands merged into one (by the instance's merger, as Pebble would),
// any other key's last write kept.
//
// No read sees the index instance behind the main one: every read of it
// settles first (settle, rlockSettled), applying what is held, and so do
// a flush of the index instance (whose flush must cover every batch below
// the journal number it trims to) and Close. A crash loses the held
// writes from memory only: their journal entries are in the main
// instance, and Open applies them. Writes that fail to apply stay held
// (stuck): reads then go on without them, and the store refuses batches
// until they apply (applyIndex).

import (
	"errors"
	"fmt"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/batchrepr"
)

// defaultIndexHoldBytes is Options.IndexHoldBytes when it is 0: about
// five batches of 1,000 records of ten tags. A read that arrives while
// they are held applies them first, a millisecond or two.
const defaultIndexHoldBytes = 256 << 10

// heldIndex is what an indexInstance holds back: the encodings of index
// batches, in journal order, back to back in reprs. Guarded by applyMu
// (exclusive), but for the indexInstance's behind flag.
type heldIndex struct {
	reprs []byte
	ends  []int
	// combine's scratch, kept between applies.
	at   map[string]int32
	ops  []heldOp
	vals []heldVal
}

// heldOp is one key's writes among the held batches: its kind and its
// value (a set's last) or operands (a merge's, oldest first, chained by
// heldVal.next from val to last).
type heldOp struct {
	kind      pebble.InternalKeyKind
	key       []byte
	val, last int32 // in vals
}

// heldVal is a value written, and the next operand of the same key (-1:
// none).
type heldVal struct {
	b    []byte
	next int32
}

// hold keeps repr, the encoding of an index batch applied to the main
// instance, to be applied with those after it. The caller holds applyMu.
func (ix *indexInstance) hold(repr []byte) {
	h := &ix.held
	h.reprs = append(h.reprs, repr...)
	h.ends = append(h.ends, len(h.reprs))
	ix.behind.Store(true)
}

// applyHeld applies the held batches to the index instance, as one batch
// when they hold only sets, deletions and group operands, else one by
// one. On an error they stay held and the instance is stuck: the next
// batch tries again first, and is refused if they still fail (applyIndex);
// reads do not wait for them meanwhile. The caller holds applyMu
// exclusively.
func (ix *indexInstance) applyHeld() error {
	h := &ix.held
	if len(h.ends) == 0 {
		return nil
	}
	err := ix.applyCombined()
	if errors.Is(err, errCannotCombine) {
		err = ix.applyEach()
	}
	if err != nil {
		ix.stuck.Store(true)
		return err
	}
	h.reprs, h.ends = h.reprs[:0], h.ends[:0]
	if cap(h.reprs) > 4*ix.holdBytes {
		// One batch's index writes can be far larger than what is
		// usually held: its buffers are not kept.
		*h = heldIndex{}
	}
	ix.behind.Store(false)
	ix.stuck.Store(false)
	return nil
}

// errCannotCombine: the held batches write something combine does not
// merge (a range deletion, a key both set and merged).
var errCannotCombine = errors.New("store: held index batches cannot be combined")

// applyEach applies the held batches one by one, in order.
func (ix *indexInstance) applyEach() error {
	start := 0
	for _, end := range ix.held.ends {
		b := ix.db.NewBatch()
		// SetRepr takes the bytes as they are: a copy, since Apply writes
		// the batch's sequence number into them.
		err := b.SetRepr(append([]byte(nil), ix.held.reprs[start:end]...))
		if err == nil {
			err = ix.apply(b)
		}
		_ = b.Close()
		if err != nil {
			return err
		}
		start = end
	}
	return nil
}

// applyCombined applies the held batches as one, each key written once.
func (ix *indexInstance) applyCombined() error {
	h := &ix.held
	if err := h.combine(ix.grouped); err != nil {
		return err
	}
	b := ix.db.NewBatch()
	defer func() { _ = b.Close() }()
	for i := range h.ops {
		o := &h.ops[i]
		switch o.kind {
		case pebble.InternalKeyKindSet:
			_ = b.Set(o.key, h.vals[o.val].b, nil)
		case pebble.InternalKeyKindDelete:
			_ = b.Delete(o.key, nil)
		default:
			if err := h.merge(b, o); err != nil {
				return err
			}
		}
	}
	return ix.apply(b)
}

// combine collects the held batches' writes by key, in the order keys
// first come. grouped says the instance's merges are group operands.
func (h *heldIndex) combine(grouped bool) error {
	if h.at == nil {
		h.at = make(map[string]int32)
	}
	clear(h.at)
	h.ops, h.vals = h.ops[:0], h.vals[:0]
	start := 0
	for _, end := range h.ends {
		r := batchrepr.Read(h.reprs[start:end])
		start = end
		for {
			kind, key, val, ok, err := r.Next()
			if err != nil {
				return fmt.Errorf("store: read a held index batch: %w", err)
			}
			if !ok {
				break
			}
			if err := h.add(kind, key, val, grouped); err != nil {
				return err
			}
		}
	}
	return nil
}

// add notes one write of the held batches.
func (h *heldIndex) add(kind pebble.InternalKeyKind, key, val []byte, grouped bool) error {
	switch kind {
	case pebble.InternalKeyKindSet, pebble.InternalKeyKindDelete:
	case pebble.InternalKeyKindMerge:
		if !grouped || checkGroup(val) != nil {
			return errCannotCombine
		}
	default:
		return errCannotCombine
	}
	v := int32(len(h.vals)) //nolint:gosec // bounded by the held bytes
	h.vals = append(h.vals, heldVal{b: val, next: -1})
	i, seen := h.at[string(key)]
	if !seen {
		h.at[string(key)] = int32(len(h.ops)) //nolint:gosec // bounded by the held bytes
		h.ops = append(h.ops, heldOp{kind: kind, key: key, val: v, last: v})
		return nil
	}
	o := &h.ops[i]
	if (o.kind == pebble.InternalKeyKindMerge) != (kind == pebble.InternalKeyKindMerge) {
		return errCannotCombine
	}
	if kind != pebble.InternalKeyKindMerge {
		o.kind, o.val = kind, v // the last write of a key wins
		return nil
	}
	h.vals[o.last].next, o.last = v, v
	return nil
}

// merge writes o's operands to b as one: merged by the instance's own
// merger, oldest first, without the group's oldest operand (so removals
// are kept, as Pebble keeps them when it merges part of a key's operands).
func (h *heldIndex) merge(b *pebble.Batch, o *heldOp) error {
	if o.val == o.last {
		return b.Merge(o.key, h.vals[o.val].b, nil)
	}
	m, err := groupMerger.Merge(o.key, h.vals[o.val].b)
	for v := h.vals[o.val].next; err == nil && v >= 0; v = h.vals[v].next {
		err = m.MergeNewer(h.vals[v].b)
	}
	if err != nil {
		return err
	}
	v, closer, err := m.Finish(false)
	if err != nil {
		return err
	}
	err = b.Merge(o.key, v, nil) // the batch copies v
	return errors.Join(err, closer.Close())
}

// settle makes the index instance whole before a read of it: it applies
// the batches held back, and waits for an index batch being applied on a
// goroutine of its own (applyIndex).
func (ix *indexInstance) settle() {
	if ix.behind.Load() && !ix.stuck.Load() {
		ix.applyMu.Lock()
		_ = ix.applyHeld() // on failure stuck: the next batch tries again, and reports it
		ix.applyMu.Unlock()
		return
	}
	// Also waits out a small batch between its main instance and the
	// index instance, so that a read that saw its records sees its
	// entries.
	ix.applyMu.RLock()
	ix.applyMu.RUnlock() //nolint:staticcheck // an empty critical section: waiting is the point
}

// rlockSettled takes applyMu shared with nothing held back, so that views
// of both instances opened under it see the same batches. Held batches
// that fail to apply (stuck) are left: the view then lacks them, as the
// index instance lacks a batch whose apply failed.
func (ix *indexInstance) rlockSettled() {
	for {
		ix.applyMu.RLock()
		if !ix.behind.Load() || ix.stuck.Load() {
			return
		}
		ix.applyMu.RUnlock()
		ix.settle()
	}
}
