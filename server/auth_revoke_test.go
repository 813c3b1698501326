package server_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/anypb"

	pb "github.com/protobase/protobase/gen/protobase/v1"
	"github.com/protobase/protobase/server"
)

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
