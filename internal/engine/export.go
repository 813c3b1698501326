package engine

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"

	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/anypb"

	pb "github.com/protobase/protobase/gen/protobase/v1"
	"github.com/protobase/protobase/internal/apierror"
	"github.com/protobase/protobase/internal/keyspace"
	"github.com/protobase/protobase/internal/record"
	"github.com/protobase/protobase/internal/schema"
	"github.com/protobase/protobase/internal/store"
)

// ExportOptions say what an Export reads and who may see it.
type ExportOptions struct {
	// Types are the record types (full names) to export; empty: every
	// type Allows admits.
	Types []string
	// Allows reports whether the caller may read a type (nil: every type).
	// A type named in Types that it refuses is PERMISSION_DENIED.
	Allows func(typeName string) bool
	// Filter, when set, narrows the schema sent to what the caller may see.
	Filter func(*pb.GetSchemaResponse) *pb.GetSchemaResponse
	// Versions sends each record's version beside it
	// (ExportRecords.versions), read at the export's snapshot.
	Versions bool
}

// Export sends the schema, then every record of the chosen types in
// batches bounded like Scan's responses (MaxResultRecords, MaxResultBytes),
// then the end with the count.
// Schema and records are read from one snapshot: the schema is decoded
// from the snapshot itself rather than taken from the catalog, so the two
// agree even when a schema change (or, on a shared store, another server)
// commits meanwhile. Each batch holds its bytes of the result budget (at
// least its records') while it is built, and hands them to send with it
// (h, which send releases once it no longer holds the chunk: a transport
// that queues it holds them until written); the schema and end chunks
// hold nothing.
func (e *Engine) Export(ctx context.Context, opts ExportOptions, send func(c *pb.ExportChunk, h Hold) error) (err error) {
	defer func() { err = storeError(err) }()
	snap, err := e.st.OpenSnapshot()
	if err != nil {
		return err
	}
	defer snap.Close()
	state := schema.Empty()
	if raw, found, err := snap.Get(keySchema, nil); err != nil {
		return fmt.Errorf("export: read schema: %w", err)
	} else if found {
		if state, err = schema.Decode(ctx, raw); err != nil {
			return fmt.Errorf("export: decode schema: %w", err)
		}
	}
	types, err := exportTypes(state, opts)
	if err != nil {
		return err
	}
	if err := send(&pb.ExportChunk{Chunk: &pb.ExportChunk_Schema{Schema: exportSchema(state, types, opts.Filter)}}, Hold{}); err != nil {
		return err
	}
	var total uint64
	for _, t := range types {
		n, err := e.exportType(ctx, snap, t, opts.Versions, send)
		if err != nil {
			return fmt.Errorf("export %s: %w", t.Name, err)
		}
		total += n
	}
	return send(&pb.ExportChunk{Chunk: &pb.ExportChunk_End{End: &pb.ExportEnd{Records: total}}}, Hold{})
}

// exportTypes resolves the requested types against the snapshot's schema.
func exportTypes(state *schema.State, opts ExportOptions) ([]*schema.RecordType, error) {
	allows := opts.Allows
	if allows == nil {
		allows = func(string) bool { return true }
	}
	var out []*schema.RecordType
	if len(opts.Types) == 0 {
		for name, t := range state.Types {
			if allows(string(name)) {
				out = append(out, t)
			}
		}
		slices.SortFunc(out, func(a, b *schema.RecordType) int {
			return compareStrings(string(a.Name), string(b.Name))
		})
		return out, nil
	}
	seen := map[string]bool{}
	for i, name := range opts.Types {
		field := "types[" + itoa(i) + "]"
		if !allows(name) {
			return nil, &apierror.Error{Code: apierror.PermissionDenied, Msg: "this key may not read type " + name, Field: field}
		}
		t, ok := state.Types[protoreflect.FullName(name)]
		if !ok {
			return nil, &apierror.Error{Code: apierror.NotFound, Msg: "no record type " + name, Field: field}
		}
		if !seen[name] {
			seen[name] = true
			out = append(out, t)
		}
	}
	return out, nil
}

func compareStrings(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// exportSchema is the schema chunk: the snapshot's sources and compiled
// descriptors, narrowed by filter, naming the types whose records follow.
func exportSchema(state *schema.State, types []*schema.RecordType, filter func(*pb.GetSchemaResponse) *pb.GetSchemaResponse) *pb.ExportSchema {
	full := &pb.GetSchemaResponse{
		Files:       map[string]string{},
		Version:     state.Version,
		Types:       state.Describe(),
		Descriptors: state.FileDescriptorSet(),
	}
	for k, v := range state.Compiled.Files {
		full.Files[k] = v
	}
	if filter != nil {
		full = filter(full)
	}
	out := &pb.ExportSchema{Files: full.Files, Version: full.Version, Descriptors: full.Descriptors}
	for _, t := range types {
		out.Types = append(out.Types, string(t.Name))
	}
	return out
}

// exportType sends one type's records in primary-key order, with their
// versions when versions is set, and returns how many it sent.
func (e *Engine) exportType(ctx context.Context, snap store.View, t *schema.RecordType, versions bool,
	send func(*pb.ExportChunk, Hold) error) (uint64, error) {
	url := "type.googleapis.com/" + string(t.Name)
	p := keyspace.RecordPrefix(t.ID)
	end := keyspace.PrefixEnd(p)
	it, err := snap.NewIterator(p, end)
	if err != nil {
		return 0, err
	}
	var n uint64
	defer func() {
		if it != nil {
			it.Close()
		}
	}()
	exp, err := exportExpiry(t)
	if err != nil {
		return 0, err
	}
	now := e.now()
	maxRecs, maxBytes := e.opts.MaxResultRecords, e.opts.MaxResultBytes
	var batch *pb.ExportRecords
	var vals []byte
	size := 0 // record bytes in batch
	held := int64(0)
	defer func() { e.results.Release(held) }()
	flush := func() error {
		if batch == nil {
			return nil
		}
		c, h := &pb.ExportChunk{Chunk: &pb.ExportChunk_Records{Records: batch}}, Hold{e: e, n: held}
		batch, vals, size, held = nil, nil, 0, 0
		return send(c, h)
	}
	for it.First(); it.Valid(); it.Next() {
		v := it.Value()
		if exp != nil && exp.expired(v, now) {
			continue
		}
		if batch != nil && (len(batch.Records) >= maxRecs || size+len(v) > maxBytes) {
			if err := flush(); err != nil {
				return n, err
			}
		}
		// A chunk reserves a full chunk's bytes, or twice its records'
		// when larger (the records, and their encoding while the send
		// waits for the client: both live until it returns), before the
		// record is copied in.
		need := 2 * int64(size+len(v)+len(url))
		if batch == nil {
			need = max(need, min(int64(maxBytes), e.opts.MaxResultBufferBytes))
		}
		if need > held {
			if it, v, err = e.coverExport(ctx, snap, it, end, &held, need, batch == nil); err != nil {
				return n, err
			}
		}
		if batch == nil {
			batch = &pb.ExportRecords{}
			vals = make([]byte, 0, min(maxBytes, 256<<10))
		}
		if cap(vals)-len(vals) < len(v) {
			vals = make([]byte, 0, max(len(v), min(maxBytes, 256<<10)))
		}
		start := len(vals)
		vals = append(vals, v...)
		size += len(v)
		n++
		batch.Records = append(batch.Records, &anypb.Any{TypeUrl: url, Value: vals[start:len(vals):len(vals)]})
		if versions {
			v := it.Version()
			if err := e.awaitDurable(ctx, v); err != nil {
				return n, err
			}
			batch.Versions = append(batch.Versions, v)
		}
	}
	if err := it.Error(); err != nil {
		return n, err
	}
	return n, flush()
}

// coverExport makes the chunk being built hold need bytes of the result
// budget (*held), for the record at it's position, and returns the
// iterator and the record to go on with: the same, or, when it had to
// wait for room (waitExportRoom), new ones at the same record.
func (e *Engine) coverExport(ctx context.Context, snap store.View, it store.Iterator, end []byte, held *int64, need int64, empty bool) (store.Iterator, []byte, error) {
	if err := e.overBudget(need); err != nil {
		return it, nil, err
	}
	if e.results.TryAcquire(need - *held) {
		*held = need
		return it, it.Value(), nil
	}
	it, err := e.waitExportRoom(ctx, snap, it, end, held, need, empty)
	if err != nil {
		return nil, nil, err
	}
	return it, it.Value(), nil // the same record, read again at the snapshot
}

// waitExportRoom waits until need bytes of the result budget are held
// (*held), for the record at it's position: it closes it meanwhile, so
// that the record's bytes (a block of the store, tens of MiB for a large
// record) are not held while it waits, and returns an iterator at the same
// record of snap. A chunk still empty (empty) gives back what it held
// while it waits.
func (e *Engine) waitExportRoom(ctx context.Context, snap store.View, it store.Iterator, end []byte, held *int64, need int64, empty bool) (store.Iterator, error) {
	key := bytes.Clone(it.Key())
	it.Close()
	if empty {
		e.results.Release(*held)
		*held = 0
	}
	if err := e.results.Acquire(ctx, need-*held); err != nil {
		return nil, err
	}
	*held = need
	it, err := snap.NewIterator(key, end)
	if err != nil {
		return nil, err
	}
	if !it.First() || !bytes.Equal(it.Key(), key) {
		err = errors.Join(it.Error(), fmt.Errorf("export: record %x left the snapshot", key))
		it.Close()
		return nil, err
	}
	return it, nil
}

// exportExpiry reads the expiry of t's records, nil when they never
// expire: an export holds the records a read would return.
func exportExpiry(t *schema.RecordType) (*expiry, error) {
	if t.TTL == nil {
		return nil, nil
	}
	rec, err := record.Compile(t.Desc)
	if err != nil {
		return nil, err
	}
	return newExpiry(rec, t.TTL)
}
