package client_test

import (
	"fmt"
	"math"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/protobase/protobase/client"
	"github.com/protobase/protobase/client/where"
	pb "github.com/protobase/protobase/gen/protobase/v1"
	"github.com/protobase/protobase/server"
)

const ordersProto = `syntax = "proto3";
package demo;
import "protobase/v1/options.proto";
enum State { STATE_UNSPECIFIED = 0; OPEN = 1; SHIPPED = 2; }
message Order {
  option (protobase.v1.record) = { primary_key: ["user", "id"] };
  int64 user = 1;
  uint64 id = 2;
  State state = 3;
  bytes tag = 4;
}
`

// Records built from the server's schema with no generated code: JSON
// and dynamic messages in, JSON and dynamic messages out, Get by every
// kind of key; a schema applied after the client fetched its types is
// picked up by WriteJSON.
func TestDynamicRecordsAndGet(t *testing.T) {
	c := startWriterServer(t, server.Config{NoSync: true})
	ctx := t.Context()
	if _, err := c.ApplySchema(ctx, map[string]string{"shop.proto": shopProto}, client.SchemaOptions{}); err != nil {
		t.Fatal(err)
	}
	types, err := c.Types(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := types.FromJSON("demo.Order", []byte(`{}`)); err == nil {
		t.Fatal("FromJSON of a type not yet in the schema succeeded")
	}
	if _, err := c.ApplySchema(ctx, map[string]string{"shop.proto": shopProto, "orders.proto": ordersProto}, client.SchemaOptions{}); err != nil {
		t.Fatal(err)
	}

	w, err := c.NewWriter(ctx, client.Insert, client.WriterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	big := uint64(math.MaxUint64)
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(w.WriteJSON("demo.Order", []byte(`{"user": 1, "id": 1, "state": "OPEN", "tag": "AAE="}`)))
	must(w.WriteJSON("demo.Order", fmt.Appendf(nil, `{"user": "-9007199254740993", "id": "%d", "state": 2}`, big)))
	for _, bad := range []string{`{"user": 1.5}`, `{"nope": 1}`, `[1]`, `{"state": "CLOSED"}`, ``} {
		if err := w.WriteJSON("demo.Order", []byte(bad)); err == nil {
			t.Fatalf("WriteJSON(%q) succeeded", bad)
		}
	}
	if err := w.WriteJSON("demo.Nope", []byte(`{}`)); err == nil || !strings.Contains(err.Error(), `"demo.Nope"`) {
		t.Fatalf("unknown type: %v", err)
	}
	types, err = c.Types(ctx)
	must(err)
	m, err := types.New("demo.Order")
	must(err)
	fields := m.Descriptor().Fields()
	m.Set(fields.ByName("user"), protoreflect.ValueOfInt64(2))
	m.Set(fields.ByName("id"), protoreflect.ValueOfUint64(7))
	must(w.Write(m))
	if _, err := w.Close(); err != nil {
		t.Fatal(err)
	}

	recs, err := c.Get(ctx, "demo.Order",
		[]any{1, 1},
		map[string]any{"user": int64(-9007199254740993), "id": big},
		m, // a dynamic message: its key fields
		[]any{3, 3},
	)
	must(err)
	var got []string
	for _, r := range recs {
		if r == nil {
			got = append(got, "nil")
			continue
		}
		js, err := c.JSON(ctx, r)
		must(err)
		got = append(got, string(js))
	}
	want := []string{
		`{"user":"1","id":"1","state":"OPEN","tag":"AAE="}`,
		`{"user":"-9007199254740993","id":"18446744073709551615","state":"SHIPPED"}`,
		`{"user":"2","id":"7"}`,
		"nil",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("Get:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	keys := []any{[]any{3, 3}, []any{1, 1}, map[string]any{"user": 4, "id": 4}}
	recs2, err := c.Get(ctx, "demo.Order", keys...)
	must(err)
	if miss := client.MissingKeys(keys, recs2); fmt.Sprint(miss) != "[[3 3] map[id:4 user:4]]" {
		t.Fatalf("MissingKeys: %v, want the keys of (3, 3) and (4, 4) as given", miss)
	}
	dm, err := types.Message(recs[0])
	must(err)
	if dm.Get(fields.ByName("state")).Enum() != 1 {
		t.Fatalf("Message: %v", dm)
	}

	// Malformed keys: refused by the client or by the server, with the
	// key named.
	for _, keys := range [][]any{{[]any{1}}, {1}, {map[string]any{"user": 1, "nope": 2}}, {[]any{1.5, 1}}, {struct{}{}}, {[]any{1, struct{}{}}}} {
		if _, err := c.Get(ctx, "demo.Order", keys...); err == nil || !strings.Contains(err.Error(), "key") {
			t.Fatalf("Get(%v): %v", keys, err)
		}
	}
	if _, err := c.Get(ctx, "demo.Nope", 1); status.Code(err) != codes.NotFound {
		t.Fatalf("Get of an unknown type: %v", err)
	}
}

// The expression helpers build the tree the text parser builds.
func TestExpressionHelpers(t *testing.T) {
	cases := []struct {
		built *pb.Expr
		text  string
	}{
		{client.Eq("id", 7), `id = 7`},
		{client.Ne("name", "ann"), `name != "ann"`},
		{client.And(client.Lt("a", int32(-1)), client.Le("b", uint8(2)), client.Gt("c", 1.5), client.Ge("d", uint64(math.MaxUint64))), `a < -1 and b <= 2u and c > 1.5 and d >= 18446744073709551615`},
		{client.Or(client.Prefix("name", "An"), client.Contains("tag", []byte{0, 1}), client.Not(client.Eq("ok", true))), `name prefix "An" or tag contains b"\x00\x01" or not ok = true`},
		{client.In("state", client.EnumName("OPEN"), pb.Op_OP_EQ, false), "state in (OPEN, OP_EQ, false)"},
	}
	for _, tc := range cases {
		parsed, err := where.Parse(tc.text)
		if err != nil {
			t.Fatal(err)
		}
		if !proto.Equal(tc.built, parsed) {
			t.Errorf("%s:\nbuilt  %v\nparsed %v", tc.text, tc.built, parsed)
		}
	}
	defer func() {
		if r := recover(); r == nil || !strings.Contains(fmt.Sprint(r), "struct {} is not an operand type") {
			t.Fatalf("Value(struct{}{}) recovered %v", r)
		}
	}()
	client.Value(struct{}{})
}
