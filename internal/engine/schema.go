package engine

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/protoadapt"

	pb "github.com/protobase/protobase/gen/protobase/v1"
	"github.com/protobase/protobase/internal/keyspace"
	"github.com/protobase/protobase/internal/schema"
)

// ApplySchema plans the transition to the schema in req and, unless
// dry_run, commits it: the new state, the deletion of dropped types and
// indexes, all in one durable storage batch. Index builds start after.
func (e *Engine) ApplySchema(ctx context.Context, req *pb.ApplySchemaRequest) (*pb.ApplySchemaResponse, error) {
	if e.closed.Load() {
		return nil, ErrClosed
	}
	e.schemaMu.Lock()
	defer e.schemaMu.Unlock()

	preq := schema.PlanRequest{Files: req.GetFiles(), AllowDrop: req.GetAllowDrop()}
	old := e.cat.Load().state
	if req.GetDryRun() {
		res, err := schema.Plan(ctx, old, preq, e.countRecords)
		if err != nil {
			return nil, schemaError(err)
		}
		return &pb.ApplySchemaResponse{Plan: res.Plan, Version: old.Version}, nil
	}

	// Plan under writeMu: "has data" must not change between the check and
	// the commit.
	e.writeMu.Lock()
	res, err := schema.Plan(ctx, old, preq, e.countRecords)
	if err != nil {
		e.writeMu.Unlock()
		return nil, schemaError(err)
	}
	if res.State == old || res.State.Version == old.Version {
		e.writeMu.Unlock()
		return &pb.ApplySchemaResponse{Plan: res.Plan, Version: old.Version}, nil
	}
	cat, err := newCatalog(res.State)
	if err != nil {
		e.writeMu.Unlock()
		return nil, fmt.Errorf("compile new schema: %w", err)
	}
	enc, err := res.State.Encode()
	if err != nil {
		e.writeMu.Unlock()
		return nil, fmt.Errorf("encode schema state: %w", err)
	}
	b := e.st.NewBatch()
	defer b.Close()
	b.Set(keySchema, enc)
	for _, t := range res.DroppedTypes {
		p := keyspace.RecordPrefix(t.ID)
		b.DeleteRange(p, keyspace.PrefixEnd(p))
		for _, ix := range t.Indexes {
			p := keyspace.IndexPrefix(ix.ID)
			b.DeleteRange(p, keyspace.PrefixEnd(p))
		}
	}
	for _, ix := range res.DroppedIndexes {
		p := keyspace.IndexPrefix(ix.ID)
		b.DeleteRange(p, keyspace.PrefixEnd(p))
	}
	if err := e.st.Apply(b); err != nil {
		e.writeMu.Unlock()
		return nil, fmt.Errorf("commit schema: %w", err)
	}
	e.cat.Store(cat)
	e.writeMu.Unlock()
	if err := b.Wait(); err != nil {
		return nil, fmt.Errorf("commit schema: %w", err)
	}
	for _, ix := range res.BuildIndexes {
		if t := cat.typeOfIndex(ix.ID); t != nil {
			e.startBuild(t.rt.ID, ix.ID)
		}
	}
	e.log.Info("schema applied", "version", res.State.Version,
		"added", len(res.Plan.TypesAdded), "dropped", len(res.Plan.TypesDropped),
		"indexes_to_build", len(res.BuildIndexes))
	return &pb.ApplySchemaResponse{Plan: res.Plan, Applied: true, Version: res.State.Version}, nil
}

// GetSchema returns the current schema.
func (e *Engine) GetSchema(context.Context) (*pb.GetSchemaResponse, error) {
	s := e.cat.Load().state
	files := make(map[string]string, len(s.Compiled.Files))
	for k, v := range s.Compiled.Files {
		files[k] = v
	}
	return &pb.GetSchemaResponse{
		Files:       files,
		Version:     s.Version,
		Types:       s.Describe(),
		Descriptors: s.FileDescriptorSet(),
	}, nil
}

// countRecords counts the stored records of a type, on a consistent view.
func (e *Engine) countRecords(t *schema.RecordType) (uint64, error) {
	p := keyspace.RecordPrefix(t.ID)
	it, err := e.st.NewIter(p, keyspace.PrefixEnd(p))
	if err != nil {
		return 0, err
	}
	var n uint64
	for it.First(); it.Valid(); it.Next() {
		n++
	}
	if err := it.Error(); err != nil {
		it.Close()
		return 0, err
	}
	return n, it.Close()
}

func (c *catalog) typeOfIndex(id uint32) *recType {
	for _, t := range c.types {
		for _, ix := range t.rt.Indexes {
			if ix.ID == id {
				return t
			}
		}
	}
	return nil
}

// schemaError maps the schema package's errors: a schema that does not
// compile is INVALID_ARGUMENT; a valid schema whose transition is refused
// is FAILED_PRECONDITION. Each problem becomes a field violation.
func schemaError(err error) error {
	var ce *schema.CompileError
	var pe *schema.PlanError
	switch {
	case errors.As(err, &ce):
		return &Error{Code: codes.InvalidArgument, Msg: "schema does not compile:\n" + strings.Join(ce.Errors, "\n"),
			Details: []protoadapt.MessageV1{violations(ce.Errors)}, Err: err}
	case errors.As(err, &pe):
		return &Error{Code: codes.FailedPrecondition, Msg: pe.Error(),
			Details: []protoadapt.MessageV1{violations(pe.Problems)}, Err: err}
	}
	return err
}

func violations(problems []string) *errdetails.BadRequest {
	br := &errdetails.BadRequest{}
	for _, p := range problems {
		field := ""
		if i := strings.Index(p, ": "); i > 0 {
			field = p[:i]
		}
		br.FieldViolations = append(br.FieldViolations, &errdetails.BadRequest_FieldViolation{Field: field, Description: p})
	}
	return br
}
