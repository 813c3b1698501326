package engine

import (
	"errors"
	"math/rand/v2"
	"time"

	"google.golang.org/protobuf/types/known/anypb"

	"github.com/protobase/protobase/internal/store"
)

// Writes on a shared store (etcd) are pipelined: batches of different
// streams of one server are checked and sent without writeMu, each its own
// transaction in flight at once, so a server keeps as many transactions in
// flight as it has streams writing instead of one.
//
// writeMu adds nothing to their correctness there. Every read of phase 2
// (existence, uniqueness, the replaced record's entries, a patch's stored
// record, the conditions, the schema version) is a precondition of the
// transaction, which the cluster checks when it commits: a batch of another
// stream of this server that changed what a batch read makes it fail
// exactly as a batch of another server does (store.ErrConflict), and the
// batch is checked again on fresh reads, so an ALREADY_EXISTS, NOT_FOUND,
// unique violation or failed condition is only ever reported from reads
// the batch would have committed on. What writeMu guards on Pebble is
// absent or unused on a shared store: there is no record cache and no
// change log, a batch's position is its transaction's revision, and the
// engine's commit sequence is not written (etcd numbers batches itself).
// The catalog is swapped under writeMu still (refreshSchema).
//
// Order. A stream's Apply returns once its transaction has committed (a
// committed etcd transaction is durable), and the stream applies its next
// batch only then: a stream's batches commit in its order, and their
// acknowledgements go out in that order. Schema commits, index build steps
// and API key changes take writeMu and leave these batches alone; each
// side's preconditions cover the other, as between servers.
//
// Progress. A batch that loses its preconditions twice re-checks with
// pipeGate held exclusively, that is with no other batch of this server in
// flight (see Engine.pipeGate): a batch on a hot record or a query
// condition's write mark then loses only to other servers' batches, and
// its server's other streams wait for it meanwhile. Between servers,
// re-checking at once lets the server that just won win again: the loser
// re-reads the schema before it re-checks, which gives the winner's next
// batch a head start every time, so that a batch of two servers writing
// one aggregate group can lose all its attempts. So each re-check after the
// first waits a random while (conflictPause), doubling up to a bound, as
// optimistic writers on a shared store usually do.

// testHookConditionsRead, when set, runs in a conditional batch on a
// shared store between its condition reads and its record reads, and
// testHookRefused when its records refused it, before recheckRefusal
// judges that (tests of writers that come in between).
var testHookConditionsRead, testHookRefused func()

// sharedSolo is the attempt from which a batch that keeps losing its
// preconditions re-checks alone (pipeGate held exclusively).
const sharedSolo = 2

// commitShared is commitLocked for a shared store: phase 2 and the
// transaction without writeMu, checked again on fresh reads (up to
// maxConflicts times) when the cluster reports a conflict.
func (w *Writer) commitShared(b store.WriteBatch, cat *catalog, op Op, recs []*anypb.Any, dups bool) error {
	e := w.e
	solo := false
	hold := func() {
		if solo {
			e.pipeGate.Lock()
		} else {
			e.pipeGate.RLock()
		}
	}
	release := func() {
		if solo {
			e.pipeGate.Unlock()
		} else {
			e.pipeGate.RUnlock()
		}
	}
	hold()
	defer release() // as held when the batch ends
	var err error
	for attempt := 0; ; attempt++ {
		if cur := e.cat.Load(); cur != cat {
			// The schema changed since phase 1: prepare again.
			cat = cur
			if dups, err = w.prepare(cat, op, recs); err != nil {
				return err
			}
		}
		err = w.sendShared(b, cat, op, dups)
		if !errors.Is(err, store.ErrConflict) {
			err = w.recheckRefusal(b, err)
		}
		if !errors.Is(err, store.ErrConflict) || attempt == maxConflicts {
			break
		}
		b.Reset()
		// Between attempts the batch holds no gate, so that its pause
		// never keeps this server's other batches waiting; from
		// sharedSolo on it re-checks holding the gate alone.
		release()
		conflictPause(attempt)
		solo = attempt+1 >= sharedSolo
		hold()
		e.writeMu.Lock()
		_, err = e.refreshSchema()
		e.writeMu.Unlock()
		if err != nil {
			break
		}
	}
	return storeError(err)
}

// conflictPause waits before the re-check that follows the attempt-th lost
// one (counting from 0): not at all after the first, then a random while
// below 1 ms, 2 ms, 4 ms... up to maxConflictPause; at most about half a
// second over a batch's maxConflicts attempts.
func conflictPause(attempt int) {
	if attempt == 0 {
		return
	}
	most := min(time.Millisecond<<min(attempt-1, 16), maxConflictPause)
	time.Sleep(rand.N(most))
}

// maxConflictPause bounds one conflictPause.
const maxConflictPause = 50 * time.Millisecond

// sendShared is commit for a shared store: phase 2 into b, whose reads
// become the transaction's comparisons, then the transaction.
func (w *Writer) sendShared(b store.WriteBatch, cat *catalog, op Op, dups bool) error {
	b.Expect(keySchema, cat.ver)
	if done, err := w.commitConditions(b); done || err != nil {
		return err
	}
	if testHookConditionsRead != nil && len(w.conds.list) > 0 {
		testHookConditionsRead()
	}
	if err := w.build(b, op, dups); err != nil {
		return err
	}
	if err := w.e.st.ApplyBatch(b); err != nil {
		return err
	}
	w.position = b.Position()
	w.batchBytes = int64(len(w.arena))
	for i := range w.preps {
		w.batchBytes += int64(len(w.preps[i].value()))
	}
	return nil
}
