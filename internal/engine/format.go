package engine

import (
	"fmt"

	"github.com/protobase/protobase/internal/schema"
)

// markFormat rewrites a schema state stored in an earlier format in the
// current one (schema.Format), once, when the engine opens a store that
// is not Shared, before any record is written. The Pebble store keeps each
// record's version in a header in front of the record's bytes, which
// releases before versions would return to clients as part of the record;
// they check the schema state's format at open and refuse the store once
// it is rewritten. A store without a schema holds no records and is left
// alone: its first schema is written in the current format.
//
// A Shared store (etcd) keeps no header, its versions are revisions, so
// nothing there needs refusing: its state takes the current format at the
// next schema change, which servers of those releases sharing the cluster
// then cannot load (docs/operations.md, "Upgrades and compatibility").
func (e *Engine) markFormat(cat *catalog) error {
	if e.st.Shared() {
		return nil
	}
	raw, found, err := e.st.Get(keySchema, nil)
	if err != nil {
		return fmt.Errorf("read schema state: %w", err)
	}
	if !found {
		return nil
	}
	f, err := schema.StoredFormat(raw)
	if err != nil || f >= schema.Format {
		return err
	}
	enc, err := cat.state.Encode()
	if err != nil {
		return fmt.Errorf("encode schema state: %w", err)
	}
	b := e.st.NewWriteBatch()
	defer b.Close()
	b.Set(keySchema, enc)
	if err := e.st.ApplyBatch(b); err != nil {
		return fmt.Errorf("rewrite the schema state in format %d: %w", schema.Format, storeError(err))
	}
	if err := b.Wait(); err != nil {
		return fmt.Errorf("rewrite the schema state in format %d: %w", schema.Format, err)
	}
	e.log.Info("schema state rewritten in the current format", "from", f, "to", schema.Format)
	return nil
}
