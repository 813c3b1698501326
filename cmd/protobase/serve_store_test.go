package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/protobase/protobase/internal/exitstatus"
	"github.com/protobase/protobase/internal/store/etcd/etcdtest"
)

func TestServeStoreFlagErrors(t *testing.T) {
	pw := filepath.Join(t.TempDir(), "pw")
	if err := os.WriteFile(pw, []byte("secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"--store", "rocks"}, `--store "rocks": want pebble or etcd`},
		{[]string{"--store", ""}, "--store must not be empty"},
		{[]string{"--store", "etcd"}, "--etcd-endpoints must name at least one etcd member"},
		{[]string{"--etcd-endpoints", "127.0.0.1:2379"}, "the --etcd-* flags only apply with --store etcd"},
		{[]string{"--store", "etcd", "--etcd-endpoints", "no-port"}, `--etcd-endpoints "no-port": want HOST:PORT`},
		{[]string{"--store", "etcd", "--etcd-endpoints", "ftp://h:1"}, `want HOST:PORT or http(s)://HOST:PORT`},
		{[]string{"--store", "etcd", "--etcd-endpoints", "http://h:1/path"}, `want HOST:PORT or http(s)://HOST:PORT`},
		{[]string{"--store", "etcd", "--etcd-endpoints", "h:1", "--etcd-prefix", "pb"}, `--etcd-prefix "pb": want a key prefix starting with /`},
		{[]string{"--store", "etcd", "--etcd-endpoints", "h:1", "--etcd-prefix", ""}, "--etcd-prefix must not be empty"},
		{[]string{"--store", "etcd", "--etcd-endpoints", "h:1", "--etcd-cert", "c.pem"}, "--etcd-cert and --etcd-key go together"},
		{[]string{"--store", "etcd", "--etcd-endpoints", "h:1", "--etcd-user", "u"}, "--etcd-user and --etcd-password-file go together"},
		{[]string{"--store", "etcd", "--etcd-endpoints", "h:1", "--sync=false"}, "--sync=false applies to Pebble"},
		{[]string{"--store", "etcd", "--etcd-endpoints", "h:1", "--cache-bytes", "1000"}, "--cache-bytes applies to Pebble"},
		{[]string{"--store", "etcd", "--etcd-endpoints", strings.Repeat("x", 5000) + ":1"}, "want HOST:PORT"},
	}
	for _, tc := range cases {
		r := cli(t, "", append([]string{"serve", "--data", t.TempDir()}, tc.args...)...)
		wantCode(t, r, exitstatus.Usage)
		wantContains(t, r.stderr, tc.want)
	}
	// Well-formed flags, a cluster nobody runs: serve fails to start
	// (within the dial timeout) and says why.
	r := cli(t, "", "serve", "--data", t.TempDir(), "--grpc-addr", "127.0.0.1:0", "--store", "etcd",
		"--etcd-endpoints", "127.0.0.1:1", "--etcd-user", "u", "--etcd-password-file", pw)
	wantCode(t, r, exitstatus.Failed)
	wantContains(t, r.stderr, "cannot start the server", "127.0.0.1:1")
}

func TestServeOnEtcd(t *testing.T) {
	endpoint := etcdtest.Start(t, etcdtest.Roomy)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	addr, done := startServe(t, ctx, "--data", t.TempDir(), "--store", "etcd", "--etcd-endpoints", endpoint, "--etcd-prefix", "/cli/")
	applyShop(t, addr)
	mustCLI(t, `{"id": 1, "name": "Ann"}`, "--addr", addr, "insert", "--type", "shop.User")
	r := cli(t, `{"id": 1}`, "--addr", addr, "insert", "--type", "shop.User")
	wantCode(t, r, exitstatus.Failed)
	wantContains(t, r.stderr, "AlreadyExists", "a record with this primary key exists")
	cancel()
	select {
	case code := <-done:
		if code != exitstatus.OK {
			t.Fatalf("serve exited %d after shutdown", code)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("serve did not stop")
	}
}
