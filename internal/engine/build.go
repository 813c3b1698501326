package engine

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"time"

	pb "github.com/protobase/protobase/gen/protobase/v1"
	"github.com/protobase/protobase/internal/keyspace"
	"github.com/protobase/protobase/internal/schema"
	"github.com/protobase/protobase/internal/store"
)

// buildChunk is how many records one build step indexes while holding
// writeMu; small enough that writers wait at most a few milliseconds.
const buildChunk = 1000

// sharedBuildChunk is the chunk on a shared store: each record read is a
// precondition of the step's transaction, which must stay within the
// cluster's operations per transaction (etcd: 128 by default).
const sharedBuildChunk = 32

// testHookBuildStep, when set by a test, runs before each build step: a
// hook that blocks holds every build at that point.
var testHookBuildStep func()

// testHookBuildEnd, when set by a test, runs after a build's last step,
// before its outcome is recorded: where a schema change may still drop
// the index.
var testHookBuildEnd func()

// startBuild indexes the existing records of a type for an index in state
// BUILDING, in the background.
//
// Correctness with concurrent writes: writers maintain BUILDING indexes like
// READY ones, and each build step reads the current records and writes
// their entries under writeMu. A record written before the builder reaches
// it gets its entry from the writer and again (identically) from the
// builder; one written after already has it. Reads ignore the index until
// the builder marks it READY. On a shared store writers on other servers
// do not take this writeMu, so the step reads each record through its
// batch: a record changed or removed meanwhile fails the step's
// preconditions, and the step runs again on fresh reads.
//
// Each step also writes its checkpoint (keyspace.BuildKey: the last record
// key indexed), so a build resumes where it stopped after a restart. On a
// shared store every server that learns of a BUILDING index starts a
// builder, but a builder first takes the build's lock (store.Locker): one
// server builds at a time, and when it dies its lease lapses and a waiting
// server resumes from the checkpoint. A builder that gets the lock after
// the build ended finds the index no longer BUILDING and stops, with a
// line saying so: that the build ended on another server (READY or
// FAILED), or, the index being gone, that a schema change dropped it.
func (e *Engine) startBuild(typeID, indexID uint32) {
	e.buildMu.Lock()
	defer e.buildMu.Unlock()
	if e.closed.Load() || e.buildMu.builds[indexID] {
		return // this engine builds it already
	}
	if e.buildMu.builds == nil {
		e.buildMu.builds = map[uint32]bool{}
	}
	e.buildMu.builds[indexID] = true
	e.bg.Add(1)
	go func() {
		defer e.bg.Done()
		defer func() {
			e.buildMu.Lock()
			delete(e.buildMu.builds, indexID)
			e.buildMu.Unlock()
		}()
		// The names are taken once: a drop while the build runs takes
		// them out of the catalog, and the lines that end the build must
		// still name what it built.
		typ, idx := e.indexNames(typeID, indexID)
		e.log.Info("index build started", "type", typ, "index", idx)
		switch err := e.buildIndex(typeID, indexID, typ, idx); {
		case errors.Is(err, errStale):
			// A schema change dropped or replaced the index while it was
			// built: expected when changes follow each other closely.
			e.log.Info("index build stopped: a schema change dropped or replaced the index", "type", typ, "index", idx)
		case err != nil:
			e.log.Error("index build failed", "type", typ, "index", idx, "err", err)
		}
	}()
}

// startBuilds starts a builder for every BUILDING index of cat.
func (e *Engine) startBuilds(cat *catalog) {
	for _, t := range cat.types {
		for _, ix := range t.indexes {
			if ix.building {
				e.startBuild(t.rt.ID, ix.ix.ID)
			}
		}
		for _, a := range t.aggs {
			if a.building {
				e.startBuild(t.rt.ID, a.ix.ID)
			}
		}
	}
}

// buildIndex runs the build of the index named idx of the type named typ
// to its end; errStale when a schema change dropped or replaced the index
// meanwhile, its last step included.
func (e *Engine) buildIndex(typeID, indexID uint32, typ, idx string) error {
	ck := keyspace.BuildKey(indexID)
	if l, ok := e.st.(store.Locker); ok {
		release, err := l.Lock(e.bgCtx, ck)
		if err != nil {
			if e.bgCtx.Err() != nil {
				return nil //nolint:nilerr // shutting down: another server (or the next Open) goes on
			}
			return err
		}
		defer release()
		e.writeMu.Lock()
		_, err = e.refreshSchema()
		t := e.cat.Load().byID[typeID]
		e.writeMu.Unlock()
		if err != nil {
			return err
		}
		if ix, building := t.buildingIndex(indexID); !building {
			if ix == nil {
				return errStale // dropped or replaced while this server waited
			}
			// Another server ended the build: say how, so that this
			// server's started line has an end.
			e.log.Info("index build ended on another server", "type", typ, "index", idx,
				"state", schema.StateName(ix.State))
			return nil
		}
	}
	progress := e.trackBuild(typeID, indexID)
	defer e.untrackBuild(progress)
	after, found, err := e.st.Get(ck, nil) // last record key indexed
	if err != nil {
		return fmt.Errorf("read index build checkpoint: %w", err)
	}
	if !found {
		after = nil
	}
	var n uint64
	waiting := false // for disk space
	for {
		if testHookBuildStep != nil {
			testHookBuildStep()
		}
		if e.bgCtx.Err() != nil {
			return nil //nolint:nilerr // shutting down is not a failure: the build resumes on the next Open
		}
		done, conflict, err := e.buildStep(typeID, indexID, &after, &n)
		progress.n.Store(n)
		if errors.Is(err, store.ErrDiskFull) {
			e.waitForDisk(typeID, indexID, &waiting)
			continue
		}
		if errors.Is(err, store.ErrConflict) {
			// A record of the chunk, or the schema, changed meanwhile on
			// another server: index the chunk again under the current schema.
			e.writeMu.Lock()
			_, err = e.refreshSchema()
			e.writeMu.Unlock()
			if err != nil {
				return err
			}
			continue
		}
		if err != nil {
			return err
		}
		waiting = false
		// The outcome is logged once the schema state holds it: a drop
		// that commits between the last step and this one ends the build
		// as stopped, not built.
		if (done || conflict != "") && testHookBuildEnd != nil {
			testHookBuildEnd()
		}
		if conflict != "" {
			if err := e.finishBuild(typeID, indexID, pb.IndexState_INDEX_STATE_FAILED, conflict); err != nil {
				return err
			}
			e.log.Warn("index build failed", "type", typ, "index", idx, "reason", conflict)
			return nil
		}
		if done {
			if err := e.finishBuild(typeID, indexID, pb.IndexState_INDEX_STATE_READY, ""); err != nil {
				return err
			}
			e.log.Info("index built", "type", typ, "index", idx, "records", n)
			return nil
		}
	}
}

// buildStep indexes up to buildChunk records after *after. It reports done
// when the type has no more records, or a unique-index conflict.
func (e *Engine) buildStep(typeID, indexID uint32, after *[]byte, n *uint64) (done bool, conflict string, err error) {
	e.writeMu.Lock()
	t := e.cat.Load().byID[typeID]
	if _, building := t.buildingIndex(indexID); !building {
		e.writeMu.Unlock()
		return true, "", errStale
	}
	ix, ag := t.indexByID(indexID), t.aggByID(indexID)
	var groups aggChanges
	groups.reset()
	lower := buildLower(t, *after)
	it, err := e.st.NewIterator(lower, keyspace.PrefixEnd(t.prefix))
	if err != nil {
		e.writeMu.Unlock()
		return false, "", err
	}
	b := e.st.NewWriteBatch()
	defer b.Close()
	uniq := map[string][]byte{} // unique keys set by this step
	var key, val []byte
	shared := e.st.Shared()
	count, ops, chunk := 0, 0, stepChunk(shared)
	now := e.now()
	// gaps: on a shared store an aggregate index's step also makes "no
	// record appeared between those it read" a precondition, as a record
	// inserted there past the checkpoint by another writer is counted by
	// neither (writes count only records the build has passed).
	gaps := shared && ag != nil
	gap := lower
	for it.First(); it.Valid() && count < chunk; it.Next() {
		count++
		key = append(key[:0], it.Key()...)
		val = append(val[:0], it.Value()...)
		var found bool
		if val, found, err = stepRead(b, gaps, shared, gap, key, val); err != nil {
			break
		}
		if gaps {
			gap = append(slices.Clip(key), 0)
		}
		if !found {
			continue // removed since the iterator read it
		}
		var n int
		if n, conflict, err = stepIndex(b, t, ix, ag, &groups, key, val, uniq, now); err != nil || conflict != "" {
			break
		}
		// A shared store's step is one transaction: its entries count
		// against the same operations as its reads (a repeated field
		// gives a record several).
		if ops += n; shared && ops >= chunk {
			it.Next()
			break
		}
	}
	more := it.Valid()
	if cerr := it.Close(); err == nil {
		err = cerr
	}
	if err == nil && gaps && !more {
		err = readGap(b, gap, keyspace.PrefixEnd(t.prefix))
	}
	if err == nil {
		err = groups.apply(b)
	}
	if err != nil || conflict != "" {
		e.writeMu.Unlock()
		return false, conflict, err
	}
	final := ag != nil && !more
	if final {
		// The build has passed every record: from this batch on, writes
		// count every record of the type, as those written between this
		// step and the end of the build have nobody else to count them.
		key = keyspace.PrefixEnd(t.prefix)
	}
	if count > 0 || final {
		b.Set(keyspace.BuildKey(indexID), key)
	}
	b.Expect(keySchema, e.cat.Load().ver)
	if err := e.st.ApplyBatch(b); err != nil {
		e.writeMu.Unlock()
		return false, "", err
	}
	*after = append((*after)[:0], key...)
	*n += uint64(count)
	e.writeMu.Unlock()
	return !more, "", b.Wait()
}

// buildLower is where a build step of t starts: past after, the last
// record a step indexed (nil: none yet).
func buildLower(t *recType, after []byte) []byte {
	if after == nil {
		return t.prefix
	}
	return append(append([]byte(nil), after...), 0)
}

// stepChunk is how many records, or on a shared store operations, one
// build step takes.
func stepChunk(shared bool) int {
	if shared {
		return sharedBuildChunk
	}
	return buildChunk
}

// stepIndex indexes the record val at key in ix, or counts it in the
// aggregate index ag, and returns the operations it added to b.
func stepIndex(b store.WriteBatch, t *recType, ix *index, ag *aggIndex, groups *aggChanges, key, val []byte,
	uniq map[string][]byte, now instant) (int, string, error) {
	if ag == nil {
		return indexLive(b, t, ix, key, val, uniq, now)
	}
	// Every stored record counts, expired or not, as writes count them:
	// the reaper's removal subtracts it.
	if err := groups.add(ag, val, 1); err != nil {
		return 0, "", err
	}
	return 2, "", nil // at most a read and a write of its group's entry
}

// stepRead returns the record at key a build step indexes: val, as its
// iterator read it, or on a shared store the latest value, read through b
// (a precondition), after making the gap since the previous record one
// too when gaps is set (readGap). found is false for a record removed
// since the iterator read it.
func stepRead(b store.WriteBatch, gaps, shared bool, gap, key, val []byte) ([]byte, bool, error) {
	if gaps {
		if err := readGap(b, gap, key); err != nil {
			return val, false, err
		}
	}
	if !shared {
		return val, true, nil
	}
	return b.Read(key, val, false)
}

// readGap makes "no record lies in [lower, upper)" a precondition of b;
// when one does already, the step is run again (store.ErrConflict) on a
// fresh read.
func readGap(b store.WriteBatch, lower, upper []byte) error {
	if bytes.Compare(lower, upper) >= 0 {
		return nil
	}
	absent, err := b.ReadAbsent(lower, upper)
	if err == nil && !absent {
		err = store.ErrConflict
	}
	return err
}

// buildDiskRetry is how often a build step refused for a full disk is
// tried again.
const buildDiskRetry = time.Second

// waitForDisk pauses a build whose step the full disk refused, logging
// the first pause of a run of them (*waiting): the step is tried again
// after buildDiskRetry, and the build goes on once space is freed.
func (e *Engine) waitForDisk(typeID, indexID uint32, waiting *bool) {
	if !*waiting {
		*waiting = true
		typ, idx := e.indexNames(typeID, indexID)
		e.log.Warn("index build waits for disk space", "type", typ, "index", idx)
	}
	t := time.NewTimer(buildDiskRetry)
	defer t.Stop()
	select {
	case <-t.C:
	case <-e.bgCtx.Done():
	}
}

// indexLive is indexRecord for a record that has not expired at now: an
// expired one is returned by no read, so it needs no entries, and it holds
// no unique value a live record may want. The expiry index takes it all
// the same: that is how the reaper finds it.
func indexLive(b store.WriteBatch, t *recType, ix *index, key, val []byte, uniq map[string][]byte, now instant) (int, string, error) {
	if !ix.ix.Expiry && t.expired(val, now) {
		return 0, "", nil
	}
	return indexRecord(b, t, ix, key, val, uniq)
}

// indexRecord adds record key's entries of index ix, val being the
// record, to b; uniq holds the unique keys the step set so far. It
// reports a unique-index conflict, or a record the index cannot take.
func indexRecord(b store.WriteBatch, t *recType, ix *index, key, val []byte, uniq map[string][]byte) (entries int, conflict string, err error) {
	pk := key[len(t.prefix):]
	keys, err := t.entryKeys(ix, val, pk)
	if err != nil {
		// A record the index cannot take (more elements than an index
		// entry limit allows) fails the build, as a shared value does.
		return 0, fmt.Sprintf("index %s: record of primary key %x: %v", ix.ix.Name, pk, err), nil
	}
	for _, ik := range keys {
		if !ix.ix.Unique {
			writeEntry(b, ix, ik, nil)
			continue
		}
		cur, ok := uniq[string(ik)]
		if !ok {
			var found bool
			if cur, found, err = b.Read(ik, nil, false); err != nil {
				return 0, "", err
			}
			ok = found
		}
		if ok && !bytes.Equal(cur, pk) {
			return 0, fmt.Sprintf("unique index %s: two records share one value (primary keys %x and %x)", ix.ix.Name, cur, pk), nil
		}
		uniq[string(ik)] = append([]byte(nil), pk...)
		b.Set(ik, pk)
	}
	return len(keys), "", nil
}

var errStale = fmt.Errorf("index no longer building")

// finishBuild records the build's outcome in the schema state. A failed
// build's partial entries are deleted in the same batch.
func (e *Engine) finishBuild(typeID, indexID uint32, st pb.IndexState, msg string) error {
	e.schemaMu.Lock()
	defer e.schemaMu.Unlock()
	for attempt := 0; ; attempt++ {
		err := e.finishOnce(typeID, indexID, st, msg)
		if !errors.Is(err, store.ErrConflict) || attempt == maxConflicts {
			return err
		}
	}
}

// finishOnce is one attempt of finishBuild; on a shared store another
// server may have changed the schema since this engine loaded it
// (store.ErrConflict: the catalog is then refreshed for the next attempt).
func (e *Engine) finishOnce(typeID, indexID uint32, st pb.IndexState, msg string) error {
	e.writeMu.Lock()
	cat := e.cat.Load()
	t := cat.byID[typeID]
	ix, building := t.buildingIndex(indexID)
	if !building {
		e.writeMu.Unlock()
		return errStale
	}
	state := cat.state.WithIndexState(t.rt.Name, ix.Name, st, msg)
	ncat, err := newCatalog(state)
	if err != nil {
		e.writeMu.Unlock()
		return err
	}
	enc, err := state.Encode()
	if err != nil {
		e.writeMu.Unlock()
		return err
	}
	b := e.st.NewWriteBatch()
	defer b.Close()
	b.Expect(keySchema, cat.ver)
	b.Set(keySchema, enc)
	b.Delete(keyspace.BuildKey(indexID))
	if st == pb.IndexState_INDEX_STATE_FAILED {
		prefix := keyspace.IndexPrefix(ix.ID)
		b.DeleteRange(prefix, keyspace.PrefixEnd(prefix))
	}
	if err := e.st.ApplyBatch(b); err != nil {
		if errors.Is(err, store.ErrConflict) {
			if _, rerr := e.refreshSchema(); rerr != nil {
				err = rerr
			}
		}
		e.writeMu.Unlock()
		return err
	}
	ncat.ver = b.Position()
	e.cat.Store(ncat)
	e.writeMu.Unlock()
	return b.Wait()
}

// buildProgress is what GetSchema reports of a build running here: the
// records it has indexed (Index.records_indexed).
type buildProgress struct {
	key string // type and index names, as GetSchema finds them
	n   atomic.Uint64
}

func buildKey(typ, idx string) string { return typ + "\x00" + idx }

func (e *Engine) trackBuild(typeID, indexID uint32) *buildProgress {
	p := &buildProgress{key: buildKey(e.indexNames(typeID, indexID))}
	e.builds.Store(p.key, p)
	return p
}

// untrackBuild forgets p, unless a later build of an index of the same
// name (dropped and added again) replaced it already.
func (e *Engine) untrackBuild(p *buildProgress) { e.builds.CompareAndDelete(p.key, p) }

// describeBuilds sets records_indexed on the indexes of types that a build
// running here is indexing.
func (e *Engine) describeBuilds(types []*pb.RecordType) {
	for _, t := range types {
		for _, ix := range t.Indexes {
			if ix.State != pb.IndexState_INDEX_STATE_BUILDING {
				continue
			}
			if p, ok := e.builds.Load(buildKey(t.Name, ix.Name)); ok {
				ix.RecordsIndexed = p.(*buildProgress).n.Load()
			}
		}
	}
}
