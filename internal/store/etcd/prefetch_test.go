package etcd_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/protobase/protobase/internal/store"
	"github.com/protobase/protobase/internal/store/etcd"
	"github.com/protobase/protobase/internal/store/etcd/etcdtest"
)

// Prefetch reads its keys at one revision whether they fit in one
// transaction or need several: on a cluster that allows them all, and on
// clusters whose --max-txn-ops is below the keys (above etcd's default of
// 128 and below it), while a writer changes pairs of keys that fall in
// different transactions, each pair in one transaction. Every pair read
// holds one value and one version, and the first key's Lookup found every
// key. Even rounds read through a snapshot's iterator, whose revision is
// fixed before its first transaction, so that the first Prefetch of a
// store that has not yet learned the cluster's limit sends its
// transactions in parallel.
func TestPrefetchOneRevision(t *testing.T) {
	const keys, pairsPerTxn = 1000, 40
	for _, lim := range []etcdtest.Limits{etcdtest.Roomy, {MaxTxnOps: 300}, {MaxTxnOps: 100}} {
		t.Run(fmt.Sprintf("max-txn-ops=%d", lim.MaxTxnOps), func(t *testing.T) {
			s := open(t, etcdtest.Start(t, lim))
			key := func(i int) []byte { return fmt.Appendf(nil, "k%04d", i) }
			// pair p is keys p and keys-1-p: the first and the last of
			// the keys, far apart in any split.
			write := func(first int, val string) error {
				b := s.NewWriteBatch()
				defer b.Close()
				for p := first; p < first+pairsPerTxn; p++ {
					b.Set(key(p), []byte(val))
					b.Set(key(keys-1-p), []byte(val))
				}
				return s.ApplyBatch(b)
			}
			for first := 0; first < keys/2; first += pairsPerTxn {
				if err := write(first, "0"); err != nil {
					t.Fatal(err)
				}
			}
			ctx, cancel := context.WithCancel(t.Context())
			var wg sync.WaitGroup
			wg.Go(func() {
				for gen := 1; ctx.Err() == nil; gen++ {
					if err := write(gen*pairsPerTxn%(keys/2), fmt.Sprint(gen)); err != nil && ctx.Err() == nil {
						t.Error(err)
						return
					}
				}
			})
			defer wg.Wait()
			defer cancel()
			all := make([][]byte, keys)
			for i := range all {
				all[i] = key(i)
			}
			for round := range 20 {
				checkPrefetch(t, s, all, round)
			}
		})
	}
}

// checkPrefetch prefetches all through a fresh iterator (of a snapshot in
// even rounds) and checks that the pairs it read (key i and key
// len(all)-1-i) are equal.
func checkPrefetch(t *testing.T, s *etcd.Store, all [][]byte, round int) {
	t.Helper()
	var v store.View = s
	if round%2 == 0 {
		snap, err := s.OpenSnapshot()
		if err != nil {
			t.Fatal(err)
		}
		defer snap.Close()
		v = snap
	}
	it, err := v.NewIterator(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	if err := it.Prefetch(all); err != nil {
		t.Fatalf("round %d: Prefetch of %d keys: %v", round, len(all), err)
	}
	type read struct {
		val string
		ver uint64
	}
	got := make([]read, len(all))
	for i, k := range all {
		v, found, err := it.Lookup(k, nil)
		if err != nil || !found {
			t.Fatalf("round %d: Lookup(%s) = found %v, %v", round, k, found, err)
		}
		got[i] = read{string(v), it.Version()}
	}
	for i := range len(all) / 2 {
		if a, b := got[i], got[len(all)-1-i]; a != b {
			t.Fatalf("round %d: %s read %+v, %s read %+v: not one revision", round, all[i], a, all[len(all)-1-i], b)
		}
	}
}
