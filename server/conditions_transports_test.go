package server_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/protobase/protobase/client"
	pb "github.com/protobase/protobase/gen/protobase/v1"
	natstransport "github.com/protobase/protobase/internal/transport/nats"
	"github.com/protobase/protobase/server"
	"github.com/protobase/protobase/server/servertest"
)

// A condition in JSON on the REST Write stream: a failed one is HTTP 409
// with the same WriteError as over gRPC, and a holding one lets the batch
// apply.
func TestConditionREST(t *testing.T) {
	ts := startTransports(t, server.Config{})
	e := &condEnv{t: t, ts: ts}
	ts.MustWrite(insert, []*anypb.Any{e.user(1, "Ann")})
	v := e.version(1)
	c := restClients(t, ts)[0]
	body := func(version uint64) string {
		return fmt.Sprintf(`{"op": "WRITE_OP_UPDATE", "ack": true, "records": [{"@type": "type.googleapis.com/shop.User", "id": "1", "name": "Ann2", "email": "1@x"}],
			"conditions": [{"key": {"@type": "type.googleapis.com/shop.User", "id": "2"}, "version": "0"}, {"record": 0, "version": "%d"}]}`, version)
	}
	code, b := c.post("/v1/records:write", body(v+1))
	_, st := c.lines(b, func() proto.Message { return new(pb.WriteStreamResponse) })
	if code != http.StatusConflict || st == nil || codes.Code(st.Code) != codes.Aborted {
		t.Fatalf("write on an old version: HTTP %d, %v, want 409 and ABORTED: %s", code, st, b)
	}
	we := writeDetail(t, st)
	if we.Condition == nil || *we.Condition != 1 || we.Record != 0 || we.Version != v || we.TypeUrl != "type.googleapis.com/shop.User" {
		t.Fatalf("REST detail %v, want condition 1 on record 0, version %d found", we, v)
	}
	if e.version(1) != v {
		t.Fatal("the refused batch was applied")
	}
	code, b = c.post("/v1/records:write", body(v))
	if msgs, st := c.lines(b, func() proto.Message { return new(pb.WriteStreamResponse) }); code != http.StatusOK || st != nil || len(msgs) != 1 {
		t.Fatalf("write on the right version: %d %v %s", code, st, b)
	}
	if e.version(1) <= v {
		t.Fatal("the batch whose conditions held was not applied")
	}
}

// Conditions on the NATS insert endpoint, in protobuf and in JSON: a
// failed one is ABORTED with the WriteError, a holding one applies.
func TestConditionNATS(t *testing.T) {
	ts := startTransports(t, server.Config{})
	e := &condEnv{t: t, ts: ts}
	ts.MustWrite(insert, []*anypb.Any{e.user(1, "Ann")})
	v := e.version(1)
	for i, json := range []bool{false, true} {
		c := newNATSClient(t, ts, ts.Srv.NATSURL(), json)
		id := 10 + i
		var wr pb.WriteResponse
		st := c.call(natstransport.SubjectInsert, &pb.WriteRequest{Records: []*anypb.Any{e.user(id, "new")},
			Conditions: conds(client.IfKey(e.key(1), v+1))}, &wr)
		wantNATSCode(t, st, codes.Aborted)
		we := writeDetail(t, st)
		if we.Condition == nil || *we.Condition != 0 || we.Version != v {
			t.Fatalf("json %v: detail %v, want condition 0, version %d found", json, we, v)
		}
		if e.version(id) != 0 {
			t.Fatalf("json %v: the refused batch was applied", json)
		}
		c.mustCall(natstransport.SubjectInsert, &pb.WriteRequest{Records: []*anypb.Any{e.user(id, "new")},
			Conditions: conds(client.IfKey(e.key(1), v), client.IfCount(&pb.Query{Type: "shop.User", Filter: fmt.Sprintf("id = %d", id)}, 0))}, &wr)
		if wr.Records != 1 || e.version(id) == 0 {
			t.Fatalf("json %v: the batch whose conditions held: %v", json, &wr)
		}
	}
}

// A key scoped to shop.User may not name shop.Order in a key or query
// condition: PERMISSION_DENIED naming the condition, before anything is
// read, so the answer is the same whether the condition would hold or
// not and whether the order exists: the key learns nothing of it.
func TestConditionScope(t *testing.T) {
	e := startAuthServer(t, server.Config{})
	ctx := context.Background()
	api := e.api("user-writer")
	var v uint64
	{
		_, vers, err := e.ts.C.GetVersioned(ctx, "shop.Order", []any{1, 1})
		if err != nil || vers[0] == 0 {
			t.Fatalf("order (1, 1): version %v, %v", vers, err)
		}
		v = vers[0]
	}
	order := func(user, id int) *anypb.Any { return e.order(user, id) }
	write := func(c *pb.Condition) error {
		st, err := api.Write(ctx)
		if err != nil {
			t.Fatal(err)
		}
		_ = st.Send(&pb.WriteStreamRequest{Op: upsert, Records: []*anypb.Any{e.user(70)},
			Conditions: conds(client.IfKey(e.user(99), 0), c)})
		_ = st.CloseSend()
		if _, err = st.Recv(); errors.Is(err, io.EOF) {
			return nil // closed without an error: applied
		}
		return err
	}
	before := e.state()
	var first *pb.WriteError
	var firstMsg string
	for _, c := range []*pb.Condition{
		client.IfKey(order(1, 1), v),   // exists, holds
		client.IfKey(order(1, 1), v+1), // exists, fails
		client.IfKey(order(9, 9), 0),   // absent, holds
		client.IfKey(order(9, 9), 5),   // absent, fails
		client.IfKeyMatches(order(1, 1), "total > 1"),
		client.IfKeyMatches(order(1, 1), "total < 1"),
	} {
		err := write(c)
		we := servertest.WriteErr(t, err, codes.PermissionDenied)
		if we.Condition == nil || *we.Condition != 1 || !strings.Contains(we.Reason, "shop.Order") {
			t.Fatalf("condition on %v: %v, want condition 1 naming shop.Order", c, we)
		}
		if first == nil {
			first, firstMsg = we, err.Error()
		} else if !proto.Equal(we, first) || err.Error() != firstMsg {
			t.Errorf("condition on %v: %v (%v), while another condition on orders got %v (%s)", c, we, err, first, firstMsg)
		}
	}
	for _, q := range []*pb.Query{{Type: "shop.Order"}, {Type: "type.googleapis.com/shop.Order"}, {Type: "other/shop.Order", Filter: "total > 1"}} {
		for _, n := range []uint64{0, 1} {
			we := servertest.WriteErr(t, write(client.IfCount(q, n)), codes.PermissionDenied)
			if we.Condition == nil || *we.Condition != 1 {
				t.Errorf("query condition on %v: %v, want condition 1", q, we)
			}
		}
	}
	if e.state() != before {
		t.Fatal("a refused batch changed the state")
	}
	// In its scope the key's conditions are checked.
	servertest.WriteErr(t, write(client.IfKey(e.user(2), 0)), codes.Aborted)
	if err := write(client.IfCount(&pb.Query{Type: "shop.User", Filter: "id = 70"}, 0)); err != nil {
		t.Fatalf("a condition in scope that holds: %v", err)
	}
}
