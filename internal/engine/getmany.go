package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/dynamicpb"
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
// storage read; JSON keys are converted through the type's descriptor
// first (protobuf JSON rules), key records are read with protowire as
// Remove reads them.
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
	keys := make([][]byte, 0, n)
	for i, v := range req.GetKeys() {
		k, err := t.jsonKey(v)
		if err != nil {
			return nil, &apierror.Error{Code: codes.InvalidArgument, Msg: fmt.Sprintf("keys[%d]: %v", i, err), Err: err}
		}
		keys = append(keys, k)
	}
	for i, r := range req.GetKeyRecords() {
		if got := e.cat.Load().lookup(r.GetTypeUrl()); got != t {
			return nil, apierror.Errorf(codes.InvalidArgument, "key_records[%d]: type URL %s is not of type %s", i, quote(r.GetTypeUrl()), req.GetType())
		}
		k, field, err := appendKey(slices.Clone(t.prefix), r.GetValue(), t.pk)
		if err != nil {
			return nil, &apierror.Error{Code: codes.InvalidArgument, Field: field, Msg: fmt.Sprintf("key_records[%d]: %v", i, err), Err: err}
		}
		keys = append(keys, k)
	}
	var rd interface {
		Get(key, dst []byte) ([]byte, bool, error)
	} = e.st
	if len(keys) > 1 {
		snap := e.st.NewSnapshot()
		defer snap.Close()
		rd = snap
	}
	resp := &pb.GetResponse{Records: make([]*anypb.Any, 0, len(keys))}
	for i, k := range keys {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		val, found, err := rd.Get(k, nil)
		if err != nil {
			return nil, &apierror.Error{Code: codes.Internal, Msg: "point read: " + err.Error(), Err: err}
		}
		e.stats.PointLookups.Add(1)
		if !found {
			resp.Missing = append(resp.Missing, uint32(i)) //nolint:gosec // i < MaxRecordsPerBatch
			continue
		}
		e.stats.RecordsRead.Add(1)
		resp.Records = append(resp.Records, &anypb.Any{TypeUrl: t.url, Value: val})
	}
	return resp, nil
}

// jsonKey converts a JSON primary key (see GetRequest.keys) into the
// record key of t.
func (t *recType) jsonKey(v *structpb.Value) ([]byte, error) {
	pk := t.rt.PrimaryKey
	obj := map[string]any{}
	switch k := v.GetKind().(type) {
	case *structpb.Value_StructValue:
		for name, fv := range k.StructValue.GetFields() {
			i := slices.IndexFunc(pk, func(kf schema.KeyField) bool { return kf.Path == name })
			if i < 0 {
				return nil, fmt.Errorf("%q is not a primary-key field of %s (its key is %s)", name, t.rt.Name, keyNames(pk))
			}
			if err := setKeyPath(obj, pk[i].Fields, fv); err != nil {
				return nil, err
			}
		}
		if len(k.StructValue.GetFields()) != len(pk) {
			return nil, fmt.Errorf("the key object needs every primary-key field of %s: %s", t.rt.Name, keyNames(pk))
		}
	case *structpb.Value_ListValue:
		vals := k.ListValue.GetValues()
		if len(vals) != len(pk) {
			return nil, fmt.Errorf("a list of %d values, but the primary key of %s has %d fields (%s)", len(vals), t.rt.Name, len(pk), keyNames(pk))
		}
		for i, fv := range vals {
			if err := setKeyPath(obj, pk[i].Fields, fv); err != nil {
				return nil, err
			}
		}
	case nil, *structpb.Value_NullValue:
		return nil, fmt.Errorf("the key is null or missing")
	default:
		if len(pk) != 1 {
			return nil, fmt.Errorf("the primary key of %s has %d fields (%s): give a list or an object", t.rt.Name, len(pk), keyNames(pk))
		}
		if err := setKeyPath(obj, pk[0].Fields, v); err != nil {
			return nil, err
		}
	}
	b, err := json.Marshal(obj)
	if err != nil {
		return nil, err
	}
	m := dynamicpb.NewMessage(t.rt.Desc)
	if err := protojson.Unmarshal(b, m); err != nil {
		return nil, fmt.Errorf("%s", strings.TrimPrefix(err.Error(), "proto: "))
	}
	rec, err := proto.Marshal(m)
	if err != nil {
		return nil, err
	}
	k, _, err := appendKey(slices.Clone(t.prefix), rec, t.pk)
	return k, err
}

// setKeyPath sets v at the field path in the JSON object obj, creating
// the messages along it. A key value must be a scalar.
func setKeyPath(obj map[string]any, path []protoreflect.FieldDescriptor, v *structpb.Value) error {
	name := string(path[len(path)-1].Name())
	switch v.GetKind().(type) {
	case *structpb.Value_NumberValue, *structpb.Value_StringValue, *structpb.Value_BoolValue:
	default:
		return fmt.Errorf("key field %s: want a number, string or bool", name)
	}
	for _, fd := range path[:len(path)-1] {
		inner, ok := obj[string(fd.Name())].(map[string]any)
		if !ok {
			inner = map[string]any{}
			obj[string(fd.Name())] = inner
		}
		obj = inner
	}
	obj[name] = v.AsInterface()
	return nil
}

func keyNames(pk []schema.KeyField) string {
	names := make([]string, len(pk))
	for i, kf := range pk {
		names[i] = kf.Path
	}
	return strings.Join(names, ", ")
}
