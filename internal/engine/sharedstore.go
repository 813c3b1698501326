package engine

import (
	"fmt"

	"github.com/protobase/protobase/internal/schema"
)

// Several engines on one shared store (store.KV.Shared, etcd): each holds
// its own catalog, and the schema key's version says which state it was
// built from (catalog.ver).
//
//   - Every write batch and schema commit expects the schema key at the
//     catalog's version. A batch prepared against a schema another server
//     has since replaced fails that precondition; the writer reloads the
//     schema (refreshSchema) and prepares the batch again, so it is never
//     validated against an old schema.
//   - A batch that names a type this engine does not know, or that fails
//     validation, first checks whether the schema moved on (one version
//     read) and, if so, prepares again: a type applied on another server a
//     moment ago is accepted at once.
//   - A watch on the schema key refreshes the catalog in the background,
//     so index states (READY) reach every server without a write.
//
// On a store that is not shared every version is 0 and none of this costs
// anything: the catalog is only ever replaced by this engine.

// loadSchema reads the schema state and its version.
func (e *Engine) loadSchema() (*catalog, error) {
	raw, ver, found, err := e.st.GetVersioned(keySchema, nil)
	if err != nil {
		return nil, fmt.Errorf("read schema state: %w", err)
	}
	state := schema.Empty()
	if found {
		if state, err = schema.Decode(e.bgCtx, raw); err != nil {
			return nil, err // its message names the schema state
		}
	}
	cat, err := newCatalog(state)
	if err != nil {
		return nil, fmt.Errorf("load schema state: %w", err)
	}
	cat.ver = ver
	return cat, nil
}

// refreshSchema replaces the catalog with the stored schema when another
// server has changed it, and reports whether it did. The caller holds
// writeMu.
func (e *Engine) refreshSchema() (bool, error) {
	if !e.st.Shared() {
		return false, nil
	}
	cur := e.cat.Load()
	_, ver, _, err := e.st.GetVersioned(keySchema, nil)
	if err != nil || ver == cur.ver {
		return false, err
	}
	cat, err := e.loadSchema()
	if err != nil {
		return false, err
	}
	if cat.ver == cur.ver {
		return false, nil
	}
	e.cat.Store(cat)
	e.log.Info("schema changed by another server", "version", cat.state.Version)
	e.startBuilds(cat) // each waits for the build's lock (see startBuild)
	return true, nil
}

// watchSchema keeps the catalog current on a shared store until Close.
func (e *Engine) watchSchema() {
	if !e.st.Shared() {
		return
	}
	e.bg.Add(1)
	go func() {
		defer e.bg.Done()
		e.st.Watch(e.bgCtx, keySchema, func() {
			e.writeMu.Lock()
			_, err := e.refreshSchema()
			e.writeMu.Unlock()
			if err != nil && e.bgCtx.Err() == nil {
				e.log.Warn("refresh the schema after a change on another server", "err", err)
			}
		})
	}()
}

// WatchAPIKeys calls fn after every change of the API keys by another
// server sharing the store (see store.KV.Watch), until Close. On a store
// that is not shared it does nothing.
func (e *Engine) WatchAPIKeys(fn func()) {
	if !e.st.Shared() {
		return
	}
	e.bg.Add(1)
	go func() {
		defer e.bg.Done()
		e.st.Watch(e.bgCtx, keyAPIKey, fn)
	}()
}
