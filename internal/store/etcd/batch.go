package etcd

import (
	"context"
	"errors"
	"fmt"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/protobase/protobase/internal/store"
)

// batch is a store.WriteBatch that ApplyBatch sends as one transaction:
// If(cmps) Then(ops). It is not safe for concurrent use.
type batch struct {
	s    *Store
	ops  []clientv3.Op
	cmps []clientv3.Cmp
	// at holds the index in ops of each key put or deleted: etcd refuses
	// a transaction that writes one key twice, so a later write of a key
	// replaces its earlier one (the last write wins, as in Pebble).
	at map[string]int
	// ranges are the [start, end) of its range deletes.
	ranges  [][2]string
	applied bool
	pos     uint64 // revision of the applied transaction
}

var errApplied = errors.New("etcd store: batch already applied; Reset it before reuse")

// NewWriteBatch returns an empty batch.
func (s *Store) NewWriteBatch() store.WriteBatch { return &batch{s: s} }

func (b *batch) mutable() {
	if b.applied {
		panic("etcd store: batch modified after Apply; call Reset first")
	}
}

func (b *batch) Set(key, value []byte) {
	b.mutable()
	k := b.s.Key(key)
	b.put(k, clientv3.OpPut(k, string(value)))
}

func (b *batch) Delete(key []byte) {
	b.mutable()
	k := b.s.Key(key)
	b.put(k, clientv3.OpDelete(k))
}

// SetEntry is Set of an empty value: etcd keeps every key on its own.
func (b *batch) SetEntry(key []byte) { b.Set(key, nil) }

// SetEntries is SetEntry of each key.
func (b *batch) SetEntries(group, suffixes []byte) {
	key := make([]byte, len(group)+store.EntryGroupSuffix)
	copy(key, group)
	for i := 0; i < len(suffixes); i += store.EntryGroupSuffix {
		copy(key[len(group):], suffixes[i:i+store.EntryGroupSuffix])
		b.Set(key, nil)
	}
}

// DeleteEntry is Delete.
func (b *batch) DeleteEntry(key []byte) { b.Delete(key) }

func (b *batch) put(k string, op clientv3.Op) {
	if b.at == nil {
		b.at = make(map[string]int)
	}
	if i, ok := b.at[k]; ok {
		b.ops[i] = op
		return
	}
	b.at[k] = len(b.ops)
	b.ops = append(b.ops, op)
}

func (b *batch) DeleteRange(start, end []byte) {
	b.mutable()
	lo, hi := b.s.Key(start), b.s.rangeEnd(end)
	b.ops = append(b.ops, clientv3.OpDelete(lo, clientv3.WithRange(hi)))
	b.ranges = append(b.ranges, [2]string{lo, hi})
}

// deletes reports whether one of b's range deletes covers key.
func (b *batch) deletes(key string) bool {
	for _, r := range b.ranges {
		if r[0] <= key && key < r[1] {
			return true
		}
	}
	return false
}

// Read reads the latest value of key and makes "key still as read" a
// comparison of the transaction: the same modification revision when
// found, no creation revision (absent) when not.
func (b *batch) Read(key, dst []byte, _ bool) ([]byte, bool, error) {
	v, found, resp, err := b.s.get(key, dst, 0)
	if err != nil {
		return v, found, err
	}
	k := b.s.Key(key)
	if found {
		b.cmps = append(b.cmps, clientv3.Compare(clientv3.ModRevision(k), "=", resp.Kvs[0].ModRevision))
	} else {
		b.cmps = append(b.cmps, clientv3.Compare(clientv3.CreateRevision(k), "=", 0))
	}
	return v, found, nil
}

// ReadAbsent asks for at most one key of [lower, upper); when there is
// none, the transaction compares the whole range's creation revisions to 0
// (true only while the range stays empty).
func (b *batch) ReadAbsent(lower, upper []byte) (bool, error) {
	lo, hi := b.s.Key(lower), b.s.rangeEnd(upper)
	var resp *clientv3.GetResponse
	err := b.s.read(func(ctx context.Context) (err error) {
		resp, err = b.s.cli.Get(ctx, lo, clientv3.WithRange(hi), clientv3.WithCountOnly(), clientv3.WithLimit(1))
		if err != nil {
			return fmt.Errorf("etcd store: read range: %w", b.s.readErr(err))
		}
		return nil
	})
	if err != nil {
		return false, err
	}
	if resp.Count > 0 {
		return false, nil
	}
	b.cmps = append(b.cmps, clientv3.Compare(clientv3.CreateRevision(lo), "=", 0).WithRange(hi))
	return true, nil
}

// Stamp does nothing: a record's version on etcd is its mod_revision,
// the revision of the transaction that wrote it.
func (b *batch) Stamp(uint64) {}

func (b *batch) Empty() bool { return len(b.ops) == 0 }

// Wait returns at once: a committed transaction is already durable.
func (b *batch) Wait() error {
	if !b.applied {
		return store.ErrBatchNotApplied
	}
	return nil
}

func (b *batch) Position() uint64 { return b.pos }

func (b *batch) Reset() {
	clear(b.ops)
	clear(b.cmps)
	clear(b.at)
	b.ops, b.cmps, b.ranges, b.applied, b.pos = b.ops[:0], b.cmps[:0], b.ranges[:0], false, 0
}

func (b *batch) Close() { b.ops, b.cmps, b.at, b.ranges = nil, nil, nil, nil }

// ApplyBatch commits b as one transaction. A failed comparison is
// store.ErrConflict; a transaction the cluster refuses as too large is
// store.ErrLimit. A commit the cluster did not serve is sent again until
// the retry timeout (retry.go), under the commit marker that makes a
// commit of unknown outcome safe to send again (commit.go); past the
// timeout it fails store.ErrUnavailable when no attempt can have been
// applied, store.ErrOutcomeUnknown when one may have been (commitErr). A
// batch without writes sends its comparisons alone (a transaction that
// changes nothing and takes no revision), and one without comparisons
// either sends nothing.
func (s *Store) ApplyBatch(wb store.WriteBatch) error {
	b, err := s.unapplied(wb, "ApplyBatch")
	if err != nil {
		return err
	}
	switch {
	case len(b.ops) > 0:
		return s.commit(b)
	case len(b.cmps) > 0:
		return s.check(b)
	}
	b.applied = true
	return nil
}

// CheckBatch sends b's comparisons alone, as ApplyBatch sends those of a
// batch without writes.
func (s *Store) CheckBatch(wb store.WriteBatch) error {
	b, err := s.unapplied(wb, "CheckBatch")
	if err != nil || len(b.cmps) == 0 {
		return err
	}
	return s.check(b)
}

// unapplied is wb as a batch of s not applied yet, for the call named.
func (s *Store) unapplied(wb store.WriteBatch, call string) (*batch, error) {
	b, ok := wb.(*batch)
	if !ok || b.s != s {
		return nil, errors.New("etcd store: " + call + " of a batch of another store")
	}
	if b.applied {
		return nil, errApplied
	}
	return b, nil
}

var _ store.Checker = (*Store)(nil)

// Expect compares the key's modification revision to version (0: absent).
func (b *batch) Expect(key []byte, version uint64) {
	k := b.s.Key(key)
	if version == 0 {
		b.cmps = append(b.cmps, clientv3.Compare(clientv3.CreateRevision(k), "=", 0))
		return
	}
	b.cmps = append(b.cmps, clientv3.Compare(clientv3.ModRevision(k), "=", int64(version))) //nolint:gosec // a revision, which etcd keeps below 2^63
}
