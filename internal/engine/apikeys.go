package engine

import (
	"fmt"

	"github.com/protobase/protobase/internal/keyspace"
)

// API key records live in the meta space under keyspace.APIKeyPrefix, one
// key per API key name; the record is encoded by internal/auth and opaque
// here.

func apiKeyKey(name string) []byte {
	return append(append(make([]byte, 0, len(keyAPIKey)+len(name)), keyAPIKey...), name...)
}

// APIKeys returns every stored API key record by name.
func (e *Engine) APIKeys() (map[string][]byte, error) {
	if e.closed.Load() {
		return nil, ErrClosed
	}
	it, err := e.st.NewIterator(keyAPIKey, keyspace.PrefixEnd(keyAPIKey))
	if err != nil {
		return nil, fmt.Errorf("read api keys: %w", err)
	}
	out := map[string][]byte{}
	for it.First(); it.Valid(); it.Next() {
		name := string(it.Key()[len(keyAPIKey):])
		out[name] = append([]byte(nil), it.Value()...)
	}
	if err := it.Error(); err != nil {
		_ = it.Close()
		return nil, fmt.Errorf("read api keys: %w", err)
	}
	if err := it.Close(); err != nil {
		return nil, fmt.Errorf("read api keys: %w", err)
	}
	return out, nil
}

// CreateAPIKey stores rec under name unless a record of that name exists
// (created is false then). It returns once the record is durable.
func (e *Engine) CreateAPIKey(name string, rec []byte) (created bool, err error) {
	return e.changeAPIKey(name, rec, false)
}

// DeleteAPIKey deletes the record of name, if any, and returns once the
// deletion is durable.
func (e *Engine) DeleteAPIKey(name string) (existed bool, err error) {
	return e.changeAPIKey(name, nil, true)
}

// changeAPIKey sets (when absent) or deletes one key record. writeMu makes
// the existence check and the apply one step. Key changes are made durable
// even with Options.Sync off (by a flush): a revocation must survive a
// crash.
func (e *Engine) changeAPIKey(name string, rec []byte, del bool) (bool, error) {
	if e.closed.Load() {
		return false, ErrClosed
	}
	k := apiKeyKey(name)
	b := e.st.NewWriteBatch()
	defer b.Close()
	e.writeMu.Lock()
	_, found, err := b.Read(k, nil, false)
	if err != nil {
		e.writeMu.Unlock()
		return false, fmt.Errorf("read api key: %w", err)
	}
	if del != found { // create over an existing key, or delete of a missing one
		e.writeMu.Unlock()
		return false, nil
	}
	if del {
		b.Delete(k)
	} else {
		b.Set(k, rec)
	}
	err = e.st.ApplyBatch(b)
	e.writeMu.Unlock()
	if err != nil {
		return false, fmt.Errorf("store api key: %w", storeError(err))
	}
	if err := b.Wait(); err != nil {
		return false, fmt.Errorf("store api key: %w", err)
	}
	if !e.st.SyncWrites() {
		if err := e.st.Flush(); err != nil {
			return false, fmt.Errorf("store api key: %w", err)
		}
	}
	return true, nil
}
