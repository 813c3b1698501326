package server_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	rpb "google.golang.org/grpc/reflection/grpc_reflection_v1"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/known/anypb"

	pb "github.com/protobase/protobase/gen/protobase/v1"
	pbgrpc "github.com/protobase/protobase/gen/protobase/v1/protobasev1grpc"
	"github.com/protobase/protobase/internal/auth"
	"github.com/protobase/protobase/server"
	"github.com/protobase/protobase/server/servertest"
)

func TestAuthScopeWriteBatchFailsWhole(t *testing.T) {
	e := startAuthServer(t, server.Config{})
	ctx := context.Background()
	before := e.state()
	api := e.api("user-writer")
	err := clientStream(ctx, api.Insert, []*anypb.Any{e.user(60), e.order(60, 1), e.user(61)})
	we := servertest.WriteErr(t, err, codes.PermissionDenied)
	if we.Record != 1 || !strings.HasSuffix(we.TypeUrl, "shop.Order") || we.RecordsApplied != 0 {
		t.Fatalf("write error %v: want record 1 of type shop.Order, nothing applied", we)
	}
	if !strings.Contains(we.Reason, "shop.Order") {
		t.Fatalf("reason %q does not name the type", we.Reason)
	}
	if e.state() != before {
		t.Fatal("a refused batch changed the state")
	}
	// In scope, the same key writes.
	if err := clientStream(ctx, api.Insert, []*anypb.Any{e.user(60)}); err != nil {
		t.Fatal(err)
	}
	// A later batch outside the scope keeps the earlier ones, and says so.
	st, err := api.Upsert(ctx)
	if err != nil {
		t.Fatal(err)
	}
	_ = st.Send(&pb.WriteRequest{Records: []*anypb.Any{e.user(62)}})
	_ = st.Send(&pb.WriteRequest{Records: []*anypb.Any{e.order(62, 1)}})
	_, err = st.CloseAndRecv()
	we = servertest.WriteErr(t, err, codes.PermissionDenied)
	if we.Batch != 1 || we.BatchesApplied != 1 || we.RecordsApplied != 1 {
		t.Fatalf("write error %v: want batch 1 refused after 1 applied", we)
	}
	if e.ts.Count("shop.Order") != 1 || e.ts.Count("shop.User") != 4 {
		t.Fatalf("users %d, orders %d after the refused batches", e.ts.Count("shop.User"), e.ts.Count("shop.Order"))
	}
}

func TestAuthScopeSearchQueryFailsAlone(t *testing.T) {
	e := startAuthServer(t, server.Config{})
	st, err := e.api("user-reader").Search(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	users, orders := &pb.Query{Type: "shop.User"}, &pb.Query{Type: "shop.Order"}
	if err := st.Send(&pb.SearchRequest{Queries: []*pb.Query{users, orders, users}}); err != nil {
		t.Fatal(err)
	}
	_ = st.CloseSend()
	counts, errs := map[uint64]uint64{}, map[uint64]*pb.QueryError{}
	for {
		resp, err := st.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range resp.Done {
			counts[d.Query] = d.Count
		}
		for _, qe := range resp.Errors {
			errs[qe.Query] = qe
		}
	}
	if counts[0] != 2 || counts[2] != 2 {
		t.Fatalf("in-scope queries returned %v, want 2 users each", counts)
	}
	if qe := errs[1]; qe == nil || codes.Code(qe.Code) != codes.PermissionDenied || !strings.Contains(qe.Message, "shop.Order") || len(errs) != 1 {
		t.Fatalf("query errors %v: want query 1 alone PERMISSION_DENIED naming shop.Order", errs)
	}
}

func TestAuthScopeSchemaAndReflection(t *testing.T) {
	e := startAuthServer(t, server.Config{})
	ctx := context.Background()
	resp, err := e.api("user-reader").GetSchema(ctx, &pb.GetSchemaRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Types) != 1 || resp.Types[0].Name != "shop.User" {
		t.Fatalf("scoped GetSchema types %v, want shop.User alone", resp.Types)
	}
	if messages(resp.Descriptors)["shop.Order"] || !messages(resp.Descriptors)["shop.User"] {
		t.Fatalf("scoped GetSchema descriptors: %v", messages(resp.Descriptors))
	}
	if _, ok := resp.Files["shop.proto"]; ok {
		t.Fatal("scoped GetSchema shows the source of a file declaring shop.Order")
	}

	ref, err := rpb.NewServerReflectionClient(e.conn("user-reader")).ServerReflectionInfo(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ask := func(sym string) *rpb.ServerReflectionResponse {
		t.Helper()
		if err := ref.Send(&rpb.ServerReflectionRequest{MessageRequest: &rpb.ServerReflectionRequest_FileContainingSymbol{FileContainingSymbol: sym}}); err != nil {
			t.Fatal(err)
		}
		r, err := ref.Recv()
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	if r := ask("shop.Order"); r.GetErrorResponse() == nil || codes.Code(r.GetErrorResponse().ErrorCode) != codes.NotFound {
		t.Fatalf("reflection of shop.Order for a shop.User key: %v", r)
	}
	set := &descriptorpb.FileDescriptorSet{}
	for _, b := range ask("shop.User").GetFileDescriptorResponse().GetFileDescriptorProto() {
		f := &descriptorpb.FileDescriptorProto{}
		if err := proto.Unmarshal(b, f); err != nil {
			t.Fatal(err)
		}
		set.File = append(set.File, f)
	}
	if m := messages(set); !m["shop.User"] || m["shop.Order"] {
		t.Fatalf("reflection of shop.User shows %v", m)
	}

	// A scoped schema key may change its own types only.
	withAge := strings.Replace(shopProto, "repeated string tags = 4;", "repeated string tags = 4;\n  int32 age = 5;", 1)
	withTotal := strings.Replace(shopProto, "Line line = 4;", "Line line = 4;\n  string note = 5;", 1)
	schemer := e.api("user-schemer")
	before := schemaVersion(t, e)
	_, err = schemer.ApplySchema(ctx, &pb.ApplySchemaRequest{Files: map[string]string{"shop.proto": withTotal}})
	wantCallCode(t, "scoped ApplySchema changing shop.Order", err, codes.PermissionDenied)
	if v := schemaVersion(t, e); v != before {
		t.Fatalf("refused ApplySchema moved the version %d -> %d", before, v)
	}
	if _, err := schemer.ApplySchema(ctx, &pb.ApplySchemaRequest{Files: map[string]string{"shop.proto": withAge}}); err != nil {
		t.Fatalf("scoped ApplySchema changing shop.User: %v", err)
	}
	// A change the planner refuses for another type's sake (shop.Order,
	// with its records, would be dropped) names neither that type nor its
	// records to a scoped key; one refused for its own type's sake says why.
	other := "syntax = \"proto3\";\npackage x;\nmessage A { int64 id = 1; }\n"
	_, err = schemer.ApplySchema(ctx, &pb.ApplySchemaRequest{DryRun: true, Files: map[string]string{"x.proto": other}})
	wantCallCode(t, "scoped dry run dropping every type", err, codes.PermissionDenied)
	if strings.Contains(err.Error(), "shop.Order") || strings.Contains(err.Error(), "records") {
		t.Fatalf("scoped dry run dropping every type: %v names what the key may not see", err)
	}
	nameNumber := strings.Replace(withAge, "string name = 2;", "int64 name = 2;", 1)
	if nameNumber == withAge {
		t.Fatal("the test's shop.User no longer has the field it rewrites")
	}
	_, err = schemer.ApplySchema(ctx, &pb.ApplySchemaRequest{DryRun: true, Files: map[string]string{"shop.proto": nameNumber}})
	wantCallCode(t, "scoped dry run changing the type of shop.User's name", err, codes.FailedPrecondition)
}

// TestAuthSchemaKeyRole: GetSchema names the caller's role, scoped or not,
// over gRPC and REST (where the web console reads it), and nothing
// without keys.
func TestAuthSchemaKeyRole(t *testing.T) {
	e := startAuthServer(t, server.Config{})
	for name, want := range map[string]string{"admin": "admin", "reader": "read", "writer": "write",
		"schemer": "schema", "user-reader": "read", "user-writer": "write"} {
		resp, err := e.api(name).GetSchema(t.Context(), &pb.GetSchemaRequest{})
		if err != nil {
			t.Fatal(err)
		}
		if resp.GetKeyRole() != want {
			t.Errorf("GetSchema with key %s: key_role %q, want %q", name, resp.GetKeyRole(), want)
		}
		code, body := e.rest(name, "GET", "/v1/schema", "")
		if code != http.StatusOK || !strings.Contains(body, `"keyRole":"`+want+`"`) {
			t.Errorf("GET /v1/schema with key %s: %d, keyRole missing or not %q", name, code, want)
		}
	}
	open := startServer(t, server.Config{})
	resp, err := open.C.GetSchema(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if resp.GetKeyRole() != "" {
		t.Errorf("GetSchema without keys: key_role %q, want empty", resp.GetKeyRole())
	}
}

func messages(set *descriptorpb.FileDescriptorSet) map[string]bool {
	out := map[string]bool{}
	for _, f := range set.GetFile() {
		for _, m := range f.MessageType {
			out[f.GetPackage()+"."+m.GetName()] = true
		}
	}
	return out
}

func TestAuthRevokeReachesOpenStreams(t *testing.T) {
	e := startAuthServer(t, server.Config{})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	users := &pb.Query{Type: "shop.User"}

	search, err := e.api("reader").Search(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := search.Send(&pb.SearchRequest{Queries: []*pb.Query{users}}); err != nil {
		t.Fatal(err)
	}
	for done := false; !done; {
		resp, err := search.Recv()
		if err != nil {
			t.Fatalf("search before revocation: %v", err)
		}
		done = len(resp.Done) > 0
	}
	ins, err := e.api("writer").Insert(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := ins.Send(&pb.WriteRequest{Records: []*anypb.Any{e.user(70)}}); err != nil {
		t.Fatal(err)
	}

	for _, name := range []string{"reader", "writer"} {
		if _, err := e.ts.C.API().RevokeKey(ctx, &pb.RevokeKeyRequest{Name: name}); err != nil {
			t.Fatal(err)
		}
	}
	// The open streams end at their next message.
	_ = search.Send(&pb.SearchRequest{Queries: []*pb.Query{users}})
	for {
		_, err := search.Recv()
		if err != nil {
			wantCallCode(t, "search after revocation", err, codes.Unauthenticated)
			break
		}
	}
	_ = ins.Send(&pb.WriteRequest{Records: []*anypb.Any{e.user(71)}})
	_, err = ins.CloseAndRecv()
	we := servertest.WriteErr(t, err, codes.Unauthenticated)
	if we.BatchesApplied != 1 {
		t.Fatalf("write error %v: want the batch before the revocation applied", we)
	}
	if e.ts.Count("shop.User") != 3 {
		t.Fatalf("%d users; want the 2 seeded and the one batch before the revocation", e.ts.Count("shop.User"))
	}
	// New calls fail at once.
	wantCallCode(t, "query with a revoked key", search0(ctx, e.api("reader")), codes.Unauthenticated)

	// Keys survive a restart, revocations too.
	e.ts.Stop()
	e.ts = startAuthed(t, e.ts.Cfg, e.keys["admin"])
	wantCallCode(t, "revoked key after restart", search0(ctx, e.api("reader")), codes.Unauthenticated)
	if err := search0(ctx, e.api("user-reader")); err != nil {
		t.Fatalf("a key after restart: %v", err)
	}
}

func search0(ctx context.Context, api pbgrpc.ProtobaseClient) error {
	_, err := api.Query(ctx, &pb.QueryRequest{Query: &pb.Query{Type: "shop.User"}})
	return err
}

// syncBuf is a log sink safe for the server's goroutines.
type syncBuf struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuf) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuf) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func TestAuthAdminKeyBootstrap(t *testing.T) {
	dir := t.TempDir()
	var logs syncBuf
	cfg := server.Config{DataDir: dir, Auth: true, Logger: slog.New(slog.NewTextHandler(&logs, nil))}
	ts := startAuthed(t, cfg, "")
	path := filepath.Join(dir, server.AdminKeyFile)
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Fatalf("%s has mode %v, want 0600", path, fi.Mode().Perm())
	}
	b, _ := os.ReadFile(path)
	key := strings.TrimSpace(string(b))
	if auth.ParseKey(key) != nil {
		t.Fatalf("%s does not hold a key", path)
	}
	if !strings.Contains(logs.String(), path) || strings.Contains(logs.String(), key) {
		t.Fatalf("the log must name the file and never the key:\n%s", logs.String())
	}
	e := &authEnv{t: t, ts: ts, keys: map[string]string{"admin": key}}
	if _, err := e.api("admin").ListKeys(context.Background(), &pb.ListKeysRequest{}); err != nil {
		t.Fatalf("the bootstrap key is not an admin key: %v", err)
	}
	// Key and schema changes leave audit lines naming the key, never a key.
	created, err := e.api("admin").CreateKey(context.Background(), &pb.CreateKeyRequest{Name: "ops", Role: pb.KeyRole_KEY_ROLE_SCHEMA})
	if err != nil {
		t.Fatal(err)
	}
	e.keys["ops"] = created.Key
	if _, err := e.api("ops").ApplySchema(context.Background(), &pb.ApplySchemaRequest{Files: map[string]string{"shop.proto": shopProto}}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.api("admin").RevokeKey(context.Background(), &pb.RevokeKeyRequest{Name: "ops"}); err != nil {
		t.Fatal(err)
	}
	for _, line := range []string{`msg="audit: api key created" by=admin key=ops`, `msg="audit: schema applied" by=ops`, `msg="audit: api key revoked" by=admin key=ops`} {
		if !strings.Contains(logs.String(), line) {
			t.Errorf("no audit line %s in\n%s", line, logs.String())
		}
	}
	if strings.Contains(logs.String(), created.Key) || strings.Contains(logs.String(), key) {
		t.Fatal("a key was logged")
	}
	// A restart with keys present creates none.
	ts.Stop()
	_ = os.Remove(path)
	e.ts = startAuthed(t, cfg, key)
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Fatalf("a restart with keys wrote %s again", path)
	}

	// A key given by the configuration (PROTOBASE_ADMIN_KEY) is used as it is.
	given, _ := auth.GenerateKey()
	dir2 := t.TempDir()
	ts2 := startAuthed(t, server.Config{DataDir: dir2, Auth: true, AdminKey: given}, given)
	if _, err := ts2.C.ListKeys(context.Background()); err != nil {
		t.Fatalf("the configured admin key: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir2, server.AdminKeyFile)); !os.IsNotExist(err) {
		t.Fatal("a configured admin key was written to a file")
	}
	if _, err := server.Start(context.Background(), server.Config{DataDir: t.TempDir(), GRPCAddr: "127.0.0.1:0", Auth: true, AdminKey: "not-a-key"}); err == nil {
		t.Fatal("a malformed configured admin key was accepted")
	}
}

func TestAuthDefaultOnOffLoopback(t *testing.T) {
	// Binding 0.0.0.0 here only exercises the flag logic; all traffic goes
	// to 127.0.0.1.
	ts := startAuthed(t, server.Config{DataDir: t.TempDir(), MetricsAddr: "0.0.0.0:0"}, "")
	if !ts.Srv.AuthRequired() {
		t.Fatal("a listener on 0.0.0.0 without --insecure-no-auth serves without keys")
	}
	_, err := ts.C.GetSchema(context.Background())
	wantCallCode(t, "GetSchema without a key", err, codes.Unauthenticated)
	_, port, _ := net.SplitHostPort(ts.Srv.MetricsAddr())
	resp, err := http.Get("http://127.0.0.1:" + port + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("metrics without a key: %d, want 401", resp.StatusCode)
	}
	admin, _ := os.ReadFile(filepath.Join(ts.Cfg.DataDir, server.AdminKeyFile))
	req, _ := http.NewRequest("GET", "http://127.0.0.1:"+port+"/metrics", nil)
	req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(admin)))
	if resp, err = http.DefaultClient.Do(req); err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("metrics with the admin key: %d", resp.StatusCode)
	}

	ts2 := startAuthed(t, server.Config{DataDir: t.TempDir(), MetricsAddr: "0.0.0.0:0", InsecureNoAuth: true}, "")
	if ts2.Srv.AuthRequired() {
		t.Fatal("--insecure-no-auth did not turn authentication off")
	}
	if _, err := ts2.C.GetSchema(context.Background()); err != nil {
		t.Fatal(err)
	}
	ts3 := startServer(t, server.Config{})
	if ts3.Srv.AuthRequired() {
		t.Fatal("authentication is on for a loopback-only server")
	}
	if _, err := server.Start(context.Background(), server.Config{DataDir: t.TempDir(), GRPCAddr: "127.0.0.1:0", Auth: true, InsecureNoAuth: true}); err == nil {
		t.Fatal("Auth with InsecureNoAuth was accepted")
	}
	for addr, want := range map[string]bool{"127.0.0.1:1": true, "localhost:1": true, "[::1]:1": true, ":1": false, "0.0.0.0:1": false, "10.0.0.1:1": false, "[::]:1": false} {
		if got := auth.IsLoopback(addr); got != want {
			t.Errorf("IsLoopback(%q) = %v", addr, got)
		}
	}
}

// schemaVersion is the server's schema version, as an admin reads it.
func schemaVersion(t *testing.T, e *authEnv) uint64 {
	t.Helper()
	resp, err := e.api("admin").GetSchema(t.Context(), &pb.GetSchemaRequest{})
	if err != nil {
		t.Fatal(err)
	}
	return resp.GetVersion()
}
