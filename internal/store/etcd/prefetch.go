package etcd

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"golang.org/x/sync/errgroup"
)

// fetched is a key's value as Prefetch read it.
type fetched struct {
	val     []byte
	version uint64 // its mod_revision
	found   bool
}

// Prefetch reads the keys at the iterator's revision so that their
// Lookups cost no round trip: in one read-only transaction of gets when
// the cluster's --max-txn-ops allows it (one round trip, as a client of
// etcd reading the same keys makes), else in transactions of as many gets
// as it allows (Store.getsPerTxn), the first fixing the revision when the
// iterator has none yet and the others sent prefetchParallel at a time at
// that revision. It replaces what an earlier Prefetch read.
func (it *iter) Prefetch(keys [][]byte) error {
	it.pre.reset(keys)
	for done := 0; done < len(keys); {
		n := min(len(keys)-done, it.s.getsPerTxn())
		parallel := it.rev != 0 && n < len(keys)-done
		var err error
		if parallel {
			err = it.fetchParallel(done, n)
		} else {
			err = it.fetchGroup(done, n)
		}
		if errors.Is(err, rpctypes.ErrTooManyOps) && it.s.fewerGets(n) {
			continue // refused: again in smaller transactions
		}
		if err != nil {
			it.pre.reset(nil)
			return err
		}
		if parallel {
			return nil // fetchParallel read every key from done on
		}
		done += n
	}
	return nil
}

// fetchParallel reads the prefetched keys from the one at from on at the
// iterator's revision in transactions of per gets, prefetchParallel at a
// time.
func (it *iter) fetchParallel(from, per int) error {
	var g errgroup.Group
	g.SetLimit(prefetchParallel)
	for lo := from; lo < len(it.pre.keys); lo += per {
		hi := min(lo+per, len(it.pre.keys))
		g.Go(func() error {
			_, err := it.s.txnGet(it.pre.keys[lo:hi], it.rev, it.pre.vals[lo:hi])
			return err
		})
	}
	return g.Wait()
}

// prefetchParallel is how many of Prefetch's transactions are in flight
// at once when its keys need more than one.
const prefetchParallel = 8

// defaultMaxTxnOps is etcd's default --max-txn-ops.
const defaultMaxTxnOps = 128

// getsPerTxn is the most gets Prefetch puts in one transaction: any
// number until the cluster refused a transaction as having too many
// operations (fewerGets).
func (s *Store) getsPerTxn() int {
	if n := s.maxGets.Load(); n > 0 {
		return int(n)
	}
	return int(^uint(0) >> 1)
}

// fewerGets lowers getsPerTxn below n, the gets of a transaction the
// cluster refused as having too many operations: to etcd's default
// --max-txn-ops when n is above it, else to half of n. It reports false
// when a transaction of one get was refused (nothing smaller to try).
func (s *Store) fewerGets(n int) bool {
	if n <= 1 {
		return false
	}
	next := n / 2
	if n > defaultMaxTxnOps && next < defaultMaxTxnOps {
		next = defaultMaxTxnOps
	}
	for {
		cur := s.maxGets.Load()
		if cur > 0 && cur <= int64(next) {
			return true // another request lowered it already
		}
		if s.maxGets.CompareAndSwap(cur, int64(next)) {
			return true
		}
	}
}

// fetchGroup reads the n prefetched keys from the one at from at the
// iterator's revision, fixing it if unset.
func (it *iter) fetchGroup(from, n int) error {
	rev, err := it.s.txnGet(it.pre.keys[from:from+n], it.rev, it.pre.vals[from:from+n])
	if err != nil {
		return err
	}
	if it.rev == 0 {
		it.rev = rev
	}
	return nil
}

// txnGet reads keys in one transaction at rev (0: the latest) into vals,
// one for each key, and returns the revision read at. The values are the
// response's bytes, not copies.
func (s *Store) txnGet(keys [][]byte, rev int64, vals []fetched) (int64, error) {
	ops := make([]clientv3.Op, len(keys))
	var opts []clientv3.OpOption
	if rev != 0 {
		opts = []clientv3.OpOption{clientv3.WithRev(rev)}
	}
	for i, k := range keys {
		ops[i] = clientv3.OpGet(s.Key(k), opts...)
	}
	var resp *clientv3.TxnResponse
	err := s.read(func(ctx context.Context) (err error) {
		resp, err = s.cli.Txn(ctx).Then(ops...).Commit()
		if err != nil {
			return fmt.Errorf("etcd store: get %d keys: %w", len(keys), s.readErr(err))
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	if len(resp.Responses) != len(keys) {
		return 0, fmt.Errorf("etcd store: get %d keys: %d answers", len(keys), len(resp.Responses))
	}
	for i, r := range resp.Responses {
		f := fetched{}
		if rr := r.GetResponseRange(); rr != nil && len(rr.Kvs) > 0 {
			f = fetched{val: rr.Kvs[0].Value, version: uint64(rr.Kvs[0].ModRevision), found: true}
		}
		vals[i] = f
	}
	return resp.Header.Revision, nil
}

// prefetched are the keys of the last Prefetch (copies) and their values.
// Lookups mostly come in the order of the keys prefetched: a Lookup
// compares its key with the one after the last found (next) and only
// otherwise looks it up by key (byKey, made on the first such Lookup).
type prefetched struct {
	keys  [][]byte
	vals  []fetched
	next  int
	byKey map[string]int
}

// reset makes keys, copied, the prefetched keys, their values not read.
func (p *prefetched) reset(keys [][]byte) {
	*p = prefetched{}
	if len(keys) == 0 {
		return
	}
	size := 0
	for _, k := range keys {
		size += len(k)
	}
	arena := make([]byte, 0, size)
	p.keys = make([][]byte, len(keys))
	for i, k := range keys {
		arena = append(arena, k...)
		p.keys[i] = arena[len(arena)-len(k) : len(arena) : len(arena)]
	}
	p.vals = make([]fetched, len(keys))
}

// get returns key's value as prefetched, if it was.
func (p *prefetched) get(key []byte) (fetched, bool) {
	if len(p.keys) == 0 {
		return fetched{}, false
	}
	i := p.next
	if i >= len(p.keys) || !bytes.Equal(p.keys[i], key) {
		if p.byKey == nil {
			p.byKey = make(map[string]int, len(p.keys))
			for j, k := range p.keys {
				p.byKey[string(k)] = j
			}
		}
		var ok bool
		if i, ok = p.byKey[string(key)]; !ok {
			return fetched{}, false
		}
	}
	p.next = i + 1
	return p.vals[i], true
}
