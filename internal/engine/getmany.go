package engine

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/structpb"

	pb "github.com/protobase/protobase/gen/protobase/v1"
	"github.com/protobase/protobase/internal/apierror"
	"github.com/protobase/protobase/internal/schema"
)

// GetRecords answers a GetRequest: the records of req.Type with the given
// primary keys, read on one snapshot, and the positions of the keys that
// have none. Keys count against the write batch limit (MaxRecordsPerBatch),
// which bounds a request's work and its response alike. Each key costs one
// storage read; JSON keys are converted straight into key bytes by
// protobuf's JSON rules for each key field (jsonScalar), key records are
// read with protowire as Remove reads them.
func (e *Engine) GetRecords(ctx context.Context, req *pb.GetRequest) (*pb.GetResponse, error) {
	if e.closed.Load() {
		return nil, ErrClosed
	}
	e.stats.Queries.Add(1)
	resp, err := e.getRecords(ctx, req)
	if err != nil {
		e.stats.QueryErrors.Add(1)
	}
	return resp, err
}

func (e *Engine) getRecords(ctx context.Context, req *pb.GetRequest) (*pb.GetResponse, error) {
	if req.GetType() == "" {
		return nil, &apierror.Error{Code: codes.InvalidArgument, Msg: "type is missing: name the record type of the keys"}
	}
	t := e.cat.Load().lookup(req.GetType())
	if t == nil || strings.Contains(req.GetType(), "/") {
		return nil, &apierror.Error{Code: codes.NotFound, Msg: "no record type " + quote(req.GetType()) + " in the schema"}
	}
	n := len(req.GetKeys()) + len(req.GetKeyRecords())
	if max := e.opts.MaxRecordsPerBatch; n > max {
		return nil, apierror.Errorf(codes.InvalidArgument, "%d keys in one request, more than the limit of %d (max batch records)", n, max)
	}
	// Every key goes into one buffer; ends[i] is where key i ends.
	buf := make([]byte, 0, n*(len(t.prefix)+9))
	ends := make([]int, 0, n)
	for i, v := range req.GetKeys() {
		var err error
		if buf, err = t.jsonKey(append(buf, t.prefix...), v); err != nil {
			return nil, &apierror.Error{Code: codes.InvalidArgument, Msg: fmt.Sprintf("keys[%d]: %v", i, err), Err: err}
		}
		ends = append(ends, len(buf))
	}
	for i, r := range req.GetKeyRecords() {
		if got := e.cat.Load().lookup(r.GetTypeUrl()); got != t {
			return nil, apierror.Errorf(codes.InvalidArgument, "key_records[%d]: type URL %s is not of type %s", i, quote(r.GetTypeUrl()), req.GetType())
		}
		var field string
		var err error
		if buf, field, err = appendKey(append(buf, t.prefix...), r.GetValue(), t.pk); err != nil {
			return nil, &apierror.Error{Code: codes.InvalidArgument, Field: field, Msg: fmt.Sprintf("key_records[%d]: %v", i, err), Err: err}
		}
		ends = append(ends, len(buf))
	}
	keys := make([][]byte, n)
	for i, end := range ends {
		start := 0
		if i > 0 {
			start = ends[i-1]
		}
		keys[i] = buf[start:end:end]
	}
	vals, err := e.readKeys(ctx, keys)
	if err != nil {
		return nil, err
	}
	resp := &pb.GetResponse{Records: make([]*anypb.Any, 0, n)}
	anys := make([]anypb.Any, n) // one allocation for every record's Any
	for i, val := range vals {
		if val == nil {
			resp.Missing = append(resp.Missing, uint32(i)) //nolint:gosec // i < MaxRecordsPerBatch
			continue
		}
		anys[i].TypeUrl, anys[i].Value = t.url, val
		resp.Records = append(resp.Records, &anys[i])
	}
	e.stats.PointLookups.Add(uint64(n))
	e.stats.RecordsRead.Add(uint64(len(resp.Records)))
	return resp, nil
}

// readKeys reads record keys on one view: a lone key with one Get, many
// through one iterator in key order (store.Iter.Lookup: it keeps its
// sstable iterators open between seeks, where a Get builds them each
// time). vals[i] is the value of keys[i], nil when it has none; the
// values share one buffer.
func (e *Engine) readKeys(ctx context.Context, keys [][]byte) ([][]byte, error) {
	vals := make([][]byte, len(keys))
	if len(keys) == 1 {
		val, found, err := e.st.Get(keys[0], nil)
		if err != nil {
			return nil, &apierror.Error{Code: codes.Internal, Msg: "point read: " + err.Error(), Err: err}
		}
		if found {
			if val == nil {
				val = []byte{} // an empty record is found: nil means missing
			}
			vals[0] = val
		}
		return vals, nil
	}
	if len(keys) == 0 {
		return vals, nil
	}
	snap := e.st.NewSnapshot()
	defer snap.Close()
	it, err := snap.NewIter(nil, nil)
	if err != nil {
		return nil, &apierror.Error{Code: codes.Internal, Msg: "point read: " + err.Error(), Err: err}
	}
	defer it.Close()
	order := make([]int, len(keys))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int { return bytes.Compare(keys[a], keys[b]) })
	var arena []byte
	for _, i := range order {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		// Lookup appends to dst[:0]: values land one after another in
		// arena, and a value that does not fit starts a new arena (the
		// earlier values keep the old one).
		if cap(arena)-len(arena) < 4<<10 {
			arena = make([]byte, 0, max(64<<10, 2*cap(arena)))
		}
		val, found, err := it.Lookup(keys[i], arena[len(arena):])
		if err != nil {
			return nil, &apierror.Error{Code: codes.Internal, Msg: "point read: " + err.Error(), Err: err}
		}
		if !found {
			continue
		}
		if len(val) <= cap(arena)-len(arena) {
			arena = arena[:len(arena)+len(val)]
			val = val[:len(val):len(val)]
		}
		vals[i] = val
	}
	return vals, nil
}

// jsonKey appends to dst the primary-key encoding of a JSON primary key
// (see GetRequest.keys) of t.
func (t *recType) jsonKey(dst []byte, v *structpb.Value) ([]byte, error) {
	pk := t.rt.PrimaryKey
	vals := make([]*structpb.Value, len(pk)) // by primary-key field
	switch k := v.GetKind().(type) {
	case *structpb.Value_StructValue:
		for name, fv := range k.StructValue.GetFields() {
			i := slices.IndexFunc(pk, func(kf schema.KeyField) bool { return kf.Path == name })
			if i < 0 {
				return nil, fmt.Errorf("%q is not a primary-key field of %s (its key is %s)", name, t.rt.Name, keyNames(pk))
			}
			vals[i] = fv
		}
		if len(k.StructValue.GetFields()) != len(pk) {
			return nil, fmt.Errorf("the key object needs every primary-key field of %s: %s", t.rt.Name, keyNames(pk))
		}
	case *structpb.Value_ListValue:
		if len(k.ListValue.GetValues()) != len(pk) {
			return nil, fmt.Errorf("a list of %d values, but the primary key of %s has %d fields (%s)", len(k.ListValue.GetValues()), t.rt.Name, len(pk), keyNames(pk))
		}
		copy(vals, k.ListValue.GetValues())
	case nil, *structpb.Value_NullValue:
		return nil, fmt.Errorf("the key is null or missing")
	default:
		if len(pk) != 1 {
			return nil, fmt.Errorf("the primary key of %s has %d fields (%s): give a list or an object", t.rt.Name, len(pk), keyNames(pk))
		}
		vals[0] = v
	}
	for i, kf := range pk {
		switch vals[i].GetKind().(type) {
		case *structpb.Value_NumberValue, *structpb.Value_StringValue, *structpb.Value_BoolValue:
		default:
			return nil, fmt.Errorf("key field %s: want a number, string or bool", kf.Path)
		}
		sc, err := jsonScalar(kf, vals[i])
		if err != nil {
			return nil, fmt.Errorf("key field %s: %w", kf.Path, err)
		}
		dst = appendScalar(dst, kf.Kind, sc)
	}
	return dst, nil
}

func keyNames(pk []schema.KeyField) string {
	names := make([]string, len(pk))
	for i, kf := range pk {
		names[i] = kf.Path
	}
	return strings.Join(names, ", ")
}
