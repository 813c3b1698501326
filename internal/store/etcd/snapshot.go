package etcd

import (
	"context"
	"fmt"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/protobase/protobase/internal/store"
)

// Snapshot reads the store at one revision. It is safe for concurrent use.
type Snapshot struct {
	s   *Store
	rev int64
}

// Revision returns the etcd revision the snapshot reads at.
func (sn *Snapshot) Revision() int64 { return sn.rev }

// Get reads key at the snapshot's revision.
func (sn *Snapshot) Get(key, dst []byte) ([]byte, bool, error) {
	v, found, _, err := sn.s.get(key, dst, sn.rev)
	return v, found, err
}

// GetVersioned reads key and its mod_revision at the snapshot's revision.
func (sn *Snapshot) GetVersioned(key, dst []byte) ([]byte, uint64, bool, error) {
	v, found, resp, err := sn.s.get(key, dst, sn.rev)
	return v, modRevision(resp, found), found, err
}

// GetLikelyMissing is Get.
func (sn *Snapshot) GetLikelyMissing(key, dst []byte) ([]byte, bool, error) {
	return sn.Get(key, dst)
}

// NewIterator returns an iterator at the snapshot's revision.
func (sn *Snapshot) NewIterator(lower, upper []byte) (store.Iterator, error) {
	return sn.s.newIter(sn.rev, lower, upper), nil
}

// Close does nothing: a revision pins nothing on the client.
func (sn *Snapshot) Close() error { return nil }

// OpenSnapshot fixes a revision with one linearizable read: the snapshot
// sees every batch acknowledged before it was opened.
func (s *Store) OpenSnapshot() (store.ReadSnapshot, error) {
	var resp *clientv3.GetResponse
	err := s.read(func(ctx context.Context) (err error) {
		resp, err = s.cli.Get(ctx, s.prefix, clientv3.WithCountOnly())
		if err != nil {
			return fmt.Errorf("etcd store: open snapshot: %w", s.readErr(err))
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return &Snapshot{s: s, rev: resp.Header.Revision}, nil
}
