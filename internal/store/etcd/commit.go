package etcd

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/protobase/protobase/internal/store"
)

// The commit marker. A commit that was sent and got no answer may have
// been applied, may not have been, and may yet be: etcd can hold the
// proposal (in a follower's queue towards the leader, in a leader's log
// not yet replicated) and commit it after the client has given up on it.
// Reading the batch's keys back cannot tell, as other servers write them
// too, and neither can reading anything alone: a read at any revision says
// what has been applied up to it, not that a proposal still in flight
// will not be applied after it. So the store does not ask; it makes the
// question one that a transaction answers.
//
// Every write transaction of the store takes one marker key of its own,
// a slot, that no other process writes: it compares the slot's
// modification revision to the one the store last left it at, and puts
// the batch's id there. Every attempt of one batch carries that same
// comparison, and each attempt that applies moves the slot, so at most one
// attempt of a batch can ever apply: the first to do so makes the
// comparison of every other false, for good (a revision never comes back).
// And the slot says which one did: when an attempt finds the comparison
// false and the slot holds the batch's id, an earlier attempt applied, at
// the slot's modification revision, which is that transaction's revision
// and so the batch's position. An attempt after an unanswered one is
// therefore always safe to send, and its answer settles the batch:
//
//   - it applied: the earlier attempts did not, and now never will
//     (resolved, not applied; the batch is acknowledged at the new
//     revision);
//   - it failed its comparisons and the slot holds the batch's id: an
//     earlier attempt applied (resolved, applied; acknowledged at the
//     slot's revision);
//   - it failed its comparisons with the slot where the store left it:
//     the batch's own preconditions failed, and no attempt has applied so
//     far. One could still: an insert's "key absent" becomes true again
//     if another writer removes the key. So before the conflict is
//     reported the store fences the slot, moving it with a transaction of
//     its own (If slot unchanged Then put a fence id Else read the slot);
//     when that applies, no attempt of the batch ever can, and when it
//     does not, the slot says that the batch applied after all.
//
// A batch whose attempts all went unanswered until the retry timeout
// fails with store.ErrOutcomeUnknown, and its slot is retired: an attempt
// may still apply and move it, which the next batch would take for
// another's conflict.
//
// Slots are keys under the store's prefix, in the space the key layout
// leaves to the stores (keyspace.StorePrefix), which no reader of the
// engine's data looks at: prefix + "\x00\x00commit/" + the store's random
// id (one per Open) + "/" + the slot's number. A store has as many slots
// as it ever had commits in flight at once; each is overwritten by every
// batch that takes it, so their number does not grow with the writes.
// Close deletes them; a server that dies leaves its few behind (some tens
// of bytes each), which a drop of the database removes with the rest.

// markerSpace begins every slot key, after the store's prefix.
const markerSpace = "\x00\x00commit/"

// isMarker reports whether a store key is a commit marker's.
func isMarker(key []byte) bool { return strings.HasPrefix(string(key), markerSpace) }

// slot is one marker key of this store and the modification revision the
// store last left it at (0: absent).
type slot struct {
	key string
	rev int64
}

// slots are the store's marker keys not in use by a commit.
type slots struct {
	mu   sync.Mutex
	free []*slot
	made int
	base string // the store's slot keys' prefix: markerSpace and its id
}

func (s *Store) takeSlot() *slot {
	sl := &s.slots
	sl.mu.Lock()
	defer sl.mu.Unlock()
	if n := len(sl.free); n > 0 {
		x := sl.free[n-1]
		sl.free = sl.free[:n-1]
		return x
	}
	sl.made++
	return &slot{key: sl.base + strconv.Itoa(sl.made)}
}

func (s *Store) putSlot(x *slot) {
	s.slots.mu.Lock()
	s.slots.free = append(s.slots.free, x)
	s.slots.mu.Unlock()
}

// dropSlots deletes the store's slot keys, at Close.
func (s *Store) dropSlots() {
	if s.slots.made == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), s.timeout)
	defer cancel()
	_, _ = s.cli.Delete(ctx, s.slots.base, clientv3.WithPrefix())
}

// markerOff, set by tests alone, commits without the marker and sends a
// commit of unknown outcome again as if it had not applied: the behaviour
// the marker exists to prevent, so that a test can show what it costs.
var markerOff atomic.Bool

// commit sends b, under a slot of the marker, until an attempt settles
// it or the retry timeout passes.
func (s *Store) commit(b *batch) error {
	x := s.takeSlot()
	if markerOff.Load() || b.deletes(x.key) {
		// A batch that range-deletes the slot cannot also put it (etcd
		// refuses a transaction that writes one key twice): only a drop
		// of the whole store does, and dropping again is harmless.
		s.putSlot(x)
		return s.commitBare(b)
	}
	id := strconv.FormatUint(s.batchIDs.Add(1), 36)
	r := s.retrier()
	var unknown error // the last attempt whose outcome was unknown
	for moved := 0; ; {
		resp, m, err := s.attempt(b.cmps, b.ops, x, id)
		if err == nil {
			switch {
			case resp.Succeeded:
				return s.settled(b, x, resp.Header.Revision, unknown != nil, false)
			case m.ModRevision == x.rev:
				if unknown != nil {
					return s.fence(b, x, id, r)
				}
				s.putSlot(x)
				return store.ErrConflict
			case string(m.Value) == id:
				return s.settled(b, x, m.ModRevision, true, true)
			case moved < 3:
				// Only a drop of the store moves a slot under its owner
				// (it deletes every key): start from where it is now.
				x.rev, moved = m.ModRevision, moved+1
				continue
			}
			s.putSlot(x)
			return fmt.Errorf("etcd store: the commit marker %q keeps changing under its store", x.key)
		}
		if errors.Is(err, rpctypes.ErrTooManyOps) && unknown == nil {
			// The marker's comparison and put took the batch past the
			// cluster's --max-txn-ops: send it as it is, the only way it
			// fits.
			s.putSlot(x)
			return s.commitBare(b)
		}
		if errors.Is(err, store.ErrOutcomeUnknown) {
			unknown = err
		}
		if !r.again(err) {
			if unknown == nil {
				s.putSlot(x)
				return r.gaveUp(err)
			}
			return r.gaveUp(unknown) // x is retired
		}
	}
}

// settled acknowledges b at rev, the revision of the attempt that
// applied, and counts how an unknown outcome was resolved.
func (s *Store) settled(b *batch, x *slot, rev int64, wasUnknown, earlier bool) error {
	switch {
	case wasUnknown && earlier:
		s.retries.applied.Add(1)
	case wasUnknown:
		s.retries.notApplied.Add(1)
	}
	x.rev = rev
	s.putSlot(x)
	b.applied, b.pos = true, uint64(rev) //nolint:gosec // a revision, which etcd keeps below 2^63
	return nil
}

// fence moves slot x so that no attempt of the batch id, whose
// preconditions have failed, can apply later; it returns the conflict,
// or acknowledges b if the slot shows that an attempt applied after all.
func (s *Store) fence(b *batch, x *slot, id string, r *retrier) error {
	fid := "fence." + strconv.FormatUint(s.batchIDs.Add(1), 36)
	var unknown error
	for {
		resp, m, err := s.attempt(nil, nil, x, fid)
		if err == nil {
			switch {
			case string(m.Value) == id && !resp.Succeeded:
				return s.settled(b, x, m.ModRevision, true, true)
			case resp.Succeeded:
				x.rev = resp.Header.Revision
			default: // an earlier fence of this loop, or a drop
				x.rev = m.ModRevision
			}
			s.retries.notApplied.Add(1)
			s.putSlot(x)
			return store.ErrConflict
		}
		if errors.Is(err, store.ErrOutcomeUnknown) {
			unknown = err
		}
		if !r.again(err) {
			return r.gaveUp(errors.Join(unknown, err))
		}
	}
}

// attempt sends one transaction If(cmps, slot unchanged) Then(ops, put
// the slot) Else(read the slot), and returns its response and, when its
// comparisons failed, the slot as it was then (a zero one when absent).
func (s *Store) attempt(cmps []clientv3.Cmp, ops []clientv3.Op, x *slot, id string) (*clientv3.TxnResponse, *mvccpb.KeyValue, error) {
	ctx, cancel := s.request()
	defer cancel()
	ctx, sent := watchSend(ctx)
	cmps = append(cmps[:len(cmps):len(cmps)], clientv3.Compare(clientv3.ModRevision(x.key), "=", x.rev))
	ops = append(ops[:len(ops):len(ops)], clientv3.OpPut(x.key, id))
	resp, err := s.cli.Txn(ctx).If(cmps...).Then(ops...).Else(clientv3.OpGet(x.key)).Commit()
	if err != nil {
		return nil, nil, fmt.Errorf("etcd store: apply batch of %d operations: %w", len(ops)-1, s.commitErr(err, sent.Load()))
	}
	m := &mvccpb.KeyValue{}
	if !resp.Succeeded && len(resp.Responses) == 1 {
		if rr := resp.Responses[0].GetResponseRange(); rr != nil && len(rr.Kvs) == 1 {
			m = rr.Kvs[0]
		}
	}
	return resp, m, nil
}

// commitBare commits b without a marker: sent again when it certainly
// did not apply, and (markerOff alone) when its outcome is unknown.
func (s *Store) commitBare(b *batch) error {
	r := s.retrier()
	for {
		ctx, cancel := s.request()
		ctx, sent := watchSend(ctx)
		resp, err := s.cli.Txn(ctx).If(b.cmps...).Then(b.ops...).Commit()
		cancel()
		if err == nil {
			if !resp.Succeeded {
				return store.ErrConflict
			}
			b.applied, b.pos = true, uint64(resp.Header.Revision) //nolint:gosec // a revision, which etcd keeps below 2^63
			return nil
		}
		err = fmt.Errorf("etcd store: apply batch of %d operations: %w", len(b.ops), s.commitErr(err, sent.Load()))
		if errors.Is(err, store.ErrOutcomeUnknown) && !markerOff.Load() {
			return err
		}
		if !r.again(err) {
			return r.gaveUp(err)
		}
	}
}

// check sends the comparisons of a batch without writes, which changes
// nothing: like a read, it is sent again whatever happened to it.
func (s *Store) check(b *batch) error {
	// etcd serves a transaction without writes as a read, and one without
	// a linearizable range in it from the member's own state, which may
	// lag the cluster: its comparisons could pass on what a committed
	// write already changed. A linearizable count of a compared key makes
	// the member catch up first.
	op := clientv3.OpGet(string(b.cmps[0].KeyBytes()), clientv3.WithCountOnly())
	var ok bool
	err := s.read(func(ctx context.Context) error {
		resp, err := s.cli.Txn(ctx).If(b.cmps...).Then(op).Commit()
		if err != nil {
			return fmt.Errorf("etcd store: check %d comparisons: %w", len(b.cmps), s.readErr(err))
		}
		ok = resp.Succeeded
		return nil
	})
	if err != nil {
		return err
	}
	if !ok {
		return store.ErrConflict
	}
	b.applied = true
	return nil
}
