package server

import (
	"context"
	"errors"
	"fmt"
)

// DropEtcd deletes the whole store under e.Prefix on the etcd cluster e
// names: records, indexes, schema and API keys, in one transaction. No
// server may be serving that prefix. The prefix must be given and be more
// than "/", so that a missing setting never deletes the default store or
// the whole cluster; the lab drops the stores it created with it.
func DropEtcd(ctx context.Context, e EtcdConfig) error {
	if e.Prefix == "" || e.Prefix == "/" {
		return errors.New("drop etcd store: name its prefix (not empty, not \"/\")")
	}
	if err := (Config{DataDir: "-", Store: StoreEtcd, Etcd: e}).validateStorage(); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	st, err := openEtcd(e)
	if err != nil {
		return fmt.Errorf("drop etcd store %s: %w", e.Prefix, err)
	}
	defer st.Close()
	b := st.NewWriteBatch()
	defer b.Close()
	b.DeleteRange([]byte{}, nil) // every key under the prefix
	if err := st.ApplyBatch(b); err != nil {
		return fmt.Errorf("drop etcd store %s: %w", e.Prefix, err)
	}
	if err := b.Wait(); err != nil {
		return fmt.Errorf("drop etcd store %s: %w", e.Prefix, err)
	}
	return nil
}
