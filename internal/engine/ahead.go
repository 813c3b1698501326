package engine

import "google.golang.org/protobuf/types/known/anypb"

// Ahead is phase 1 of a write stream's next batch (checking its records
// and reading their keys and index entries) done ahead of its Apply, on
// the goroutine that received the batch, while the stream's Writer
// applies the batch before it. On an indexed type that phase is half the
// writer's work on a record (an index on a repeated field reads ten
// entry keys from it); done ahead, it overlaps the commit of the batch
// before instead of following it.
//
// A transport keeps one Ahead per request buffer it reads into, calls
// Prepare once the request is decoded, and passes it in Batch.Ahead.
// Apply takes what Prepare left when it still holds: the same records,
// prepared against the catalog that is still current. Otherwise (a schema
// change in between, a record Prepare refused, a batch Prepare does not
// take) Apply prepares the batch itself, as without an Ahead, so that
// results and errors do not depend on it.
//
// An Ahead is not safe for concurrent use: Prepare must not run while an
// Apply holds it.
type Ahead struct {
	e *Engine
	// w is a writer used for phase 1 alone, made at the first batch
	// Prepare takes: Apply swaps its phase1 with its own, so each batch's
	// arena goes back and forth without a copy.
	w    *Writer
	recs []*anypb.Any
	op   Op
	cat  *catalog
	dups bool
	ok   bool // phase 1 of recs succeeded
	// taken counts the Applies that took phase 1 from it (for tests).
	taken int
}

// NewAhead returns an Ahead for writers of e.
func (e *Engine) NewAhead() *Ahead { return &Ahead{e: e} }

// Prepare runs phase 1 of b's records against the current catalog. It
// takes batches of inserts, upserts, updates and removes given as Op;
// for any other (a patch, per-record Ops) it does nothing.
func (a *Ahead) Prepare(b Batch) {
	a.Forget()
	e := a.e
	switch {
	case len(b.Records) == 0 || len(b.Ops) > 0 || len(b.Fields) > 0 || len(b.Add) > 0:
		return
	case b.Op != OpInsert && b.Op != OpUpsert && b.Op != OpUpdate && b.Op != OpRemove:
		return
	case len(b.Records) > e.opts.MaxRecordsPerBatch || e.closed.Load():
		return
	}
	if a.w == nil {
		a.w = e.NewWriter()
	}
	cat := e.cat.Load()
	dups, err := a.w.prepareRecords(cat, b.Op, b.Records)
	if err != nil {
		clear(a.w.preps)
		return
	}
	a.recs, a.op, a.cat, a.dups, a.ok = b.Records, b.Op, cat, dups, true
}

// Forget drops the references to the records Prepare last took, so that
// an Ahead kept for the next request does not hold them alive, and the
// scratch of a batch past maxKeptArena, which an idle stream should not
// hold outside the write budget.
func (a *Ahead) Forget() {
	if a.w == nil {
		return
	}
	if a.ok {
		clear(a.w.preps)
	}
	a.recs, a.cat, a.ok = nil, nil, false
	a.w.phase1.trim()
}

// trim drops phase 1's scratch when a batch grew it past what an idle
// stream keeps (maxKeptArena): the key arena and what indexes it, and the
// table of the batch's key hashes (which clear never shrinks, and each
// later batch would clear whole).
func (p *phase1) trim() {
	if cap(p.arena) > maxKeptArena {
		p.arena, p.preps, p.ixOff, p.mkeys = nil, nil, nil, nil
	}
	if len(p.seen) > maxKeptArena/64 {
		p.seen = make(map[uint64]struct{})
	}
}

// maxKeptArena bounds the arena of keys an Ahead keeps between batches
// (a batch of 10,000 records of ten tags makes about 2 MiB; one of 1,000
// about 200 KiB).
const maxKeptArena = 1 << 20

// take hands w phase 1 of recs when a prepared them, with op, against the
// catalog still current, and reports whether it did; w then holds the
// prepared records and a the scratch w had. A nil a takes nothing. (A
// catalog that changes after take is caught by the commit, which prepares
// again under the write lock; an older one is not taken at all.)
func (a *Ahead) take(w *Writer, op Op, recs []*anypb.Any) (cat *catalog, dups, ok bool) {
	if a == nil || !a.ok {
		return nil, false, false
	}
	same := a.op == op && len(a.recs) == len(recs) && &a.recs[0] == &recs[0] && len(w.ops) == 0
	if !same || a.cat != w.e.cat.Load() {
		a.Forget()
		return nil, false, false
	}
	w.phase1, a.w.phase1 = a.w.phase1, w.phase1
	cat, dups = a.cat, a.dups
	// a's preps are now w's of the batch before, which forget cleared.
	a.recs, a.cat, a.ok = nil, nil, false
	a.taken++
	return cat, dups, true
}

// prepareBatch is phase 1 of the batch Apply applies: taken from its
// Ahead when that holds, else run now.
func (w *Writer) prepareBatch(op Op, recs []*anypb.Any) (*catalog, bool, error) {
	if cat, dups, ok := w.batch.Ahead.take(w, op, recs); ok {
		return cat, dups, w.compileConditions(cat)
	}
	return w.prepareFresh(op, recs)
}
