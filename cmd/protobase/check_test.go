package main

import (
	"context"
	"math/rand/v2"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/protobase/protobase/client"
	pb "github.com/protobase/protobase/gen/protobase/v1"
	"github.com/protobase/protobase/internal/exitstatus"

	"github.com/protobase/protobase/internal/keyspace"
	"github.com/protobase/protobase/internal/store/etcd/etcdtest"
	"github.com/protobase/protobase/internal/store/pebble"
	"github.com/protobase/protobase/server"
	"github.com/protobase/protobase/server/servertest"
)

func TestCheckCommand(t *testing.T) {
	dir := t.TempDir()
	srv, err := server.Start(context.Background(), server.Config{DataDir: dir, GRPCAddr: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	applyShop(t, srv.Addr())
	mustCLI(t, `{"id": 1, "name": "Ann", "email": "ann@example.com"}
{"id": 2, "name": "Bob", "email": "bob@example.com"}
`, "--addr", srv.Addr(), "insert", "--type", "shop.User")

	// A running server holds the directory: check refuses, exit 1.
	r := cli(t, "", "check", "--data", dir)
	wantCode(t, r, exitstatus.Failed)
	wantContains(t, r.stderr, "is a server using the data directory")
	if err := srv.Stop(); err != nil {
		t.Fatal(err)
	}

	r = mustCLI(t, "", "check", "--data", dir)
	wantContains(t, r.stdout, "1 types, 1 indexes, 2 records, 2 index entries, 1 change-log entries: consistent")

	// Lose one index entry (entries live under the tag byte 0x02, see
	// docs/design.md): check names it and exits 1.
	st, err := pebble.Open(pebble.Options{Dir: dir, Layout: keyspace.Layout{}, Sync: true})
	if err != nil {
		t.Fatal(err)
	}
	it, err := st.NewIter([]byte{0x02}, []byte{0x03})
	if err != nil {
		t.Fatal(err)
	}
	if !it.First() {
		t.Fatal("no index entry stored")
	}
	b := st.NewBatch()
	b.Delete(it.Key())
	if err := it.Close(); err != nil {
		t.Fatal(err)
	}
	if err := st.Commit(b); err != nil {
		t.Fatal(err)
	}
	b.Close()
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	r = cli(t, "", "check", "--data", dir)
	wantCode(t, r, exitstatus.Failed)
	wantContains(t, r.stdout, "missing-entry shop.User index ", "INCONSISTENT: 1 problems")
	wantContains(t, r.stderr, "the data directory is inconsistent")

	wantCode(t, cli(t, "", "check", "--data", ""), exitstatus.Usage)
	wantCode(t, cli(t, "", "check", "extra"), exitstatus.Usage)
	r = mustCLI(t, "", "check", "--help")
	wantContains(t, r.stdout, "protobase check --data DIR", "read-only", "Exit status")
}

// check --store etcd reads a store on etcd while its server runs; its flags
// are refused with a usage error when they do not go together.
func TestCheckCommandEtcd(t *testing.T) {
	endpoint := etcdtest.Start(t, etcdtest.Roomy)
	srv, err := server.Start(context.Background(), server.Config{DataDir: t.TempDir(), GRPCAddr: "127.0.0.1:0",
		Store: server.StoreEtcd, Etcd: server.EtcdConfig{Endpoints: []string{endpoint}, Prefix: "/check/"}})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Stop()
	applyShop(t, srv.Addr())
	mustCLI(t, `{"id": 1, "name": "Ann", "email": "ann@example.com"}
`, "--addr", srv.Addr(), "insert", "--type", "shop.User")
	r := mustCLI(t, "", "check", "--store", "etcd", "--etcd-endpoints", endpoint, "--etcd-prefix", "/check/")
	wantContains(t, r.stdout, "1 records, 1 index entries, 0 change-log entries: consistent")

	for _, args := range [][]string{
		{"check", "--store", "etcd"}, // no endpoints
		{"check", "--store", "etcd", "--etcd-endpoints", endpoint, "--data", "x"}, // --data with etcd
		{"check", "--etcd-endpoints", endpoint},                                   // etcd flags without --store etcd
		{"check", "--store", "mysql"},
		{"check", "--store", "etcd", "--etcd-endpoints", "not a host"},
	} {
		wantCode(t, cli(t, "", args...), exitstatus.Usage)
	}
}

// A table of the change log damaged (one flipped byte, as a tamperer who
// recomputes a backup's checksums leaves it): check reads the log, fails
// naming it, and does not take the damage for a running server.
func TestCheckDamagedChangeLog(t *testing.T) {
	dir := t.TempDir()
	srv, err := server.Start(context.Background(), server.Config{DataDir: dir, GRPCAddr: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.Dial(srv.Addr())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.ApplySchema(t.Context(), map[string]string{"big.proto": `syntax = "proto3";
package big;
import "protobase/v1/options.proto";
message Blob {
  option (protobase.v1.record) = { primary_key: "id" };
  int64 id = 1;
  bytes data = 2;
}
`}, client.SchemaOptions{}); err != nil {
		t.Fatal(err)
	}
	blob := func(seed uint64) (*anypb.Any, []byte) {
		data := make([]byte, 100<<10)
		r := rand.New(rand.NewPCG(seed, 1))
		for i := range data {
			data[i] = byte(r.Uint32())
		}
		b := protowire.AppendVarint([]byte{1 << 3}, 1)
		b = protowire.AppendBytes(append(b, 2<<3|2), data)
		return &anypb.Any{TypeUrl: "type.googleapis.com/big.Blob", Value: b}, data
	}
	old, oldData := blob(1)
	cur, _ := blob(2)
	ins, err := c.API().Insert(t.Context())
	if err == nil {
		err = ins.Send(&pb.WriteRequest{Records: []*anypb.Any{old}})
	}
	if err == nil {
		_, err = ins.CloseAndRecv()
	}
	if err != nil {
		t.Fatal(err)
	}
	up, err := c.API().Update(t.Context())
	if err == nil {
		err = up.Send(&pb.WriteRequest{Records: []*anypb.Any{cur}})
	}
	if err == nil {
		_, err = up.CloseAndRecv()
	}
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	if err := srv.Stop(); err != nil {
		t.Fatal(err)
	}
	// Into tables, the replaced record compacted away: only the log holds
	// the old record's bytes.
	st, err := pebble.Open(pebble.Options{Dir: dir, Layout: keyspace.Layout{}, Sync: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := st.Compact(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	mustCLI(t, "", "check", "--data", dir)
	servertest.FlipTableByte(t, dir, oldData[50<<10:50<<10+64])

	r := cli(t, "", "check", "--data", dir)
	wantCode(t, r, exitstatus.Failed)
	wantContains(t, r.stderr, "the change log", "checksum mismatch")
	if strings.Contains(r.stderr, "is a server using") {
		t.Errorf("check of a damaged table hints at a running server:\n%s", r.stderr)
	}
}
