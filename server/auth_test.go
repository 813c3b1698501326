package server_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/protobase/protobase/client"
	labv1 "github.com/protobase/protobase/gen/protobase/lab/v1"
	pb "github.com/protobase/protobase/gen/protobase/v1"
	pbgrpc "github.com/protobase/protobase/gen/protobase/v1/protobasev1grpc"
	"github.com/protobase/protobase/internal/auth"
	"github.com/protobase/protobase/server"
	"github.com/protobase/protobase/server/servertest"
)

// authEnv is a server requiring API keys, with REST and embedded NATS, the
// shop schema, a few records, and one key per role and scope. ts.c holds
// the admin key.
type authEnv struct {
	t    *testing.T
	ts   *testServer
	keys map[string]string // by name; "admin" is the bootstrap key
}

// authKeys are the keys every authEnv creates: name -> role, types.
var authKeys = []struct {
	name, role string
	types      []string
}{
	{"reader", "read", nil},
	{"writer", "write", nil},
	{"schemer", "schema", nil},
	{"user-reader", "read", []string{"shop.User"}},
	{"user-writer", "write", []string{"shop.User"}},
	{"user-schemer", "schema", []string{"shop.User"}},
}

func startAuthServer(t *testing.T, cfg server.Config) *authEnv {
	t.Helper()
	admin, err := auth.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	if cfg.DataDir == "" {
		cfg.DataDir = t.TempDir()
	}
	cfg.Auth, cfg.AdminKey, cfg.NoSync = true, admin, true
	cfg.HTTPAddr, cfg.NATS, cfg.NATSAddr = "127.0.0.1:0", true, "127.0.0.1:0"
	e := &authEnv{t: t, ts: startAuthed(t, cfg, admin), keys: map[string]string{"admin": admin}}
	e.ts.MustApply(map[string]string{"shop.proto": shopProto})
	e.ts.MustWrite(pb.WriteOp_WRITE_OP_INSERT, []*anypb.Any{e.user(1), e.user(2), e.order(1, 1)})
	for _, k := range authKeys {
		role, _ := auth.ParseRole(k.role)
		resp, err := e.ts.C.CreateKey(context.Background(), &pb.CreateKeyRequest{Name: k.name, Role: role.Proto(), Types: k.types})
		if err != nil {
			t.Fatalf("create key %s: %v", k.name, err)
		}
		e.keys[k.name] = resp.Key
	}
	return e
}

// startAuthed starts a server and a client holding key.
func startAuthed(t *testing.T, cfg server.Config, key string) *testServer {
	t.Helper()
	cfg.GRPCAddr = "127.0.0.1:0"
	srv, err := server.Start(context.Background(), cfg)
	if err != nil {
		t.Fatalf("start server: %v", err)
	}
	c, err := client.Dial(srv.Addr(), client.WithAPIKey(key))
	if err != nil {
		t.Fatal(err)
	}
	ts := &testServer{servertest.With(t, srv, cfg, c)}
	return ts
}

func (e *authEnv) user(id int) *anypb.Any {
	return e.ts.Rec("shop.User", fmt.Sprintf(`{"id": %d, "name": "n%d", "email": "u%d@example.com"}`, id, id, id))
}

func (e *authEnv) order(user, id int) *anypb.Any {
	return e.ts.Rec("shop.Order", fmt.Sprintf(`{"user_id": %d, "id": %d, "total": 1.5}`, user, id))
}

// api returns a client holding the named key ("" for none).
func (e *authEnv) api(name string) pbgrpc.ProtobaseClient {
	return pbgrpc.NewProtobaseClient(e.conn(name))
}

// conn returns a connection holding the named key ("" for none).
func (e *authEnv) conn(name string) *grpc.ClientConn {
	e.t.Helper()
	var opts []client.Option
	if name != "" {
		opts = append(opts, client.WithAPIKey(e.keys[name]))
	}
	c, err := client.Dial(e.ts.Srv.Addr(), opts...)
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { c.Close() })
	return c.Conn()
}

// state renders everything a refused call must leave as it was: the
// schema, every record, the key names.
func (e *authEnv) state() string {
	e.t.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, "schema %d\n", schemaVersion(e.t, e))
	for _, typ := range []string{"shop.User", "shop.Order"} {
		for _, m := range e.ts.Records(typ) {
			js, _ := protojson.Marshal(m)
			fmt.Fprintf(&b, "%s %s\n", typ, js)
		}
	}
	for _, k := range e.ts.Srv.Keys().List(nil) {
		fmt.Fprintf(&b, "key %s %s %v\n", k.Name, k.Role, k.Types)
	}
	return b.String()
}

// rpc is one call of the API, made so that it would change something (or
// read a record type) if it were allowed.
type rpc struct {
	name   string
	denied string // a key whose role or scope does not allow the call; "" if every key may
	call   func(ctx context.Context, api pbgrpc.ProtobaseClient) error
}

func (e *authEnv) rpcs() []rpc {
	u := []*anypb.Any{e.user(50)}
	users := &pb.Query{Type: "shop.User"}
	orders := &pb.Query{Type: "shop.Order"}
	moreShop := strings.Replace(shopProto, "message Line {", "message Extra {\n  option (protobase.v1.record) = { primary_key: \"id\" };\n  int64 id = 1;\n}\n\nmessage Line {", 1)
	return []rpc{
		{"ApplySchema", "writer", func(ctx context.Context, api pbgrpc.ProtobaseClient) error {
			_, err := api.ApplySchema(ctx, &pb.ApplySchemaRequest{Files: map[string]string{"shop.proto": moreShop}})
			return err
		}},
		{"GetSchema", "", func(ctx context.Context, api pbgrpc.ProtobaseClient) error {
			_, err := api.GetSchema(ctx, &pb.GetSchemaRequest{})
			return err
		}},
		{"Insert", "reader", func(ctx context.Context, api pbgrpc.ProtobaseClient) error {
			return clientStream(ctx, api.Insert, u)
		}},
		{"Update", "reader", func(ctx context.Context, api pbgrpc.ProtobaseClient) error {
			return clientStream(ctx, api.Update, []*anypb.Any{e.ts.Rec("shop.User", `{"id": 1, "name": "changed"}`)})
		}},
		{"Upsert", "reader", func(ctx context.Context, api pbgrpc.ProtobaseClient) error {
			return clientStream(ctx, api.Upsert, u)
		}},
		{"Remove", "reader", func(ctx context.Context, api pbgrpc.ProtobaseClient) error {
			return clientStream(ctx, api.Remove, []*anypb.Any{e.user(1)})
		}},
		{"Write", "reader", func(ctx context.Context, api pbgrpc.ProtobaseClient) error {
			st, err := api.Write(ctx)
			if err != nil {
				return err
			}
			recs := []*anypb.Any{e.user(51)}
			if err := st.Send(&pb.WriteStreamRequest{Op: pb.WriteOp_WRITE_OP_INSERT, Records: recs, Ack: true}); err != nil && !errors.Is(err, io.EOF) {
				return err
			}
			_, err = st.Recv()
			return err
		}},
		{"Search", "user-reader", func(ctx context.Context, api pbgrpc.ProtobaseClient) error {
			return search(ctx, api, orders)
		}},
		{"Scan", "user-reader", func(ctx context.Context, api pbgrpc.ProtobaseClient) error {
			st, err := api.Scan(ctx, &pb.ScanRequest{Query: orders})
			if err != nil {
				return err
			}
			for {
				if _, err := st.Recv(); err != nil {
					if errors.Is(err, io.EOF) {
						return nil
					}
					return err
				}
			}
		}},
		{"Query", "user-reader", func(ctx context.Context, api pbgrpc.ProtobaseClient) error {
			_, err := api.Query(ctx, &pb.QueryRequest{Query: orders})
			return err
		}},
		{"Get", "user-reader", func(ctx context.Context, api pbgrpc.ProtobaseClient) error {
			_, err := api.Get(ctx, &pb.GetRequest{Type: "shop.Order", KeyRecords: []*anypb.Any{e.order(1, 1)}})
			return err
		}},
		{"CreateKey", "schemer", func(ctx context.Context, api pbgrpc.ProtobaseClient) error {
			_, err := api.CreateKey(ctx, &pb.CreateKeyRequest{Name: "new", Role: pb.KeyRole_KEY_ROLE_ADMIN})
			return err
		}},
		{"ListKeys", "schemer", func(ctx context.Context, api pbgrpc.ProtobaseClient) error {
			_, err := api.ListKeys(ctx, &pb.ListKeysRequest{})
			return err
		}},
		{"RevokeKey", "schemer", func(ctx context.Context, api pbgrpc.ProtobaseClient) error {
			_, err := api.RevokeKey(ctx, &pb.RevokeKeyRequest{Name: "reader"})
			return err
		}},
		{"Watch", "user-reader", func(ctx context.Context, api pbgrpc.ProtobaseClient) error {
			// Allowed, a watch sends its start position first; the call
			// then ends here.
			ctx, cancel := context.WithCancel(ctx)
			defer cancel()
			st, err := api.Watch(ctx, &pb.WatchRequest{Types: []string{"shop.User", "shop.Order"}})
			if err != nil {
				return err
			}
			_, err = st.Recv()
			return err
		}},
		{"Search(users)", "", func(ctx context.Context, api pbgrpc.ProtobaseClient) error {
			return search(ctx, api, users)
		}},
	}
}

// clientStream sends one batch on a client-streaming write call.
func clientStream(ctx context.Context, open func(context.Context, ...grpc.CallOption) (grpc.ClientStreamingClient[pb.WriteRequest, pb.WriteResponse], error), recs []*anypb.Any) error {
	st, err := open(ctx)
	if err != nil {
		return err
	}
	if err := st.Send(&pb.WriteRequest{Records: recs}); err != nil && !errors.Is(err, io.EOF) {
		return err
	}
	_, err = st.CloseAndRecv()
	return err
}

// search runs queries on one Search stream; the first query error becomes
// the call's error.
func search(ctx context.Context, api pbgrpc.ProtobaseClient, qs ...*pb.Query) error {
	st, err := api.Search(ctx)
	if err != nil {
		return err
	}
	if err := st.Send(&pb.SearchRequest{Queries: qs}); err != nil && !errors.Is(err, io.EOF) {
		return err
	}
	_ = st.CloseSend()
	for {
		resp, err := st.Recv()
		if err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
		for _, qe := range resp.Errors {
			return status.Error(codes.Code(qe.Code), qe.Message)
		}
	}
}

func wantCallCode(t *testing.T, what string, err error, want codes.Code) {
	t.Helper()
	if got := status.Code(err); got != want {
		t.Fatalf("%s: got %v (%v), want %v", what, got, err, want)
	}
}

func TestAuthGRPCEveryRPC(t *testing.T) {
	e := startAuthServer(t, server.Config{})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	before := e.state()
	for _, r := range e.rpcs() {
		wantCallCode(t, r.name+" without a key", r.call(ctx, e.api("")), codes.Unauthenticated)
		bad := *e
		bad.keys = map[string]string{"forged": "pb_" + strings.Repeat("A", 32)}
		wantCallCode(t, r.name+" with an unknown key", r.call(ctx, bad.api("forged")), codes.Unauthenticated)
		if r.denied != "" {
			wantCallCode(t, r.name+" with key "+r.denied, r.call(ctx, e.api(r.denied)), codes.PermissionDenied)
		}
		if after := e.state(); after != before {
			t.Fatalf("%s refused, yet the state changed:\n%s\nwant\n%s", r.name, after, before)
		}
	}
	// The same calls pass with a key that allows them (admin), so the
	// refusals above are the keys' doing.
	for _, r := range e.rpcs() {
		if err := r.call(ctx, e.api("admin")); err != nil {
			t.Fatalf("%s with the admin key: %v", r.name, err)
		}
	}
}

func TestAuthHealthOpenLabAdminOnly(t *testing.T) {
	e := startAuthServer(t, server.Config{Lab: true})
	ctx := context.Background()
	if _, err := healthpb.NewHealthClient(e.conn("")).Check(ctx, &healthpb.HealthCheckRequest{}); err != nil {
		t.Fatalf("health without a key: %v", err)
	}
	for key, want := range map[string]codes.Code{"": codes.Unauthenticated, "schemer": codes.PermissionDenied, "admin": codes.OK} {
		_, err := labv1.NewLabClient(e.conn(key)).Stats(ctx, &labv1.StatsRequest{})
		wantCallCode(t, "lab stats with key "+key, err, want)
	}
}
