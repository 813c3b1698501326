package engine

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strings"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/protobuf/protoadapt"

	pb "github.com/protobase/protobase/gen/protobase/v1"
	"github.com/protobase/protobase/internal/apierror"
	"github.com/protobase/protobase/internal/keyspace"
	"github.com/protobase/protobase/internal/schema"
	"github.com/protobase/protobase/internal/store"
)

// testHookPlanned, when set by a test, runs after ApplySchema has compiled
// and planned, before it takes writeMu to commit.
var testHookPlanned func()

// testHookCommitting, when set by a test, runs when commitSchema has read
// its preconditions under writeMu, just before it applies the batch.
var testHookCommitting func()

// applyAttempts bounds how many times ApplySchema plans again when records
// arrive in a type it counted as empty, or expire under a ttl it replaces.
const applyAttempts = 3

// ApplySchema plans the transition to the schema in req and, unless
// dry_run, commits it: the new state, the deletion of dropped types and
// indexes, all in one durable storage batch. Index builds start after.
//
// Compiling and counting records take time (seconds for thousands of files
// or millions of records), so they run under schemaMu only, while writes go
// on. The plan depends on the records only through which types are empty;
// under writeMu, before committing, ApplySchema checks that every type it
// counted as empty still is, and plans again otherwise (a type that gained
// records may refuse the change, or need its new indexes built). A change
// of a type's ttl first reaps the records expired under the old one, and
// checks there too that none is left (ttlchange.go).
func (e *Engine) ApplySchema(ctx context.Context, req *pb.ApplySchemaRequest) (*pb.ApplySchemaResponse, error) {
	return e.ApplySchemaApproved(ctx, req, nil)
}

// ApplySchemaApproved is ApplySchema with approve, when not nil, asked
// about each plan before it is answered (a dry run) or committed; its
// error refuses the change, and is returned as it is. It is asked again
// for each plan made again, so the plan it approves is the one that
// commits: a scoped key's check (auth.CheckPlan) cannot be passed by a
// change another key makes between a dry run and the apply.
func (e *Engine) ApplySchemaApproved(ctx context.Context, req *pb.ApplySchemaRequest, approve func(*pb.SchemaPlan) error) (*pb.ApplySchemaResponse, error) {
	if e.closed.Load() {
		return nil, ErrClosed
	}
	e.schemaMu.Lock()
	defer e.schemaMu.Unlock()

	// schemaMu is held: the state changes only here and in finishBuild,
	// which takes schemaMu too. Compiling under it also keeps compiles to
	// one at a time, so their memory (up to about 1 GB for sources at the
	// limits) does not add up.
	if err := checkSchemaRequest(req); err != nil {
		return nil, err
	}
	var c *schema.Compiled
	for attempt := 1; ; attempt++ {
		// Each attempt plans from the current state: on a shared store
		// another server may have replaced it (see commitSchema), and in
		// SCHEMA_MODE_ADD the files kept are that state's.
		base := e.cat.Load()
		old := base.state
		files, err := requestFiles(req, old)
		if err != nil {
			return nil, err
		}
		if c == nil || !maps.Equal(c.Files, files) {
			if c, err = schema.Compile(ctx, files); err != nil {
				return nil, schemaError(err)
			}
		}
		counted := map[*schema.RecordType]uint64{}
		res, err := schema.PlanCompiled(old, c, req.GetAllowDrop(), func(t *schema.RecordType) (uint64, error) {
			n, err := e.countRecords(t)
			counted[t] = n
			return n, err
		})
		if err != nil {
			return nil, schemaError(err)
		}
		if approve != nil {
			if err := approve(res.Plan); err != nil {
				return nil, err
			}
		}
		retiring, err := ttlRetirements(base, res)
		if err != nil {
			return nil, err
		}
		if req.GetDryRun() || !res.Changed {
			return &pb.ApplySchemaResponse{Plan: res.Plan, Version: old.Version}, nil
		}
		if err := e.retireTTLs(ctx, retiring); err != nil {
			return nil, err
		}
		if testHookPlanned != nil {
			testHookPlanned()
		}
		resp, stale, err := e.commitSchema(base, res, counted, retiring)
		if !stale {
			return resp, err
		}
		if attempt == applyAttempts {
			return nil, &apierror.Error{Code: apierror.Aborted, Msg: fmt.Sprintf(
				"schema not applied: records kept arriving in empty types, or expiring under a ttl the change replaces, while it was planned (%d attempts); apply it again", attempt)}
		}
	}
}

// checkSchemaRequest refuses a request whose mode and file names do not
// fit together, before anything is compiled.
func checkSchemaRequest(req *pb.ApplySchemaRequest) error {
	mode := req.GetMode()
	switch mode {
	case pb.SchemaMode_SCHEMA_MODE_UNSPECIFIED, pb.SchemaMode_SCHEMA_MODE_WHOLE, pb.SchemaMode_SCHEMA_MODE_ADD:
	default:
		return invalidSchemaRequest("mode", fmt.Sprintf("unknown schema mode %d: use SCHEMA_MODE_WHOLE or SCHEMA_MODE_ADD", mode))
	}
	if len(req.GetRemoveFiles()) > 0 && mode != pb.SchemaMode_SCHEMA_MODE_ADD {
		return invalidSchemaRequest("remove_files", "remove_files needs mode SCHEMA_MODE_ADD: when the request is the whole schema, a file is removed by leaving it out")
	}
	for _, name := range req.GetRemoveFiles() {
		if _, ok := req.GetFiles()[name]; ok {
			return invalidSchemaRequest("remove_files", fmt.Sprintf("file %s is both added and removed", name))
		}
	}
	return nil
}

// requestFiles returns the files of the schema req asks for: its files in
// whole-state mode; in SCHEMA_MODE_ADD, those of old with req's files added
// or replacing the files of their names and remove_files removed.
func requestFiles(req *pb.ApplySchemaRequest, old *schema.State) (map[string]string, error) {
	if req.GetMode() != pb.SchemaMode_SCHEMA_MODE_ADD {
		return req.GetFiles(), nil
	}
	files := maps.Clone(old.Compiled.Files)
	if files == nil {
		files = map[string]string{}
	}
	for _, name := range req.GetRemoveFiles() {
		if _, ok := files[name]; !ok {
			return nil, invalidSchemaRequest("remove_files", fmt.Sprintf("file %s is not in the schema, so it cannot be removed", name))
		}
		delete(files, name)
	}
	maps.Copy(files, req.GetFiles())
	return files, nil
}

func invalidSchemaRequest(field, msg string) error {
	br := &errdetails.BadRequest{FieldViolations: []*errdetails.BadRequest_FieldViolation{{Field: field, Description: msg}}}
	return &apierror.Error{Code: apierror.InvalidArgument, Msg: msg, Details: []protoadapt.MessageV1{br}}
}

// commitSchema commits a schema change planned from base under writeMu.
// It reports stale, and commits nothing, when a type counted as empty now
// holds records, when a record of retiring has expired under the ttl the
// change replaces (ttlchange.go), or when on a shared store another server changed the
// schema or wrote such a type since (the batch expects the schema key at
// base's version and those types empty).
func (e *Engine) commitSchema(base *catalog, res *schema.Result, counted map[*schema.RecordType]uint64, retiring []*recType) (resp *pb.ApplySchemaResponse, stale bool, err error) {
	cat, err := newCatalog(res.State)
	if err != nil {
		return nil, false, fmt.Errorf("compile new schema: %w", err)
	}
	enc, err := res.State.Encode()
	if err != nil {
		return nil, false, fmt.Errorf("encode schema state: %w", err)
	}
	b := e.st.NewWriteBatch()
	defer b.Close()
	b.Set(keySchema, enc)
	for _, t := range res.DroppedTypes {
		p := keyspace.RecordPrefix(t.ID)
		b.DeleteRange(p, keyspace.PrefixEnd(p))
		for _, ix := range t.Indexes {
			p := keyspace.IndexPrefix(ix.ID)
			b.DeleteRange(p, keyspace.PrefixEnd(p))
		}
		if e.st.Shared() {
			b.Delete(keyspace.AppendWrittenKey(nil, t.ID))
		}
	}
	for _, ix := range res.DroppedIndexes {
		p := keyspace.IndexPrefix(ix.ID)
		b.DeleteRange(p, keyspace.PrefixEnd(p))
	}

	e.writeMu.Lock()
	b.Expect(keySchema, base.ver)
	for t, n := range counted {
		if n > 0 {
			continue
		}
		p := keyspace.RecordPrefix(t.ID)
		empty, err := b.ReadAbsent(p, keyspace.PrefixEnd(p))
		if err != nil || !empty {
			e.writeMu.Unlock()
			return nil, err == nil, storeError(err) // a failed read is its error, not a stale plan
		}
	}
	if left, err := e.expiredLeft(b, retiring); err != nil || left {
		e.writeMu.Unlock()
		return nil, err == nil, storeError(err)
	}
	if testHookCommitting != nil {
		testHookCommitting()
	}
	// A dropped type's records go with a range deletion: empty the cache.
	e.cache.BeginWrite()
	e.cache.Clear()
	err = e.st.ApplyBatch(b)
	e.cache.EndWrite()
	if err != nil {
		if errors.Is(err, store.ErrConflict) {
			_, err = e.refreshSchema()
			e.writeMu.Unlock()
			return nil, err == nil, err
		}
		e.writeMu.Unlock()
		return nil, false, fmt.Errorf("commit schema: %w", storeError(err))
	}
	cat.ver = b.Position()
	e.cat.Store(cat)
	e.writeMu.Unlock()
	if err := b.Wait(); err != nil {
		return nil, false, fmt.Errorf("commit schema: %w", err)
	}
	for _, ix := range res.BuildIndexes {
		if t := cat.typeOfIndex(ix.ID); t != nil {
			e.startBuild(t.rt.ID, ix.ID)
		}
	}
	logSchemaApplied(e.log, res.State.Version, res.Plan)
	return &pb.ApplySchemaResponse{Plan: res.Plan, Applied: true, Version: res.State.Version}, false, nil
}

// GetSchema returns the current schema.
func (e *Engine) GetSchema(context.Context) (*pb.GetSchemaResponse, error) {
	s := e.cat.Load().state
	files := make(map[string]string, len(s.Compiled.Files))
	for k, v := range s.Compiled.Files {
		files[k] = v
	}
	types := s.Describe()
	e.describeBuilds(types)
	return &pb.GetSchemaResponse{
		Files:       files,
		Version:     s.Version,
		Types:       types,
		Descriptors: s.FileDescriptorSet(),
		WriteLimits: &pb.WriteLimits{
			MaxBatchRecords: uint64(e.opts.MaxRecordsPerBatch),
			MaxMessageBytes: uint64(e.opts.MaxMessageBytes),
		},
	}, nil
}

// countRecords counts the stored records of a type, on a consistent view.
func (e *Engine) countRecords(t *schema.RecordType) (uint64, error) {
	p := keyspace.RecordPrefix(t.ID)
	it, err := e.st.NewIterator(p, keyspace.PrefixEnd(p))
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

// schemaError maps the schema package's errors: a schema over a limit or
// that does not compile is INVALID_ARGUMENT; a valid schema whose transition is refused
// is FAILED_PRECONDITION. Each problem becomes a field violation.
func schemaError(err error) error {
	var ce *schema.CompileError
	var pe *schema.PlanError
	var le *schema.LimitError
	switch {
	case errors.As(err, &le):
		field := "files"
		if le.File != "" {
			field = le.File
		}
		br := &errdetails.BadRequest{FieldViolations: []*errdetails.BadRequest_FieldViolation{{Field: field, Description: le.Error()}}}
		return &apierror.Error{Code: apierror.InvalidArgument, Msg: le.Error(), Details: []protoadapt.MessageV1{br}, Err: err}
	case errors.As(err, &ce):
		return &apierror.Error{Code: apierror.InvalidArgument, Msg: "schema does not compile:\n" + strings.Join(ce.Errors, "\n"),
			Details: []protoadapt.MessageV1{violations(ce.Errors)}, Err: err}
	case errors.As(err, &pe):
		return &apierror.Error{Code: apierror.FailedPrecondition, Msg: pe.Error(),
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
