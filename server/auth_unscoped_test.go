package server_test

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

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

// The metrics name every record type: a key with a scope gets 403 from
// /metrics, one without gets the series, whatever its role. A server
// reachable off loopback without TLS says so in its log.
func TestAuthMetricsNeedUnscopedKey(t *testing.T) {
	var logs syncBuf
	e := startAuthServer(t, server.Config{MetricsAddr: "0.0.0.0:0", Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if !strings.Contains(logs.String(), "without TLS") {
		t.Fatalf("a server on 0.0.0.0 without TLS logged no warning:\n%s", logs.String())
	}
	_, port, _ := net.SplitHostPort(e.ts.Srv.MetricsAddr())
	get := func(key string) int {
		req, _ := http.NewRequest("GET", "http://127.0.0.1:"+port+"/metrics", nil)
		req.Header.Set("Authorization", "Bearer "+e.keys[key])
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	for key, want := range map[string]int{"user-reader": http.StatusForbidden, "reader": http.StatusOK, "admin": http.StatusOK} {
		if got := get(key); got != want {
			t.Fatalf("/metrics with key %s: %d, want %d", key, got, want)
		}
	}
}
