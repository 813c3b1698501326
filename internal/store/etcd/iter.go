package etcd

import (
	"bytes"
	"context"
	"slices"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// iter is a store.Iterator over etcd: it fetches pages of up to pageSize
// keys at one revision, ascending or descending, and moves within a page
// without a request. Changing direction fetches a page from the current
// key. It is not safe for concurrent use.
//
// Invariant: when valid, kvs[idx] is the current key-value and key is its
// key without the prefix; desc says the page runs in descending key order,
// more that keys beyond the page's end remain in that direction.
type iter struct {
	s            *Store
	rev          int64 // the revision read at; 0 until the first read
	lower, upper []byte

	// pre holds the values Prefetch read (absent keys too).
	pre prefetched

	kvs   []*mvccpb.KeyValue
	idx   int
	desc  bool
	more  bool
	valid bool
	key   []byte
	err   error
	// looked is the version of the key the last Lookup found (0: none).
	looked uint64
}

func (s *Store) newIter(rev int64, lower, upper []byte) *iter {
	it := &iter{s: s, rev: rev}
	it.SetBounds(lower, upper)
	return it
}

// bounds returns the etcd keys of [lower, upper).
func (it *iter) bounds() (lo, hi string) {
	lo = it.s.prefix
	if it.lower != nil {
		lo = it.s.Key(it.lower)
	}
	return lo, it.s.rangeEnd(it.upper)
}

// fetch reads the page of [from, to) nearest from (ascending) or to
// (descending) and positions on its first entry. The store's commit
// markers (commit.go) are not the engine's: a page is read without them,
// and one that held nothing else is followed by the next.
func (it *iter) fetch(from, to string, desc bool) bool {
	it.kvs, it.idx, it.desc, it.more, it.valid = nil, 0, desc, false, false
	for it.err == nil && from < to {
		opts := []clientv3.OpOption{clientv3.WithRange(to), clientv3.WithLimit(it.s.pageSize)}
		if it.rev != 0 {
			opts = append(opts, clientv3.WithRev(it.rev))
		}
		if desc {
			opts = append(opts, clientv3.WithSort(clientv3.SortByKey, clientv3.SortDescend))
		}
		var resp *clientv3.GetResponse
		err := it.s.read(func(ctx context.Context) (err error) {
			resp, err = it.s.cli.Get(ctx, from, opts...)
			if err != nil {
				return it.s.readErr(err)
			}
			return nil
		})
		if err != nil {
			it.err = err
			return false
		}
		if it.rev == 0 {
			it.rev = resp.Header.Revision
		}
		n := len(it.s.prefix)
		marker := func(kv *mvccpb.KeyValue) bool { return isMarker(kv.Key[n:]) }
		kvs := resp.Kvs
		if slices.ContainsFunc(kvs, marker) {
			kvs = slices.DeleteFunc(slices.Clone(kvs), marker)
		}
		if len(kvs) > 0 || !resp.More {
			it.kvs, it.more = kvs, resp.More
			return it.settle()
		}
		if last := string(resp.Kvs[len(resp.Kvs)-1].Key); desc {
			to = last
		} else {
			from = last + "\x00"
		}
	}
	return false
}

func (it *iter) settle() bool {
	it.looked = 0
	it.valid = it.idx < len(it.kvs)
	if it.valid {
		it.key = it.kvs[it.idx].Key[len(it.s.prefix):]
	}
	return it.valid
}

func (it *iter) First() bool {
	lo, hi := it.bounds()
	return it.fetch(lo, hi, false)
}

func (it *iter) Last() bool {
	lo, hi := it.bounds()
	return it.fetch(lo, hi, true)
}

func (it *iter) SeekGE(key []byte) bool {
	lo, hi := it.bounds()
	return it.fetch(max(lo, it.s.Key(key)), hi, false)
}

func (it *iter) SeekLT(key []byte) bool {
	lo, hi := it.bounds()
	return it.fetch(lo, min(hi, it.s.Key(key)), true)
}

func (it *iter) Next() bool {
	if !it.valid {
		return false
	}
	if !it.desc {
		it.idx++
		if it.idx < len(it.kvs) || !it.more {
			return it.settle()
		}
	}
	_, hi := it.bounds()
	return it.fetch(it.s.Key(it.key)+"\x00", hi, false)
}

func (it *iter) Prev() bool {
	if !it.valid {
		return false
	}
	if it.desc {
		it.idx++
		if it.idx < len(it.kvs) || !it.more {
			return it.settle()
		}
	}
	lo, _ := it.bounds()
	return it.fetch(lo, it.s.Key(it.key), true)
}

func (it *iter) Valid() bool { return it.valid }

func (it *iter) Key() []byte { return it.key }

func (it *iter) Value() []byte {
	if !it.valid {
		return nil
	}
	return it.kvs[it.idx].Value
}

// Version is the mod_revision of the current key, or of the key the last
// Lookup found.
func (it *iter) Version() uint64 {
	if !it.valid {
		return it.looked
	}
	return uint64(it.kvs[it.idx].ModRevision)
}

// SetBounds copies the bounds and unpositions the iterator; its revision
// stays.
func (it *iter) SetBounds(lower, upper []byte) {
	it.lower, it.upper = clone(lower), clone(upper)
	it.kvs, it.valid = nil, false
}

// Lookup reads key at the iterator's revision (fixing it if unset), from
// what Prefetch read when it holds the key.
func (it *iter) Lookup(key, dst []byte) ([]byte, bool, error) {
	it.valid, it.looked = false, 0
	if f, ok := it.pre.get(key); ok {
		it.looked = f.version
		return append(dst[:0], f.val...), f.found, nil
	}
	v, found, resp, err := it.s.get(key, dst, it.rev)
	if err != nil {
		return dst[:0], false, err
	}
	if it.rev == 0 {
		it.rev = resp.Header.Revision
	}
	it.looked = modRevision(resp, found)
	return v, found, nil
}

func (it *iter) Error() error { return it.err }

func (it *iter) Close() error {
	it.kvs, it.valid = nil, false
	it.pre.reset(nil)
	return it.err
}

func clone(b []byte) []byte {
	if b == nil {
		return nil
	}
	return bytes.Clone(b)
}
