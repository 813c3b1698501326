package server_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/anypb"

	labv1 "github.com/protobase/protobase/gen/protobase/lab/v1"
	pb "github.com/protobase/protobase/gen/protobase/v1"
	"github.com/protobase/protobase/server"
)

// A key with a scope may not call the lab service, whose Sink runs queries
// on any type and whose Stats counts them all, whatever its role; an
// admin key without one may.
func TestAuthLabNeedsUnscopedKey(t *testing.T) {
	e := startAuthServer(t, server.Config{Lab: true})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	resp, err := e.ts.C.CreateKey(ctx, &pb.CreateKeyRequest{Name: "user-admin", Role: pb.KeyRole_KEY_ROLE_ADMIN, Types: []string{"shop.User"}})
	if err != nil {
		t.Fatal(err)
	}
	e.keys["user-admin"] = resp.Key
	sink := func(key string) error {
		st, err := labv1.NewLabClient(e.conn(key)).Sink(ctx)
		if err != nil {
			return err
		}
		if err := st.Send(&pb.SearchRequest{Queries: []*pb.Query{{Type: "shop.Order", Filter: "total > 1"}}}); err != nil {
			return err
		}
		_, err = st.CloseAndRecv()
		return err
	}
	stats := func(key string) error {
		_, err := labv1.NewLabClient(e.conn(key)).Stats(ctx, &labv1.StatsRequest{})
		return err
	}
	wantCallCode(t, "Lab.Sink with an admin key scoped to shop.User", sink("user-admin"), codes.PermissionDenied)
	wantCallCode(t, "Lab.Stats with an admin key scoped to shop.User", stats("user-admin"), codes.PermissionDenied)
	if err := sink("admin"); err != nil {
		t.Fatalf("Lab.Sink with the unscoped admin key: %v", err)
	}
	if err := stats("admin"); err != nil {
		t.Fatalf("Lab.Stats with the unscoped admin key: %v", err)
	}
}

// A key revoked while a Search query or a Backup streams its answer stops
// it: the server sends nothing more of it (the client may still read what
// gRPC had queued before), a Backup ends with UNAUTHENTICATED, and a
// Search stream at its next request, as an idle one does.
func TestAuthRevokeStopsRunningStreams(t *testing.T) {
	e := startAuthServer(t, server.Config{MaxResultRecords: 1})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	big := strings.Repeat("x", 60<<10)
	const users = 300
	for b := range users / 50 {
		var recs []*anypb.Any
		for i := range 50 {
			id := 1000 + b*50 + i
			recs = append(recs, e.ts.Rec("shop.User", fmt.Sprintf(`{"id": %d, "name": %q, "email": "p%d@x"}`, id, big, id)))
		}
		e.ts.MustWrite(pb.WriteOp_WRITE_OP_INSERT, recs)
	}
	for name, role := range map[string]pb.KeyRole{"reader-2": pb.KeyRole_KEY_ROLE_READ, "admin-2": pb.KeyRole_KEY_ROLE_ADMIN} {
		resp, err := e.ts.C.CreateKey(ctx, &pb.CreateKeyRequest{Name: name, Role: role})
		if err != nil {
			t.Fatal(err)
		}
		e.keys[name] = resp.Key
	}
	revoke := func(name string) {
		if _, err := e.ts.C.API().RevokeKey(ctx, &pb.RevokeKeyRequest{Name: name}); err != nil {
			t.Fatal(err)
		}
	}

	s, err := e.api("reader-2").Search(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Send(&pb.SearchRequest{Queries: []*pb.Query{{Type: "shop.User"}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Recv(); err != nil {
		t.Fatal(err)
	}
	revoke("reader-2")
	_ = s.Send(&pb.SearchRequest{Queries: []*pb.Query{{Type: "shop.User"}}})
	for records := 0; ; {
		r, err := s.Recv()
		if err != nil {
			wantCallCode(t, "search after revocation", err, codes.Unauthenticated)
			break
		}
		for _, res := range r.Results {
			records += len(res.Records)
		}
		if len(r.Done) > 0 {
			t.Fatalf("search: the query ran to its end after the revocation (%d of %d records after it)", records, users+2)
		}
	}

	b, err := e.api("admin-2").Backup(ctx, &pb.BackupRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Recv(); err != nil {
		t.Fatal(err)
	}
	revoke("admin-2")
	for {
		if _, err := b.Recv(); err != nil {
			wantCallCode(t, "backup after revocation", err, codes.Unauthenticated)
			break
		}
	}
}
