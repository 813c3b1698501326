package client

import (
	"context"
	"fmt"
	"strings"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/structpb"

	pb "github.com/protobase/protobase/gen/protobase/v1"
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
// the key has none. A key is
//
//   - a Go value of a one-field key: an integer, float, string, bool or
//     []byte (sent as base64, as protobuf JSON has bytes);
//   - a []any of a compound key's values in primary_key order, or a
//     map[string]any by field path;
//   - a proto.Message of the type with its key fields set (only they are
//     read), such as a generated message or a dynamic one from Types.
//
// Integers beyond ±2^53 travel as strings, so 64-bit keys keep every bit.
func (c *Client) Get(ctx context.Context, typeName string, keys ...any) ([]*anypb.Any, error) {
	req := &pb.GetRequest{Type: typeName}
	pos := make([]int, len(keys)) // key i's position in the request
	var recs []int
	for i, k := range keys {
		if m, ok := k.(proto.Message); ok {
			a, err := anyOf(m)
			if err != nil {
				return nil, fmt.Errorf("key %d: %w", i, err)
			}
			req.KeyRecords = append(req.KeyRecords, a)
			recs = append(recs, i)
			continue
		}
		v, err := keyValue(k)
		if err != nil {
			return nil, fmt.Errorf("key %d: %w", i, err)
		}
		pos[i] = len(req.Keys)
		req.Keys = append(req.Keys, v)
	}
	for j, i := range recs {
		pos[i] = len(req.Keys) + j
	}
	resp, err := c.api.Get(ctx, req)
	if err != nil {
		return nil, asError(err)
	}
	byPos := make([]*anypb.Any, len(keys))
	missing := make(map[uint32]bool, len(resp.Missing))
	for _, m := range resp.Missing {
		missing[m] = true
	}
	next := 0
	for p := range byPos {
		if missing[uint32(p)] || next >= len(resp.Records) { //nolint:gosec // p < len(keys), which the server bounds far below 2^32
			continue
		}
		byPos[p] = resp.Records[next]
		next++
	}
	out := make([]*anypb.Any, len(keys))
	for i := range keys {
		out[i] = byPos[pos[i]]
	}
	return out, nil
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
	if v > 1<<53 || v < -(1<<53) {
		return structpb.NewStringValue(fmt.Sprint(v))
	}
	return structpb.NewNumberValue(float64(v))
}
