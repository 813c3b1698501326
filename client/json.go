package client

import (
	"context"
	"fmt"
	"strings"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/structpb"

	pb "github.com/protobase/protobase/gen/protobase/v1"
	pbgrpc "github.com/protobase/protobase/gen/protobase/v1/protobasev1grpc"
)

// WriteJSON adds a record of the record type typeName ("shop.User") given
// as protobuf JSON (`{"id": 7, "name": "ann"}`), converted with the
// server's schema (Client.Types; fetched again once if the type is not in
// the kept one). A record that does not convert is an error and is not
// written; the writer goes on.
func (w *Writer) WriteJSON(typeName string, js []byte) error {
	t, err := w.c.recordTypes(w.ctx, typeName)
	if err != nil {
		return err
	}
	a, err := t.FromJSON(typeName, js)
	if err != nil {
		return err
	}
	return w.WriteAny(a)
}

// JSON renders a record as protobuf JSON with the server's schema (see
// Types.JSON).
func (c *Client) JSON(ctx context.Context, rec *anypb.Any) ([]byte, error) {
	t, err := c.recordTypes(ctx, typeName(rec.GetTypeUrl()))
	if err != nil {
		return nil, err
	}
	return t.JSON(rec)
}

// typeName is the full name in a type URL: the text after its last '/'.
func typeName(url string) string { return url[strings.LastIndexByte(url, '/')+1:] }

// Get reads records of typeName by primary key, on one snapshot. It
// returns one element per key, in order: the stored record, or nil when
// the key has none (MissingKeys lists those keys). A key is
//
//   - a Go value of a one-field key: an integer, float, string, bool or
//     []byte (sent as base64, as protobuf JSON has bytes);
//   - a []any of a compound key's values in primary_key order, or a
//     map[string]any by field path;
//   - a proto.Message of the type with its key fields set (only they are
//     read), such as a generated message or a dynamic one from Types.
//
// Integers beyond ±2^53 travel as strings, so 64-bit keys keep every bit.
// A server answers a request with as many records as fit in one response
// (docs/limits.md) and names the keys left over; Get asks again for those
// until every key is answered. The records of one response share its
// bytes: keeping one keeps them all in memory.
func (c *Client) Get(ctx context.Context, typeName string, keys ...any) ([]*anypb.Any, error) {
	out, _, err := c.get(ctx, typeName, keys, false)
	return out, err
}

// MissingKeys returns the keys of a Get whose records are nil, as they
// were given to Get, in order: what a caller reports as not found.
func MissingKeys(keys []any, records []*anypb.Any) []any {
	var out []any
	for i, k := range keys {
		if i < len(records) && records[i] == nil {
			out = append(out, k)
		}
	}
	return out
}

// GetVersioned is Get that also returns each record's version, parallel
// to the records: a number that changes whenever the record is written
// and grows over time (the commit of that write's Watch position), 0 for
// a key that has no record. A request asked again for the keys left over
// reads a later snapshot: compare versions, not answers, across them.
func (c *Client) GetVersioned(ctx context.Context, typeName string, keys ...any) ([]*anypb.Any, []uint64, error) {
	return c.get(ctx, typeName, keys, true)
}

func (c *Client) get(ctx context.Context, typeName string, keys []any, versions bool) ([]*anypb.Any, []uint64, error) {
	out := make([]*anypb.Any, len(keys))
	var vers []uint64
	if versions {
		vers = make([]uint64, len(keys))
	}
	// todo: the keys not answered yet, by index; a lone key's on the stack.
	var lone [1]int
	todo := lone[:]
	if len(keys) != 1 {
		todo = make([]int, len(keys))
	}
	for i := range todo {
		todo[i] = i
	}
	for len(todo) > 0 {
		req, order, err := getRequest(typeName, keys, todo)
		if err != nil {
			return nil, nil, err
		}
		req.Versions = versions
		resp := new(pb.GetResponse)
		if err := c.unary(ctx, pbgrpc.Protobase_Get_FullMethodName, req, resp); err != nil {
			return nil, nil, asError(err)
		}
		again := placeRecords(resp, order, out, vers)
		if len(again) == len(todo) {
			return nil, nil, fmt.Errorf("get %s: the server answered none of %d keys", typeName, len(todo))
		}
		todo = again
	}
	return out, vers, nil
}

// getRequest builds the request for the keys at the indexes todo; order[p]
// is the index of the key at request position p (keys first, then key
// records, as the server numbers them).
func getRequest(typeName string, keys []any, todo []int) (*pb.GetRequest, []int, error) {
	if len(todo) == 1 {
		if r := loneRequest(typeName, keys[todo[0]]); r != nil {
			return r, todo, nil
		}
	}
	req := &pb.GetRequest{Type: typeName}
	var records []int
	for _, i := range todo {
		if m, ok := keys[i].(proto.Message); ok {
			a, err := anyOf(m)
			if err != nil {
				return nil, nil, fmt.Errorf("key %d: %w", i, err)
			}
			req.KeyRecords = append(req.KeyRecords, a)
			records = append(records, i)
			continue
		}
		v, err := keyValue(keys[i])
		if err != nil {
			return nil, nil, fmt.Errorf("key %d: %w", i, err)
		}
		req.Keys = append(req.Keys, v)
	}
	if len(records) == 0 {
		return req, todo, nil // keys only: the request's order is todo's
	}
	order := make([]int, 0, len(todo))
	for _, i := range todo {
		if _, ok := keys[i].(proto.Message); !ok {
			order = append(order, i)
		}
	}
	return req, append(order, records...), nil
}

// lone is a request of one number or string key, in one allocation where
// the general path takes four (request, key list, value, its kind).
type lone struct {
	req  pb.GetRequest
	keys [1]*structpb.Value
	val  structpb.Value
	num  structpb.Value_NumberValue
	str  structpb.Value_StringValue
}

// loneRequest returns the request of key when it is an integer that a
// JSON number holds exactly or a string, else nil.
func loneRequest(typeName string, key any) *pb.GetRequest {
	var n int64
	switch k := key.(type) {
	case int:
		n = int64(k)
	case int64:
		n = k
	case int32:
		n = int64(k)
	case string:
		l := &lone{str: structpb.Value_StringValue{StringValue: k}}
		l.val.Kind = &l.str
		return l.finish(typeName)
	default:
		return nil
	}
	if !exactNumber(n) {
		return nil
	}
	l := &lone{num: structpb.Value_NumberValue{NumberValue: float64(n)}}
	l.val.Kind = &l.num
	return l.finish(typeName)
}

func (l *lone) finish(typeName string) *pb.GetRequest {
	l.keys[0] = &l.val
	l.req.Type, l.req.Keys = typeName, l.keys[:]
	return &l.req
}

// placeRecords puts each record of resp at its key's index in out (and
// its version in vers, when not nil) and returns the indexes of the keys
// the server left unanswered.
func placeRecords(resp *pb.GetResponse, order []int, out []*anypb.Any, vers []uint64) (again []int) {
	if len(resp.Missing) == 0 && len(resp.Unanswered) == 0 {
		// Every key answered: the records come in request order.
		for p, i := range order {
			if p < len(resp.Records) {
				out[i] = resp.Records[p]
				if vers != nil && p < len(resp.Versions) {
					vers[i] = resp.Versions[p]
				}
			}
		}
		return nil
	}
	skip := make(map[uint32]bool, len(resp.Missing)+len(resp.Unanswered))
	for _, m := range resp.Missing {
		skip[m] = true
	}
	for _, u := range resp.Unanswered {
		if int(u) < len(order) {
			skip[u] = true
			again = append(again, order[u])
		}
	}
	next := 0
	for p, i := range order {
		if skip[uint32(p)] || next >= len(resp.Records) { //nolint:gosec // p < len(keys), which the server bounds far below 2^32
			continue
		}
		out[i] = resp.Records[next]
		if vers != nil && next < len(resp.Versions) {
			vers[i] = resp.Versions[next]
		}
		next++
	}
	return again
}

func anyOf(m proto.Message) (*anypb.Any, error) {
	if a, ok := m.(*anypb.Any); ok {
		return a, nil
	}
	return anypb.New(m)
}

// keyValue converts a Go key (see Get) to a JSON value.
func keyValue(k any) (*structpb.Value, error) {
	switch v := k.(type) {
	case []any:
		list := make([]*structpb.Value, len(v))
		for i, e := range v {
			ev, err := keyValue(e)
			if err != nil {
				return nil, err
			}
			list[i] = ev
		}
		return structpb.NewListValue(&structpb.ListValue{Values: list}), nil
	case map[string]any:
		fields := make(map[string]*structpb.Value, len(v))
		for name, e := range v {
			ev, err := keyValue(e)
			if err != nil {
				return nil, err
			}
			fields[name] = ev
		}
		return structpb.NewStructValue(&structpb.Struct{Fields: fields}), nil
	case int64:
		return intValue(v), nil
	case int:
		return intValue(int64(v)), nil
	case int32:
		return intValue(int64(v)), nil
	case uint64:
		if v > 1<<53 {
			return structpb.NewStringValue(fmt.Sprint(v)), nil
		}
		return structpb.NewNumberValue(float64(v)), nil
	case uint:
		return keyValue(uint64(v))
	case uint32:
		return keyValue(uint64(v))
	}
	return structpb.NewValue(k)
}

// intValue is a JSON number when float64 holds it exactly, else a string.
func intValue(v int64) *structpb.Value {
	if !exactNumber(v) {
		return structpb.NewStringValue(fmt.Sprint(v))
	}
	return structpb.NewNumberValue(float64(v))
}

// exactNumber reports whether a JSON number (a float64) holds v exactly.
func exactNumber(v int64) bool { return v <= 1<<53 && v >= -(1<<53) }
