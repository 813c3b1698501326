package engine

import (
	"bytes"
	"errors"
	"hash/maphash"

	"google.golang.org/protobuf/types/known/anypb"

	"github.com/protobase/protobase/internal/apierror"
	"github.com/protobase/protobase/internal/record"
)

// phase1 is what phase 1 of a batch leaves for phase 2 (the records'
// keys and index entries in one arena) and the scratch it builds them
// with, which phase 2 uses again for a patched record's keys.
type phase1 struct {
	arena []byte
	preps []prep
	ixOff []span
	// Entry keys of indexes on repeated fields (multikey.go): mkeys are
	// their arena spans, which such an index's ixOff entry indexes.
	mkeys []span
	// prepArena, prepIx and prepMulti are the lengths of arena, ixOff and
	// mkeys phase 1 left: phase 2 appends the index keys of patched
	// records after them, and cuts back to them when it builds again.
	prepArena, prepIx, prepMulti int

	occ   []occurrence // where the key fields of the record being prepared lie
	mends []int32
	pkBuf []byte
	multi multiKeys
	// seen holds the hashes of the batch's keys (mark).
	seen map[uint64]struct{}
	seed maphash.Seed
	// Key ranges of the batch: when the store holds no key in
	// [min, max], no record key (or unique key) of the batch exists and
	// the per-record point reads are skipped.
	recMin, recMax   span
	uniqMin, uniqMax span
	hasUniq          bool
}

// prepare is phase 1: validate every record and encode its keys, then
// compile the batch's conditions. It reports whether the batch may write
// one key twice (then phase 2 keeps a batch-local overlay).
func (w *Writer) prepare(cat *catalog, op Op, recs []*anypb.Any) (dups bool, err error) {
	if dups, err = w.prepareRecords(cat, op, recs); err != nil {
		return false, err
	}
	return dups, w.compileConditions(cat)
}

// prepareRecords is phase 1 of the records alone, which touches nothing
// of the writer's but its phase1 (and its ops and batch for a patch): an
// Ahead runs it on another goroutine than the writer's.
func (w *Writer) prepareRecords(cat *catalog, op Op, recs []*anypb.Any) (dups bool, err error) {
	w.arena = w.arena[:0]
	w.preps = w.preps[:0]
	w.ixOff = w.ixOff[:0]
	w.mkeys = w.mkeys[:0]
	w.hasUniq = false
	clear(w.seen)
	patchedUnique := false
	for i, a := range recs {
		rop := w.opOf(op, i)
		d, err := w.prepareRecord(cat, rop, i, a)
		if err != nil {
			return false, err
		}
		dups = dups || d
		patchedUnique = patchedUnique || (rop == OpPatch && hasUnique(w.preps[i].t))
	}
	w.prepArena, w.prepIx, w.prepMulti = len(w.arena), len(w.ixOff), len(w.mkeys)
	// A patched record's unique values are known in phase 2 only: with
	// other records in the batch, the overlay shows them each other's.
	return dups || (patchedUnique && len(recs) > 1), nil
}

// prepareRecord validates record i and appends its record key and (unless
// op removes or patches) its index keys to the arena, all read in one walk
// over the record. It reports whether one of its keys was seen earlier in
// the batch.
func (w *Writer) prepareRecord(cat *catalog, op Op, i int, a *anypb.Any) (dups bool, err error) {
	if a == nil {
		return false, recordError(apierror.InvalidArgument, i, "", "", "record is null")
	}
	t := cat.lookup(a.TypeUrl)
	if t == nil {
		return false, recordError(apierror.InvalidArgument, i, a.TypeUrl, "",
			"unknown type URL "+quote(a.TypeUrl)+": no record type of that name in the schema")
	}
	if err := t.rec.Validate(a.Value); err != nil {
		var re *record.Error
		if errors.As(err, &re) {
			return false, recordError(apierror.InvalidArgument, i, a.TypeUrl, re.Field, re.Reason)
		}
		return false, recordError(apierror.InvalidArgument, i, a.TypeUrl, "", err.Error())
	}
	w.occ = t.keys.locate(a.Value, w.occ[:0])
	p := prep{t: t, val: a.Value, url: a.TypeUrl, ix: int32(len(w.ixOff)), op: op}
	if op == OpPatch {
		if p.patch, err = w.patchFor(i, t); err != nil {
			return false, err
		}
	}
	start := len(w.arena)
	w.arena = append(w.arena, t.prefix...)
	pkStart := len(w.arena)
	var field string
	if w.arena, field, err = t.keys.appendPK(w.arena, a.Value, w.occ); err != nil {
		return false, recordError(apierror.InvalidArgument, i, a.TypeUrl, field, err.Error())
	}
	p.key = span{int32(start), int32(len(w.arena))}
	p.pk = span{int32(pkStart), int32(len(w.arena))}
	if i == 0 {
		w.recMin, w.recMax = p.key, p.key
	} else {
		w.recMin, w.recMax = w.widen(w.recMin, w.recMax, p.key)
	}
	dups = w.mark(w.arena[start:])
	if op != OpRemove && op != OpPatch && op != opExpire {
		d, err := w.appendIndexKeys(i, &p, a.Value, true)
		if err != nil {
			return false, err
		}
		dups = dups || d
	}
	w.preps = append(w.preps, p)
	return dups, nil
}

// markUnique notes the unique index key that starts at arena offset s and
// runs to the arena's end: it widens the batch's unique-key range and
// reports whether the key was seen earlier in the batch.
func (w *Writer) markUnique(s int) bool {
	return w.markUniqueSpan(span{int32(s), int32(len(w.arena))})
}

// markUniqueSpan is markUnique for the key at k.
func (w *Writer) markUniqueSpan(k span) bool {
	if !w.hasUniq {
		w.uniqMin, w.uniqMax, w.hasUniq = k, k, true
	} else {
		w.uniqMin, w.uniqMax = w.widen(w.uniqMin, w.uniqMax, k)
	}
	return w.mark(w.bytes(k))
}

// widen extends [lo, hi] to cover k.
func (w *Writer) widen(lo, hi, k span) (span, span) {
	kb := w.bytes(k)
	if bytes.Compare(kb, w.bytes(lo)) < 0 {
		lo = k
	}
	if bytes.Compare(kb, w.bytes(hi)) > 0 {
		hi = k
	}
	return lo, hi
}

// mark records a key's hash and reports whether it was seen before in the
// batch. A hash collision only costs the overlay's slower path.
func (w *Writer) mark(k []byte) bool {
	h := maphash.Bytes(w.seed, k)
	if _, ok := w.seen[h]; ok {
		return true
	}
	w.seen[h] = struct{}{}
	return false
}
