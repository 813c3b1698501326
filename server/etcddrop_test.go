package server_test

import (
	"strings"
	"testing"

	"github.com/protobase/protobase/client"
	"github.com/protobase/protobase/internal/store/etcd/etcdtest"
	"github.com/protobase/protobase/server"
)

func TestDropEtcd(t *testing.T) {
	ep := etcdtest.Start(t, etcdtest.Roomy)
	for _, prefix := range []string{"", "/"} {
		err := server.DropEtcd(t.Context(), server.EtcdConfig{Endpoints: []string{ep}, Prefix: prefix})
		if err == nil || !strings.Contains(err.Error(), "name its prefix") {
			t.Errorf("prefix %q: %v, want a refusal", prefix, err)
		}
	}
	for _, e := range []server.EtcdConfig{
		{Prefix: "/x/"},
		{Endpoints: []string{"nohost"}, Prefix: "/x/"},
		{Endpoints: []string{ep}, Prefix: "x/"},
	} {
		if err := server.DropEtcd(t.Context(), e); err == nil {
			t.Errorf("DropEtcd(%+v) succeeded", e)
		}
	}

	// Two stores on one cluster: dropping one, a few keys per transaction,
	// leaves the other.
	defer server.SetDropChunk(2)()
	schemaFiles := func(prefix string) int {
		cfg := server.Config{DataDir: t.TempDir(), GRPCAddr: "127.0.0.1:0", Store: server.StoreEtcd,
			Etcd: server.EtcdConfig{Endpoints: []string{ep}, Prefix: prefix}}
		srv, err := server.Start(t.Context(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		defer srv.Stop()
		c, err := client.Dial(srv.Addr())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		sc, err := c.GetSchema(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if len(sc.Files) == 0 {
			if _, err := c.ApplySchema(t.Context(), map[string]string{"shop.proto": shopProto}, client.SchemaOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		return len(sc.Files)
	}
	schemaFiles("/a/")
	schemaFiles("/b/")
	if err := server.DropEtcd(t.Context(), server.EtcdConfig{Endpoints: []string{ep}, Prefix: "/a/"}); err != nil {
		t.Fatal(err)
	}
	if n := schemaFiles("/b/"); n != 1 {
		t.Errorf("store /b/ has %d schema files after /a/ was dropped, want 1", n)
	}
	if n := schemaFiles("/a/"); n != 0 {
		t.Errorf("store /a/ has %d schema files after it was dropped, want 0", n)
	}
}
