package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	pb "github.com/protobase/protobase/gen/protobase/v1"
	"github.com/protobase/protobase/internal/export"
)

// ExportFormat is the encoding of an export file.
type ExportFormat = export.Format

// The export formats: binary (length-delimited protobuf, the default; the
// records keep their stored bytes) and JSON lines.
const (
	ExportBinary = export.Binary
	ExportJSON   = export.JSON
)

// exportCodec converts records of an export file's schema to and from
// JSON with Types.
func exportCodec(s *pb.ExportSchema) (export.Codec, error) {
	resp := &pb.GetSchemaResponse{Files: s.GetFiles(), Version: s.GetVersion(), Descriptors: s.GetDescriptors()}
	for _, t := range s.GetTypes() {
		resp.Types = append(resp.Types, &pb.RecordType{Name: t})
	}
	return NewTypes(resp)
}

// Export writes the schema and every record of types (none: every type
// the key may read) to w in format, all read by the server at one
// snapshot, and returns how many records it wrote. w holds a partial
// file when it fails.
func (c *Client) Export(ctx context.Context, types []string, w io.Writer, format ExportFormat) (uint64, error) {
	return c.export(ctx, &pb.ExportRequest{Types: types}, w, format)
}

// ExportVersioned is Export that also writes each record's version, as
// the server read it at the export's snapshot: beside each record in the
// file (see internal/export). An import does not use them: its writes
// get versions of their own.
func (c *Client) ExportVersioned(ctx context.Context, types []string, w io.Writer, format ExportFormat) (uint64, error) {
	return c.export(ctx, &pb.ExportRequest{Types: types, Versions: true}, w, format)
}

func (c *Client) export(ctx context.Context, req *pb.ExportRequest, w io.Writer, format ExportFormat) (uint64, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	st, err := c.api.Export(ctx, req)
	if err != nil {
		return 0, asError(err)
	}
	var ew *export.Writer
	for {
		chunk, err := st.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return 0, asError(err)
		}
		switch ch := chunk.GetChunk().(type) {
		case *pb.ExportChunk_Schema:
			if ew != nil {
				return 0, errors.New("export: the server sent a second schema")
			}
			if ew, err = export.NewWriter(w, format, ch.Schema, exportCodec); err != nil {
				return 0, err
			}
		case *pb.ExportChunk_Records:
			if ew == nil {
				return 0, errors.New("export: the server sent records before the schema")
			}
			recs, vers := ch.Records.GetRecords(), ch.Records.GetVersions()
			if req.GetVersions() && len(vers) != len(recs) {
				return ew.Count(), fmt.Errorf("export: the server sent %d versions for %d records "+
					"(a server of a release before record versions sends none)", len(vers), len(recs))
			}
			if err := ew.Records(recs, vers); err != nil {
				return ew.Count(), err
			}
		case *pb.ExportChunk_End:
			if ew == nil {
				return 0, errors.New("export: the server ended before the schema")
			}
			if ch.End.GetRecords() != ew.Count() {
				return 0, fmt.Errorf("export: the server's end counts %d records, the stream held %d", ch.End.GetRecords(), ew.Count())
			}
			return ew.Count(), ew.Close()
		default:
			return 0, fmt.Errorf("export: unknown chunk %T", ch)
		}
	}
	return 0, errors.New("export: the stream ended before its end")
}

// importCheckpointBatches is how often (in batches) Import waits for
// everything sent to be durable, so that the progress it reports moves on
// at least that often: one fsync wait per so many batches costs little,
// and bounds what a rerun after a crash sends again.
const importCheckpointBatches = 16

// ImportSchema is what Import does with the schema an export file holds
// when it differs from the server's.
type ImportSchema int

// The ways Import treats the file's schema.
const (
	// ImportSchemaMatch (the default) imports only when the server's
	// schema is the file's, or the server has none (it then takes the
	// file's): a file whose schema differs is refused before any record
	// is sent, with a *SchemaMismatchError holding the plan.
	ImportSchemaMatch ImportSchema = iota
	// ImportSchemaApply applies the file's schema first, whatever the
	// plan (ImportResult.Schema): the server's types and indexes that the
	// file lacks are dropped (the indexes named in allow_drop), except
	// that dropping a type with its records is still refused (no type is
	// named in allow_drop).
	ImportSchemaApply
	// ImportSchemaKeep leaves the server's schema as it is: each record
	// must then be valid under it, and one that is not (a type it lacks,
	// an unknown field, a value its unique index holds for another record)
	// stops the import.
	ImportSchemaKeep
)

// SchemaMismatchError is Import's refusal of a file whose schema differs
// from the server's (ImportSchemaMatch). Nothing was changed or written.
type SchemaMismatchError struct {
	// Plan is what applying the file's schema would do to the server's
	// (a dry run of ApplySchema).
	Plan *pb.SchemaPlan
}

func (e *SchemaMismatchError) Error() string {
	return "import: the file's schema differs from the server's (applying it would " + strings.Join(PlanSummary(e.Plan), ", ") +
		"); nothing was imported: apply the file's schema (ImportSchemaApply, protobase import --apply-schema) " +
		"or import under the server's schema (ImportSchemaKeep, --keep-schema)"
}

// PlanSummary names each change of a schema plan in a few words ("drop
// unique index shop.User.email_unique (email)"), type and index changes
// first; an empty plan has none.
func PlanSummary(p *pb.SchemaPlan) []string {
	var out []string
	for _, t := range p.GetTypesAdded() {
		out = append(out, "add type "+t)
	}
	for _, t := range p.GetTypesChanged() {
		out = append(out, "change type "+t.GetType()+" ("+strings.Join(t.GetChanges(), "; ")+")")
	}
	for _, t := range p.GetTypesDropped() {
		out = append(out, fmt.Sprintf("drop type %s (%d records)", t.GetType(), t.GetRecords()))
	}
	index := func(verb string, ix *pb.IndexChange) string {
		kind := "index "
		if ix.GetUnique() {
			kind = "unique index "
		}
		return verb + " " + kind + ix.GetType() + "." + ix.GetIndex() + " (" + strings.Join(ix.GetFields(), ", ") + ")"
	}
	for _, ix := range p.GetIndexesAdded() {
		out = append(out, index("add", ix))
	}
	for _, ix := range p.GetIndexesDropped() {
		out = append(out, index("drop", ix))
	}
	for _, f := range p.GetFilesAdded() {
		out = append(out, "add file "+f)
	}
	for _, f := range p.GetFilesChanged() {
		out = append(out, "change file "+f)
	}
	for _, f := range p.GetFilesRemoved() {
		out = append(out, "remove file "+f)
	}
	return out
}

// ImportOptions control Import.
type ImportOptions struct {
	// Batch is the records of each write batch (default 1000).
	Batch int
	// Skip is how many of the file's records an earlier run already made
	// durable (its last Progress); they are read and not sent again.
	Skip uint64
	// Progress, when set, is called with the count of the file's records
	// (Skip included) known durable, each time it grows. A run that
	// fails resumes from the last count it was given.
	Progress func(durable uint64) error
	// Schema says what to do when the file's schema differs from the
	// server's (default ImportSchemaMatch: refuse).
	Schema ImportSchema
}

// ImportResult is what an Import did.
type ImportResult struct {
	// Schema is the plan of the file's schema against the server's: what
	// was applied when Applied is set, else the dry run that found no
	// change (nil with ImportSchemaKeep, or a file without schema).
	Schema *pb.ApplySchemaResponse
	// Records is how many records the file holds; Written how many this
	// run upserted (Records - Skip).
	Records, Written uint64
}

// Import loads an export file (either format): it checks the file's
// schema against the server's (see ImportSchema), then upserts the records
// after the first opts.Skip through a Writer in batches of opts.Batch.
// Upserts make a repeated record harmless, so resuming from any count at
// or below the durable one never duplicates a record.
//
// An import that fails part way leaves the batches made durable before
// the failure applied (and the schema, if it applied one); the last
// Progress count says how many of the file's records they hold.
func (c *Client) Import(ctx context.Context, r io.Reader, opts ImportOptions) (*ImportResult, error) {
	if opts.Batch <= 0 {
		opts.Batch = 1000
	}
	rd, err := export.NewReader(r, exportCodec)
	if err != nil {
		return nil, err
	}
	res := &ImportResult{}
	if res.Schema, err = c.importSchema(ctx, rd.Schema().GetFiles(), opts.Schema); err != nil {
		return nil, err
	}
	for res.Records < opts.Skip {
		if _, err := rd.Next(); err != nil {
			if errors.Is(err, io.EOF) {
				return nil, fmt.Errorf("import: the progress count %d is past the file's %d records", opts.Skip, res.Records)
			}
			return nil, err
		}
		res.Records++
	}
	schema, err := c.GetSchema(ctx)
	if err != nil {
		return nil, err
	}
	w, err := c.NewWriter(ctx, Upsert, WriterOptions{BatchRecords: opts.Batch, Limits: LimitsOf(schema)})
	if err != nil {
		return nil, err
	}
	defer w.Close() //nolint:errcheck // closed below on success
	reported := opts.Skip
	report := func(n uint64) error {
		if n <= reported || opts.Progress == nil {
			return nil
		}
		reported = n
		return opts.Progress(n)
	}
	// fail records what is durable so far, so that a rerun skips it.
	fail := func(err error) (*ImportResult, error) {
		return res, errors.Join(err, report(opts.Skip+w.Durable()))
	}
	batch := uint64(opts.Batch)
	for {
		a, err := rd.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return fail(err)
		}
		if err := w.WriteAny(a); err != nil {
			return fail(fmt.Errorf("import: record %d: %w", res.Records, err))
		}
		res.Records++
		res.Written++
		if res.Written%(batch*importCheckpointBatches) == 0 {
			if err := w.Flush(); err != nil {
				return fail(fmt.Errorf("import: %w", err))
			}
		}
		if res.Written%batch == 0 {
			if err := report(opts.Skip + w.Durable()); err != nil {
				return fail(err)
			}
		}
	}
	if _, err := w.Close(); err != nil {
		return fail(fmt.Errorf("import: %w", err))
	}
	return res, report(opts.Skip + res.Written)
}

// importSchema treats the file's schema as mode says, before any record
// is sent: a dry run of ApplySchema plans it against the server's, and an
// empty plan means they are the same.
func (c *Client) importSchema(ctx context.Context, files map[string]string, mode ImportSchema) (*pb.ApplySchemaResponse, error) {
	if mode == ImportSchemaKeep || len(files) == 0 {
		return nil, nil
	}
	// The file's schema replaces the server's whole, so an index the file
	// lacks is dropped: the plan lists it, the refusal of ImportSchemaMatch
	// shows it, and ImportSchemaApply drops it as the plan says. A type is
	// never named, so dropping one with its records stays refused.
	cur, err := c.GetSchema(ctx)
	if err != nil {
		return nil, fmt.Errorf("import: get the server's schema: %w", err)
	}
	var indexes []string
	for _, t := range cur.GetTypes() {
		for _, ix := range t.GetIndexes() {
			indexes = append(indexes, t.GetName()+"."+ix.GetName())
		}
	}
	plan, err := c.ApplySchema(ctx, files, SchemaOptions{DryRun: true, AllowDrop: indexes})
	if err != nil {
		return nil, fmt.Errorf("import: plan the file's schema: %w", err)
	}
	if len(PlanSummary(plan.GetPlan())) == 0 {
		return plan, nil
	}
	if mode != ImportSchemaApply {
		// A server without any schema has nothing the file's could drop
		// or change: it takes the file's.
		if len(cur.GetFiles()) > 0 {
			return nil, &SchemaMismatchError{Plan: plan.GetPlan()}
		}
	}
	applied, err := c.ApplySchema(ctx, files, SchemaOptions{AllowDrop: indexes})
	if err != nil {
		return nil, fmt.Errorf("import: apply the file's schema: %w", err)
	}
	return applied, nil
}
