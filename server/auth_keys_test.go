package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	"github.com/nats-io/nats.go"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	pb "github.com/protobase/protobase/gen/protobase/v1"
	pbgrpc "github.com/protobase/protobase/gen/protobase/v1/protobasev1grpc"
	natstransport "github.com/protobase/protobase/internal/transport/nats"
	"github.com/protobase/protobase/server"
)

// keysTransport makes the key-management calls (method "create", "list"
// or "revoke") on one transport with the named key. It returns the call's
// code and message; on success the response is decoded into resp.
type keysTransport struct {
	name string
	call func(key, method string, req, resp proto.Message) (codes.Code, string)
}

// keysTransports returns gRPC, REST and NATS for e. On NATS each key
// calls on a connection logged in with it: the service answers only into
// the inbox of the request's own key (key names a key of e.keys).
func (e *authEnv) keysTransports() []keysTransport {
	apis := map[string]pbgrpc.ProtobaseClient{}
	grpcCall := func(key, method string, req, resp proto.Message) (codes.Code, string) {
		if apis[key] == nil {
			apis[key] = e.api(key)
		}
		ctx := context.Background()
		var out proto.Message
		var err error
		switch method {
		case "create":
			out, err = apis[key].CreateKey(ctx, req.(*pb.CreateKeyRequest))
		case "list":
			out, err = apis[key].ListKeys(ctx, req.(*pb.ListKeysRequest))
		case "revoke":
			out, err = apis[key].RevokeKey(ctx, req.(*pb.RevokeKeyRequest))
		}
		if err != nil {
			st := status.Convert(err)
			return st.Code(), st.Message()
		}
		proto.Merge(resp, out)
		return codes.OK, ""
	}
	restCall := func(key, method string, req, resp proto.Message) (codes.Code, string) {
		var got int
		var body string
		switch method {
		case "create":
			js, _ := protojson.Marshal(req)
			got, body = e.rest(key, "POST", "/v1/keys", string(js))
		case "list":
			got, body = e.rest(key, "GET", "/v1/keys", "")
		case "revoke":
			got, body = e.rest(key, "DELETE", "/v1/keys/"+url.PathEscape(req.(*pb.RevokeKeyRequest).GetName()), "")
		}
		if got == http.StatusOK {
			if err := protojson.Unmarshal([]byte(body), resp); err != nil {
				e.t.Fatalf("REST %s: %v in %s", method, err, body)
			}
			return codes.OK, ""
		}
		var st struct {
			Code    codes.Code `json:"code"`
			Message string     `json:"message"`
		}
		if err := json.Unmarshal([]byte(body), &st); err != nil {
			e.t.Fatalf("REST %s: HTTP %d, body %s: %v", method, got, body, err)
		}
		if want := runtime.HTTPStatusFromCode(st.Code); got != want {
			e.t.Errorf("REST %s: HTTP %d for %v, want %d", method, got, st.Code, want)
		}
		return st.Code, st.Message
	}
	endpoints := map[string]string{
		"create": natstransport.SubjectKeysCreate,
		"list":   natstransport.SubjectKeysList,
		"revoke": natstransport.SubjectKeysRevoke,
	}
	conns := map[string]*nats.Conn{}
	natsCall := func(key, method string, req, resp proto.Message) (codes.Code, string) {
		if conns[key] == nil {
			conns[key] = connectNATS(e.t, e.ts.Srv.NATSURL(), natstransport.ClientOptions(e.keys[key])...)
		}
		if st := e.natsCall(conns[key], key, endpoints[method], req, resp); st != nil {
			return codes.Code(st.Code), st.Message
		}
		return codes.OK, ""
	}
	return []keysTransport{{"gRPC", grpcCall}, {"REST", restCall}, {"NATS", natsCall}}
}

// keyNames lists the names of the keys that key sees on tr.
func keyNames(t *testing.T, tr keysTransport, key string) []string {
	t.Helper()
	resp := &pb.ListKeysResponse{}
	if code, msg := tr.call(key, "list", &pb.ListKeysRequest{}, resp); code != codes.OK {
		t.Fatalf("%s: list with key %s: %v %s", tr.name, key, code, msg)
	}
	return keyInfoNames(resp)
}

// TestAuthKeysStayInScope runs the escalation of a scoped admin key on
// every transport: it tries to create an unscoped admin key (which could
// take full backups), keys wider than its scope or of another package, to
// revoke the bootstrap admin and keys of other scopes, and to list every
// key. Each is refused with nothing changed; within its scope it creates,
// lists and revokes keys.
func TestAuthKeysStayInScope(t *testing.T) {
	e := startAuthServer(t, server.Config{})
	for _, k := range []struct {
		name  string
		role  pb.KeyRole
		types []string
	}{
		{"shopadmin", pb.KeyRole_KEY_ROLE_ADMIN, []string{"shop.*"}},
		{"crm-writer", pb.KeyRole_KEY_ROLE_WRITE, []string{"crm.*"}},
		{"shopping-reader", pb.KeyRole_KEY_ROLE_READ, []string{"shopping.User"}},
	} {
		resp, err := e.ts.C.CreateKey(context.Background(), &pb.CreateKeyRequest{Name: k.name, Role: k.role, Types: k.types})
		if err != nil {
			t.Fatal(err)
		}
		e.keys[k.name] = resp.Key
	}
	create := func(name string, role pb.KeyRole, types ...string) *pb.CreateKeyRequest {
		return &pb.CreateKeyRequest{Name: name, Role: role, Types: types}
	}
	revoke := func(name string) *pb.RevokeKeyRequest { return &pb.RevokeKeyRequest{Name: name} }
	notFound := func(name string) string { return fmt.Sprintf("no API key named %q", name) }
	refused := []struct {
		what, method string
		req          proto.Message
		want         codes.Code
		msg          []string // in the refusal's message
	}{
		{"create an unscoped admin key", "create", create("escalated", pb.KeyRole_KEY_ROLE_ADMIN), codes.PermissionDenied,
			[]string{`"shopadmin"`, "role admin", "every type", "shop.*"}},
		{"create an unscoped read key", "create", create("everything", pb.KeyRole_KEY_ROLE_READ), codes.PermissionDenied,
			[]string{`"shopadmin"`, "role read", "every type"}},
		{"create a wider key", "create", create("wider", pb.KeyRole_KEY_ROLE_READ, "shop.*", "crm.*"), codes.PermissionDenied,
			[]string{`"shopadmin"`, "types crm.*,shop.*", "crm.* lies outside"}},
		{"create a key of another package", "create", create("crm", pb.KeyRole_KEY_ROLE_WRITE, "crm.Lead"), codes.PermissionDenied,
			[]string{`"shopadmin"`, "role write", "crm.Lead lies outside"}},
		{"create a key of a package named alike", "create", create("shopping", pb.KeyRole_KEY_ROLE_READ, "shopping.*"), codes.PermissionDenied,
			[]string{"shopping.* lies outside"}},
		{"revoke the bootstrap admin", "revoke", revoke("admin"), codes.NotFound, []string{notFound("admin")}},
		{"revoke an unscoped key", "revoke", revoke("reader"), codes.NotFound, []string{notFound("reader")}},
		{"revoke a key of another scope", "revoke", revoke("crm-writer"), codes.NotFound, []string{notFound("crm-writer")}},
		{"revoke a key of a package named alike", "revoke", revoke("shopping-reader"), codes.NotFound, []string{notFound("shopping-reader")}},
		{"revoke a key that does not exist", "revoke", revoke("no-such-key"), codes.NotFound, []string{notFound("no-such-key")}},
	}
	ctx := context.Background()
	for _, tr := range e.keysTransports() {
		before := e.state()
		all, err := e.ts.C.ListKeys(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range refused {
			var resp proto.Message = &pb.CreateKeyResponse{}
			if r.method == "revoke" {
				resp = &pb.RevokeKeyResponse{}
			}
			code, msg := tr.call("shopadmin", r.method, r.req, resp)
			if code != r.want {
				t.Fatalf("%s: shopadmin may %s: %v %q, want %v", tr.name, r.what, code, msg, r.want)
			}
			for _, m := range r.msg {
				if !strings.Contains(msg, m) {
					t.Errorf("%s: %s: message %q lacks %q", tr.name, r.what, msg, m)
				}
			}
			if after := e.state(); after != before {
				t.Fatalf("%s: %s refused, yet the state changed:\n%s\nwant\n%s", tr.name, r.what, after, before)
			}
		}
		// The bootstrap admin still works and sees every key as before.
		if got := keyNames(t, tr, "admin"); !slices.Equal(got, keyInfoNames(all)) {
			t.Fatalf("%s: the admin lists %q after the refusals, want %q", tr.name, got, keyInfoNames(all))
		}
		inScope := []string{"shopadmin", "user-reader", "user-schemer", "user-writer"}
		if got := keyNames(t, tr, "shopadmin"); !slices.Equal(got, inScope) {
			t.Fatalf("%s: shopadmin lists %q, want the keys inside its scope %q", tr.name, got, inScope)
		}

		// Inside its scope and role, shopadmin manages keys.
		reader, admin2 := tr.name+"-shop-reader", tr.name+"-shop-admin"
		for _, req := range []*pb.CreateKeyRequest{create(reader, pb.KeyRole_KEY_ROLE_READ, "shop.User"), create(admin2, pb.KeyRole_KEY_ROLE_ADMIN, "shop.*")} {
			resp := &pb.CreateKeyResponse{}
			if code, msg := tr.call("shopadmin", "create", req, resp); code != codes.OK || resp.GetKey() == "" {
				t.Fatalf("%s: shopadmin creates %s: %v %s", tr.name, req.Name, code, msg)
			}
			e.keys[req.Name] = resp.GetKey()
		}
		if err := search0(ctx, e.api(reader)); err != nil {
			t.Fatalf("%s: the key made by shopadmin reads shop.User: %v", tr.name, err)
		}
		if got, want := keyNames(t, tr, "shopadmin"), []string{admin2, reader, "shopadmin", "user-reader", "user-schemer", "user-writer"}; !slices.Equal(got, want) {
			t.Fatalf("%s: shopadmin lists %q, want %q", tr.name, got, want)
		}
		for _, name := range []string{reader, admin2} {
			if code, msg := tr.call("shopadmin", "revoke", revoke(name), &pb.RevokeKeyResponse{}); code != codes.OK {
				t.Fatalf("%s: shopadmin revokes %s: %v %s", tr.name, name, code, msg)
			}
		}
		if after := e.state(); after != before {
			t.Fatalf("%s: keys after create and revoke:\n%s\nwant\n%s", tr.name, after, before)
		}
	}
}

func keyInfoNames(resp *pb.ListKeysResponse) []string {
	var out []string
	for _, k := range resp.GetKeys() {
		out = append(out, k.GetName())
	}
	return out
}
