package server

import (
	"context"
	"errors"
	"fmt"

	"github.com/protobase/protobase/internal/store"
)

// dropChunk is the most keys one delete transaction of DropEtcd removes:
// etcd applies a transaction in one step on every member, and a delete of
// hundreds of thousands of keys outlasts its request timeout. (A variable
// so that a test can make chunks small.)
var dropChunk = 5000

// DropEtcd deletes the whole store under e.Prefix on the etcd cluster e
// names: records, indexes, schema and API keys, in transactions of at most
// dropChunk keys, in key order. No server may be serving that prefix (a
// failure part way leaves a store that only a further DropEtcd should
// touch). The prefix must be given and be more than "/", so that a missing
// setting never deletes the default store or the whole cluster; the lab
// drops the stores it created with it.
func DropEtcd(ctx context.Context, e EtcdConfig) error {
	if e.Prefix == "" || e.Prefix == "/" {
		return errors.New("drop etcd store: name its prefix (not empty, not \"/\")")
	}
	if err := (Config{DataDir: "-", Store: StoreEtcd, Etcd: e}).validateStorage(); err != nil {
		return err
	}
	st, err := openEtcd(e, nil)
	if err != nil {
		return fmt.Errorf("drop etcd store %s: %w", e.Prefix, err)
	}
	defer st.Close()
	for {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("drop etcd store %s: %w", e.Prefix, err)
		}
		end, err := nthKey(st, dropChunk)
		if err != nil {
			return fmt.Errorf("drop etcd store %s: %w", e.Prefix, err)
		}
		if err := deleteTo(st, end); err != nil {
			return fmt.Errorf("drop etcd store %s: %w", e.Prefix, err)
		}
		if end == nil {
			return nil
		}
	}
}

// nthKey is the n-th key of the store from its start (nil when it holds
// fewer): the end of the next chunk to delete.
func nthKey(st store.KV, n int) ([]byte, error) {
	it, err := st.NewIterator(nil, nil)
	if err != nil {
		return nil, err
	}
	defer it.Close()
	i := 0
	for ok := it.First(); ok; ok = it.Next() {
		if i == n {
			return append([]byte(nil), it.Key()...), nil
		}
		i++
	}
	return nil, it.Error()
}

// deleteTo deletes every key before end (nil: every key) in one batch.
func deleteTo(st store.KV, end []byte) error {
	b := st.NewWriteBatch()
	defer b.Close()
	b.DeleteRange([]byte{}, end)
	if err := st.ApplyBatch(b); err != nil {
		return err
	}
	return b.Wait()
}
