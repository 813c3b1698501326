package engine

import (
	"errors"
	"slices"
	"strings"

	"github.com/protobase/protobase/internal/apierror"
	"github.com/protobase/protobase/internal/record"
)

// Patches and per-record operations.
//
// A batch's records share its Op unless Batch.Ops gives each its own. A
// batch whose Ops all agree runs as a batch of that Op, with its fast
// paths; a mixed batch runs with op 0, each prep carrying its record's
// operation, and without the paths that need one operation throughout (the
// batch probe, grouped writes).
//
// A patched record (OpPatch) is validated and its primary key encoded in
// phase 1, like a remove: its index keys depend on the stored record,
// which phase 2 reads as the batch has left it (under the write lock, and
// on a shared store as a precondition of the batch). Phase 2 then applies
// the patch on the wire bytes (record.Patch), encodes the patched
// record's index keys, and goes on as for an update of the patched record:
// unique checks, retracting the old entries, putting the new ones, and
// logging an update carrying the whole new record.
//
// Phase 1 cannot know a patched record's unique values, so it cannot tell
// whether another record of the batch takes one of them: a batch with a
// patched record of a type with a unique index and any other record keeps
// the batch-local overlay (dups), which makes every earlier write of the
// batch visible to the checks of the records after it.

// resolveOps reads the batch's operations: the operation of every record
// when they agree (b.Op, or the one Ops names throughout), else 0, with
// each record's in w.ops (0 for an unknown one). checkOps refuses what is
// wrong with them.
func (w *Writer) resolveOps(b Batch) Op {
	w.ops = w.ops[:0]
	if len(b.Ops) == 0 {
		return b.Op
	}
	same := len(b.Ops) == len(b.Records)
	for _, o := range b.Ops {
		op, _ := OpFromProto(o)
		w.ops = append(w.ops, op)
		same = same && op != 0 && op == w.ops[0]
	}
	if same {
		op := w.ops[0]
		w.ops = w.ops[:0]
		return op
	}
	return 0
}

// checkOps refuses an unknown operation, Ops of another length than the
// records, and a patch (fields, add) in a batch that patches no record.
func (w *Writer) checkOps(op Op, records int) error {
	patch := len(w.batch.Fields) > 0 || len(w.batch.Add) > 0
	if len(w.ops) == 0 {
		if op == 0 && records == 0 && !patch {
			return nil // a check of the batch's conditions names no operation
		}
		if op < OpInsert || op > opExpire {
			return &apierror.Error{Code: apierror.InvalidArgument, Msg: "unknown write operation"}
		}
		if op != OpPatch && patch {
			return &apierror.Error{Code: apierror.InvalidArgument, Msg: "fields and add are a patch's: the batch's operation is " + op.String()}
		}
		return nil
	}
	if len(w.ops) != records {
		return &apierror.Error{Code: apierror.InvalidArgument,
			Msg: "ops names " + itoa(len(w.ops)) + " operations for " + itoa(records) + " records: give one per record, or none"}
	}
	patched := false
	for i, o := range w.ops {
		if o == 0 {
			return recordError(apierror.InvalidArgument, i, "", "", "unknown write operation "+w.batch.Ops[i].String())
		}
		patched = patched || o == OpPatch
	}
	if patch && !patched {
		return &apierror.Error{Code: apierror.InvalidArgument, Msg: "fields and add are a patch's: no record of the batch is patched"}
	}
	return nil
}

// opOf returns record i's operation in a batch whose operation is op.
func (w *Writer) opOf(op Op, i int) Op {
	if len(w.ops) > 0 {
		return w.ops[i]
	}
	return op
}

// count adds an applied batch to the engine's counters by operation: a
// mixed batch (op 0) counts once under each operation it holds.
func (w *Writer) count(op Op, records int) {
	st := &w.e.stats
	if op == opExpire {
		return // the reaper counts what it deleted (Stats.Expired)
	}
	if op != 0 {
		st.OpBatches[op].Add(1)
		st.OpRecords[op].Add(uint64(records))
		return
	}
	var seen [OpPatch + 1]bool
	for _, o := range w.ops {
		st.OpRecords[o].Add(1)
		if !seen[o] {
			seen[o] = true
			st.OpBatches[o].Add(1)
		}
	}
}

// patchCache keeps the patches compiled for a writer's batches, one per
// record type, while the batches name the same fields and add.
type patchCache struct {
	fields, add []string
	types       []*recType
	patches     []*record.Patch
}

// maxCachedPatches bounds the types a writer keeps a patch for; a schema
// change makes new types, so old ones only linger until the bound.
const maxCachedPatches = 16

// patchFor returns the batch's patch compiled for record type t: record
// i's error when the patch does not fit the type.
func (w *Writer) patchFor(i int, t *recType) (*record.Patch, error) {
	c := &w.patches
	b := &w.batch
	if !slices.Equal(c.fields, b.Fields) || !slices.Equal(c.add, b.Add) || len(c.types) >= maxCachedPatches {
		*c = patchCache{fields: slices.Clone(b.Fields), add: slices.Clone(b.Add)}
	}
	if j := slices.Index(c.types, t); j >= 0 {
		return c.patches[j], nil
	}
	key := make([]string, len(t.rt.PrimaryKey))
	for j, kf := range t.rt.PrimaryKey {
		key[j] = kf.Path
	}
	p, err := t.rec.CompilePatch(b.Fields, b.Add, key)
	if err != nil {
		var pe *record.PatchError
		if errors.As(err, &pe) {
			return nil, recordError(apierror.InvalidArgument, i, t.url, pe.Field, pe.Reason)
		}
		return nil, recordError(apierror.InvalidArgument, i, t.url, "", err.Error())
	}
	c.types = append(c.types, t)
	c.patches = append(c.patches, p)
	return p, nil
}

// hasUnique reports whether t maintains a unique index.
func hasUnique(t *recType) bool {
	for _, ix := range t.indexes {
		if ix.ix.Unique {
			return true
		}
	}
	return false
}

// maxKeptPatched bounds the buffer of patched records a writer keeps
// between batches: past it, the buffer is a copy of records that an idle
// stream should not hold outside the write budget.
const maxKeptPatched = 1 << 20

// patchRecord is phase 2 of patched record i: it applies the patch to old,
// the stored record as the batch has left it, and appends the patched
// record's index keys to the arena. The patched bytes go to w.patched,
// which only grows during a build, so earlier records' stay valid.
func (w *Writer) patchRecord(i int, p *prep, old []byte) error {
	start := len(w.patched)
	out, err := p.patch.Apply(w.patched, old, p.val)
	if err != nil {
		return patchApplyError(i, p, err)
	}
	w.patched = out
	p.out = out[start:]
	if err := w.checkPatchedSize(i, p); err != nil {
		return err
	}
	p.ix = int32(len(w.ixOff))
	w.occ = p.t.keys.locate(p.out, w.occ[:0])
	_, err = w.appendIndexKeys(i, p, p.out, false)
	return err
}

// defaultMaxPatched is the bound of checkPatchedSize when the engine is
// not told the transports' message limit.
const defaultMaxPatched = 64 << 20

// checkPatchedSize bounds what patches make: a patched record larger than
// the largest message the server takes could never be read back (a read
// answers it whole), and the patched records of one batch, built under the
// write lock before the write budget counts them, may not exceed that
// size together, so a batch of small patches of large records cannot hold
// memory past the budget's bound.
func (w *Writer) checkPatchedSize(i int, p *prep) error {
	limit := w.e.opts.MaxMessageBytes
	if limit <= 0 {
		limit = defaultMaxPatched
	}
	if n := len(p.out) + len(p.url); n > limit {
		return recordError(apierror.ResourceExhausted, i, p.url, "",
			"the patched record would hold "+itoa(n)+" bytes, more than the largest message of "+itoa(limit)+" bytes: it could not be read back")
	}
	if n := len(w.patched); n > limit {
		return recordError(apierror.ResourceExhausted, i, p.url, "",
			"the batch's patched records come to more than "+itoa(limit)+" bytes (the largest message): send fewer patches per batch")
	}
	return nil
}

// patchApplyError names what failed when a patch met a stored record: an
// add that overflows (OUT_OF_RANGE), a required field the record would
// clear (INVALID_ARGUMENT), a stored record that does not parse (INTERNAL).
func patchApplyError(i int, p *prep, err error) error {
	var pe *record.PatchError
	if errors.As(err, &pe) {
		code := apierror.InvalidArgument
		if pe.Overflow {
			code = apierror.OutOfRange
		}
		return recordError(code, i, p.url, pe.Field, pe.Reason)
	}
	return &apierror.Error{Code: apierror.Internal, Msg: "stored record of " + p.url + " unreadable: " + err.Error(), Err: err}
}

// appendIndexKeys appends the keys of p's record in each index of its
// type to the arena, read from val (w.occ locating its key fields), and
// notes them in p's ixOff entries (an index on a repeated field: see
// appendMultiKeys). With mark, it reports whether a unique
// key was seen earlier in the batch.
func (w *Writer) appendIndexKeys(i int, p *prep, val []byte, mark bool) (dups bool, err error) {
	t := p.t
	var field string
	for j, ix := range t.indexes {
		if t.keys.multi[j] >= 0 {
			d, err := w.appendMultiKeys(i, p, val, j, mark)
			if err != nil {
				return false, err
			}
			dups = dups || d
			continue
		}
		s := len(w.arena)
		if ix.ix.Unique {
			skip, err := t.keys.absent(val, w.occ, j)
			if err != nil {
				return false, recordError(apierror.InvalidArgument, i, p.url, strings.Join(indexFields(ix), ","), err.Error())
			}
			if skip { // no entry: an empty span
				w.ixOff = append(w.ixOff, span{int32(s), int32(s)})
				continue
			}
		}
		w.arena = append(w.arena, ix.prefix...)
		if w.arena, field, err = t.keys.appendIndex(w.arena, val, w.occ, j); err != nil {
			return false, recordError(apierror.InvalidArgument, i, p.url, field, err.Error())
		}
		if !ix.ix.Unique {
			w.arena = append(w.arena, w.arena[p.pk.s:p.pk.e]...)
		} else if mark {
			dups = w.markUnique(s) || dups
		}
		w.ixOff = append(w.ixOff, span{int32(s), int32(len(w.arena))})
	}
	return dups, nil
}
