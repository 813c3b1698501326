package client

import (
	"context"
	"errors"
	"fmt"
	"io"

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
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	st, err := c.api.Export(ctx, &pb.ExportRequest{Types: types})
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
			if err := ew.Records(ch.Records.GetRecords()); err != nil {
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
}

// ImportResult is what an Import did.
type ImportResult struct {
	// Schema is the plan of applying the file's schema (nothing changed
	// when the server already had it).
	Schema *pb.ApplySchemaResponse
	// Records is how many records the file holds; Written how many this
	// run upserted (Records - Skip).
	Records, Written uint64
}

// Import loads an export file (either format): it applies the file's
// schema (ApplySchema with its sources, so a server with the same schema
// is unchanged), then upserts the records after the first opts.Skip
// through a Writer in batches of opts.Batch. Upserts make a repeated
// record harmless, so resuming from any count at or below the durable one
// never duplicates a record.
func (c *Client) Import(ctx context.Context, r io.Reader, opts ImportOptions) (*ImportResult, error) {
	if opts.Batch <= 0 {
		opts.Batch = 1000
	}
	rd, err := export.NewReader(r, exportCodec)
	if err != nil {
		return nil, err
	}
	res := &ImportResult{}
	if files := rd.Schema().GetFiles(); len(files) > 0 {
		if res.Schema, err = c.ApplySchema(ctx, files, SchemaOptions{}); err != nil {
			return nil, fmt.Errorf("import: apply the file's schema: %w", err)
		}
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
