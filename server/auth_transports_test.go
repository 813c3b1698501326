package server_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"
	"google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	pb "github.com/protobase/protobase/gen/protobase/v1"
	natstransport "github.com/protobase/protobase/internal/transport/nats"
	"github.com/protobase/protobase/server"
)

// rest sends one request with the named key ("" for none; "forged" for a
// well-formed unknown key) and returns the status code and body.
func (e *authEnv) rest(key, method, path, body string) (int, string) {
	e.t.Helper()
	req, err := http.NewRequest(method, "http://"+e.ts.Srv.HTTPAddr()+path, strings.NewReader(body))
	if err != nil {
		e.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if k := e.key(key); k != "" {
		req.Header.Set("Authorization", "Bearer "+k)
	}
	resp, err := (&http.Client{Timeout: 30 * time.Second}).Do(req)
	if err != nil {
		e.t.Fatalf("%s %s (key %q): %v", method, path, key, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func (e *authEnv) key(name string) string {
	if name == "forged" {
		return "pb_" + strings.Repeat("A", 32)
	}
	return e.keys[name]
}

func jsonRecord(typ string, fields string) string {
	return `{"@type": "type.googleapis.com/` + typ + `", ` + fields + `}`
}

func TestAuthRESTEveryRPC(t *testing.T) {
	e := startAuthServer(t, server.Config{})
	user := func(id int) string {
		return jsonRecord("shop.User", fmt.Sprintf(`"id": "%d", "name": "n", "email": "r%d@example.com"`, id, id))
	}
	order := jsonRecord("shop.Order", `"userId": "1", "id": "1"`)
	files, _ := json.Marshal(map[string]any{"files": map[string]string{"shop.proto": shopProto + "\nmessage Extra {\n  option (protobase.v1.record) = { primary_key: \"id\" };\n  int64 id = 1;\n}\n"}})
	calls := []struct {
		name, method, path, body, denied string
	}{
		{"ApplySchema", "POST", "/v1/schema:apply", string(files), "writer"},
		{"GetSchema", "GET", "/v1/schema", "", ""},
		{"Insert", "POST", "/v1/records:insert", `{"records": [` + user(50) + `]}`, "reader"},
		{"Update", "POST", "/v1/records:update", `{"records": [` + jsonRecord("shop.User", `"id": "1", "name": "changed"`) + `]}`, "reader"},
		{"Upsert", "POST", "/v1/records:upsert", `{"records": [` + user(50) + `]}`, "reader"},
		{"Remove", "POST", "/v1/records:remove", `{"records": [` + user(1) + `]}`, "reader"},
		{"Write", "POST", "/v1/records:write", `{"op": "WRITE_OP_INSERT", "records": [` + user(51) + `], "ack": true}`, "reader"},
		{"Insert(scope)", "POST", "/v1/records:insert", `{"records": [` + user(52) + `, ` + order + `]}`, "user-writer"},
		{"Search", "POST", "/v1/search", `{"queries": [{"type": "shop.Order"}]}`, "user-reader"},
		{"Scan", "POST", "/v1/scan", `{"query": {"type": "shop.Order"}}`, "user-reader"},
		{"Query", "POST", "/v1/query", `{"query": {"type": "shop.Order"}}`, "user-reader"},
		{"Get", "POST", "/v1/records:get", `{"type": "shop.Order", "keys": [[1, 1]]}`, "user-reader"},
		{"CreateKey", "POST", "/v1/keys", `{"name": "new", "role": "KEY_ROLE_ADMIN"}`, "schemer"},
		{"ListKeys", "GET", "/v1/keys", "", "schemer"},
		{"RevokeKey", "DELETE", "/v1/keys/reader", "", "schemer"},
	}
	code := func(c codes.Code) *regexp.Regexp { return regexp.MustCompile(fmt.Sprintf(`"code":\s*%d\b`, c)) }
	before := e.state()
	for _, c := range calls {
		for _, key := range []string{"", "forged"} {
			if got, body := e.rest(key, c.method, c.path, c.body); got != http.StatusUnauthorized || !code(codes.Unauthenticated).MatchString(body) {
				t.Fatalf("%s with key %q: %d %s, want 401 UNAUTHENTICATED", c.name, key, got, body)
			}
		}
		if c.denied != "" {
			got, body := e.rest(c.denied, c.method, c.path, c.body)
			// A Search query fails alone, inside a 200 stream.
			searchInStream := c.name == "Search" && got == http.StatusOK
			if (got != http.StatusForbidden && !searchInStream) || !code(codes.PermissionDenied).MatchString(body) {
				t.Fatalf("%s with key %s: %d %s, want 403 PERMISSION_DENIED", c.name, c.denied, got, body)
			}
		}
		if after := e.state(); after != before {
			t.Fatalf("%s refused, yet the state changed:\n%s\nwant\n%s", c.name, after, before)
		}
	}
	for _, c := range calls {
		if c.name == "Insert(scope)" {
			continue
		}
		if got, body := e.rest("admin", c.method, c.path, c.body); got != http.StatusOK || strings.Contains(body, `"error"`) {
			t.Fatalf("%s with the admin key: %d %s", c.name, got, body)
		}
	}
	if got, _ := e.rest("", "GET", "/openapi.json", ""); got != http.StatusOK {
		t.Fatalf("OpenAPI description without a key: %d", got)
	}
	// RevokeKey above revoked reader: refused at once.
	if got, body := e.rest("reader", "GET", "/v1/schema", ""); got != http.StatusUnauthorized {
		t.Fatalf("revoked key: %d %s", got, body)
	}
}

// natsCall sends req to an endpoint with the named key and returns the
// error status of the reply, or nil (decoding a success into resp).
func (e *authEnv) natsCall(nc *nats.Conn, key, endpoint string, req, resp proto.Message) *status.Status {
	e.t.Helper()
	msg := nats.NewMsg(natstransport.Subject(natstransport.DefaultPrefix, endpoint))
	msg.Data, _ = proto.Marshal(req)
	if k := e.key(key); k != "" {
		msg.Header.Set(natstransport.HeaderAuthorization, "Bearer "+k)
	}
	reply, err := nc.RequestMsg(msg, 10*time.Second)
	if err != nil {
		e.t.Fatalf("request %s: %v", msg.Subject, err)
	}
	if reply.Header.Get(micro.ErrorCodeHeader) != "" {
		st := new(status.Status)
		if err := proto.Unmarshal(reply.Data, st); err != nil {
			e.t.Fatal(err)
		}
		return st
	}
	if err := proto.Unmarshal(reply.Data, resp); err != nil {
		e.t.Fatal(err)
	}
	return nil
}

// natsConn is a connection logged in with the named key: the service
// answers a request only into the inbox of the key in its header, so each
// key calls on a connection of its own.
func (e *authEnv) natsConn(name string) *nats.Conn {
	e.t.Helper()
	quiet := nats.ErrorHandler(func(*nats.Conn, *nats.Subscription, error) {})
	return connectNATS(e.t, e.ts.Srv.NATSURL(), append(natstransport.ClientOptions(e.keys[name]), quiet)...)
}

// natsRefused checks that a connection of the named key may not publish
// req to endpoint at all (its role does not reach it).
func (e *authEnv) natsRefused(name, endpoint string, req proto.Message) {
	e.t.Helper()
	nc := e.natsConn(name)
	msg := nats.NewMsg(natstransport.Subject(natstransport.DefaultPrefix, endpoint))
	msg.Reply = nc.NewRespInbox()
	msg.Data, _ = proto.Marshal(req)
	msg.Header.Set(natstransport.HeaderAuthorization, "Bearer "+e.keys[name])
	if err := nc.PublishMsg(msg); err != nil {
		e.t.Fatal(err)
	}
	wantViolation(e.t, nc, name+" publishing to "+endpoint)
}

func TestAuthNATSEveryRPC(t *testing.T) {
	e := startAuthServer(t, server.Config{MetricsAddr: "127.0.0.1:0"})
	conns := map[string]*nats.Conn{}
	conn := func(name string) *nats.Conn {
		if conns[name] == nil {
			conns[name] = e.natsConn(name)
		}
		return conns[name]
	}
	batch := func(recs ...*anypb.Any) *pb.WriteRequest { return &pb.WriteRequest{Records: recs} }
	orders := &pb.QueryRequest{Query: &pb.Query{Type: "shop.Order"}}
	addInv := &pb.ApplySchemaRequest{Files: map[string]string{"inv.proto": invProto}, Mode: pb.SchemaMode_SCHEMA_MODE_ADD}
	// denied is a key whose role does not reach the endpoint (its login
	// may not publish there) or, with byScope, whose scope refuses the
	// request (PERMISSION_DENIED).
	calls := []struct {
		endpoint string
		req      proto.Message
		denied   string
		byScope  bool
	}{
		{natstransport.SubjectSchemaGet, &pb.GetSchemaRequest{}, "", false},
		{natstransport.SubjectSchemaApply, addInv, "writer", false},
		{natstransport.SubjectSchemaApply, addInv, "user-schemer", true},
		{natstransport.SubjectInsert, batch(e.user(50)), "reader", false},
		{natstransport.SubjectInsert, batch(e.user(51), e.order(51, 1)), "user-writer", true},
		{natstransport.SubjectUpdate, batch(e.user(1)), "reader", false},
		{natstransport.SubjectUpsert, batch(e.user(52)), "reader", false},
		{natstransport.SubjectRemove, batch(e.user(2)), "reader", false},
		{natstransport.SubjectQuery, orders, "user-reader", true},
		{natstransport.SubjectGet, e.order(1, 1), "user-reader", true},
		{natstransport.SubjectGetRecords, &pb.GetRequest{Type: "shop.Order", KeyRecords: []*anypb.Any{e.order(1, 1)}}, "user-reader", true},
		{natstransport.SubjectKeysCreate, &pb.CreateKeyRequest{Name: "new", Role: pb.KeyRole_KEY_ROLE_READ}, "schemer", false},
		{natstransport.SubjectKeysList, &pb.ListKeysRequest{}, "schemer", false},
		{natstransport.SubjectKeysRevoke, &pb.RevokeKeyRequest{Name: "reader"}, "schemer", false},
	}
	before := e.state()
	for _, c := range calls {
		// Without a key, or with a forged one, there is no inbox of the
		// caller to answer into: the request is dropped, and counted.
		for _, key := range []string{"", "forged"} {
			msg := nats.NewMsg(natstransport.Subject(natstransport.DefaultPrefix, c.endpoint))
			msg.Reply = conn("admin").NewRespInbox()
			msg.Data, _ = proto.Marshal(c.req)
			if k := e.key(key); k != "" {
				msg.Header.Set(natstransport.HeaderAuthorization, "Bearer "+k)
			}
			if err := conn("admin").PublishMsg(msg); err != nil {
				t.Fatal(err)
			}
		}
		switch {
		case c.denied == "":
		case c.byScope:
			st := e.natsCall(conn(c.denied), c.denied, c.endpoint, c.req, nil)
			if st == nil || codes.Code(st.Code) != codes.PermissionDenied {
				t.Fatalf("%s with key %s: %v, want PERMISSION_DENIED", c.endpoint, c.denied, st)
			}
		default:
			e.natsRefused(c.denied, c.endpoint, c.req)
		}
	}
	admin := e.keys["admin"]
	waitMetric(t, e.ts, admin, dropped, map[string]string{"reason": "no_key"}, float64(len(calls)))
	waitMetric(t, e.ts, admin, dropped, map[string]string{"reason": "outside_inbox"}, float64(len(calls)))
	if after := e.state(); after != before {
		t.Fatalf("refused calls changed the state:\n%s\nwant\n%s", after, before)
	}
	// A schema key applies a change over NATS.
	var applied pb.ApplySchemaResponse
	if st := e.natsCall(conn("schemer"), "schemer", natstransport.SubjectSchemaApply, addInv, &applied); st != nil || !applied.GetApplied() {
		t.Fatalf("schema.apply with the schema key: %v %v", st, &applied)
	}
	// The lower-case header works too.
	msg0 := nats.NewMsg(natstransport.Subject(natstransport.DefaultPrefix, natstransport.SubjectSchemaGet))
	msg0.Header.Set("authorization", "Bearer "+e.keys["reader"])
	if reply, err := conn("reader").RequestMsg(msg0, 10*time.Second); err != nil || reply.Header.Get(micro.ErrorCodeHeader) != "" {
		t.Fatalf("lower-case authorization header: %v %v", reply.Header, err)
	}
	// The error reply carries the HTTP-equivalent code too.
	msg := nats.NewMsg(natstransport.Subject(natstransport.DefaultPrefix, natstransport.SubjectQuery))
	msg.Data, _ = proto.Marshal(orders)
	msg.Header.Set(natstransport.HeaderAuthorization, "Bearer "+e.keys["user-reader"])
	reply, err := conn("user-reader").RequestMsg(msg, 10*time.Second)
	if err != nil || reply.Header.Get(micro.ErrorCodeHeader) != "403" {
		t.Fatalf("out of scope: %v %v", reply.Header, err)
	}
	closed := make(chan struct{})
	conn("reader").SetClosedHandler(func(*nats.Conn) { close(closed) })
	for _, c := range calls {
		if c.denied == "user-writer" {
			continue
		}
		var resp proto.Message = &anypb.Any{}
		switch c.endpoint {
		case natstransport.SubjectSchemaGet:
			resp = &pb.GetSchemaResponse{}
		case natstransport.SubjectInsert, natstransport.SubjectUpdate, natstransport.SubjectUpsert, natstransport.SubjectRemove:
			resp = &pb.WriteResponse{}
		case natstransport.SubjectQuery:
			resp = &pb.QueryResponse{}
		case natstransport.SubjectGetRecords:
			resp = &pb.GetResponse{}
		case natstransport.SubjectKeysCreate:
			resp = &pb.CreateKeyResponse{}
		case natstransport.SubjectKeysList:
			resp = &pb.ListKeysResponse{}
		case natstransport.SubjectKeysRevoke:
			resp = &pb.RevokeKeyResponse{}
		}
		if st := e.natsCall(conn("admin"), "admin", c.endpoint, c.req, resp); st != nil {
			t.Fatalf("%s with the admin key: %v", c.endpoint, st)
		}
	}
	// keys.revoke above revoked reader: its connection is closed at once
	// and it cannot log in again.
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		t.Fatal("the revoked key's connection stayed open")
	}
	if nc, err := nats.Connect(e.ts.Srv.NATSURL(), natstransport.ClientOptions(e.keys["reader"])...); err == nil {
		nc.Close()
		t.Fatal("a revoked key logged in")
	}
}

// TestAuthRESTRevokeOpenStream revokes the key of an open REST Search
// stream: its next request line is refused with UNAUTHENTICATED.
func TestAuthRESTRevokeOpenStream(t *testing.T) {
	e := startAuthServer(t, server.Config{})
	pr, pw := io.Pipe()
	req, err := http.NewRequest("POST", "http://"+e.ts.Srv.HTTPAddr()+"/v1/search", pr)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-ndjson")
	req.Header.Set("Authorization", "Bearer "+e.keys["reader"])
	line := `{"queries": [{"type": "shop.User"}]}` + "\n"
	go func() { _, _ = pw.Write([]byte(line)) }()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	rd := bufio.NewReader(resp.Body)
	first, err := rd.ReadString('\n')
	if err != nil || resp.StatusCode != http.StatusOK || !strings.Contains(first, `"done"`) {
		t.Fatalf("first response: %d %q %v", resp.StatusCode, first, err)
	}
	if err := e.ts.C.RevokeKey(context.Background(), "reader"); err != nil {
		t.Fatal(err)
	}
	go func() { _, _ = pw.Write([]byte(line)); _ = pw.Close() }()
	rest, _ := io.ReadAll(rd)
	if !strings.Contains(string(rest), `"error"`) || !regexp.MustCompile(`"code":\s*16\b`).Match(rest) {
		t.Fatalf("after revocation the stream went on: %s", rest)
	}
}
