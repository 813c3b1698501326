package etcd

import (
	"context"
	"fmt"

	clientv3 "go.etcd.io/etcd/client/v3"
	"golang.org/x/sync/errgroup"
)

// fetched is a key's value as Prefetch read it.
type fetched struct {
	val     []byte
	version uint64 // its mod_revision
	found   bool
}

// Prefetch groups the keys into read-only transactions of at most
// prefetchOps gets each (within etcd's default --max-txn-ops), sent
// prefetchParallel at a time, all at the iterator's revision: a thousand
// lookups cost a few round trips instead of a thousand. It replaces what an
// earlier Prefetch read.
func (it *iter) Prefetch(keys [][]byte) error {
	it.got = make(map[string]fetched, len(keys))
	if len(keys) == 0 {
		return it.err
	}
	if it.rev == 0 {
		// The first group fixes the revision the others read at.
		n := min(len(keys), prefetchOps)
		if err := it.fetchGroup(keys[:n]); err != nil {
			return err
		}
		keys = keys[n:]
	}
	type group struct{ kvs map[string]fetched }
	var g errgroup.Group
	g.SetLimit(prefetchParallel)
	var groups []*group
	for len(keys) > 0 {
		n := min(len(keys), prefetchOps)
		part := keys[:n]
		keys = keys[n:]
		gr := &group{}
		groups = append(groups, gr)
		g.Go(func() error {
			var err error
			gr.kvs, err = it.s.getGroup(part, it.rev)
			return err
		})
	}
	if err := g.Wait(); err != nil {
		it.got = nil
		return err
	}
	for _, gr := range groups {
		for k, f := range gr.kvs {
			it.got[k] = f
		}
	}
	return nil
}

// Sizes of Prefetch's transactions.
const (
	prefetchOps      = 128
	prefetchParallel = 8
)

// fetchGroup reads one group at the iterator's revision, fixing it if unset.
func (it *iter) fetchGroup(keys [][]byte) error {
	got, rev, err := it.s.txnGet(keys, it.rev)
	if err != nil {
		return err
	}
	if it.rev == 0 {
		it.rev = rev
	}
	for k, f := range got {
		it.got[k] = f
	}
	return nil
}

func (s *Store) getGroup(keys [][]byte, rev int64) (map[string]fetched, error) {
	got, _, err := s.txnGet(keys, rev)
	return got, err
}

// txnGet reads keys in one transaction at rev (0: the latest) and returns
// them by store key with the revision read at.
func (s *Store) txnGet(keys [][]byte, rev int64) (map[string]fetched, int64, error) {
	ops := make([]clientv3.Op, len(keys))
	for i, k := range keys {
		if rev != 0 {
			ops[i] = clientv3.OpGet(s.Key(k), clientv3.WithRev(rev))
		} else {
			ops[i] = clientv3.OpGet(s.Key(k))
		}
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
		return nil, 0, err
	}
	got := make(map[string]fetched, len(keys))
	for i, r := range resp.Responses {
		rr := r.GetResponseRange()
		f := fetched{}
		if rr != nil && len(rr.Kvs) > 0 {
			f = fetched{val: rr.Kvs[0].Value, version: uint64(rr.Kvs[0].ModRevision), found: true}
		}
		got[string(keys[i])] = f
	}
	return got, resp.Header.Revision, nil
}
