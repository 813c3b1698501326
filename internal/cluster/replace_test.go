package cluster_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/protobase/protobase/client"
	pb "github.com/protobase/protobase/gen/protobase/v1"
	"github.com/protobase/protobase/internal/cluster"
	"github.com/protobase/protobase/internal/testschema"
)

// startCluster builds the programs and starts three members, with room
// for a batch of a few hundred records in a transaction, and servers
// servers over them, stopped when the test ends.
func startCluster(t *testing.T, servers int) *cluster.Cluster {
	t.Helper()
	if testing.Short() {
		t.Skip("starts an etcd cluster and servers as processes")
	}
	dir, err := cluster.BinCache(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	bins, err := cluster.Build(t.Context(), dir)
	if err != nil {
		t.Fatal(err)
	}
	c, err := cluster.Start(t.Context(), bins, t.TempDir(), cluster.Options{Servers: servers,
		Etcd: cluster.EtcdOptions{Args: []string{"--max-txn-ops", "1024"}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, s := range c.Servers {
			_ = s.Kill()
		}
		c.Etcd.KillAll()
	})
	return c
}

// users inserts shop.Users first..first+n-1 through c in one batch.
func users(t *testing.T, c *client.Client, first, n int) {
	t.Helper()
	recs := make([]proto.Message, n)
	for i := range recs {
		id := first + i
		v := protowire.AppendVarint(protowire.AppendTag(nil, 1, protowire.VarintType), uint64(id)) //nolint:gosec // small ids
		v = protowire.AppendString(protowire.AppendTag(v, 3, protowire.BytesType), "u"+strconv.Itoa(id)+"@example.com")
		recs[i] = &anypb.Any{TypeUrl: "type.googleapis.com/shop.User", Value: v}
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	if _, err := c.Apply(ctx, client.Batch{Op: client.Insert, Records: recs}); err != nil {
		t.Fatalf("insert users %d to %d: %v", first, first+n-1, err)
	}
}

// count counts the shop.Users through c.
func count(t *testing.T, c *client.Client) uint64 {
	t.Helper()
	sc := c.Scan(t.Context(), &pb.Query{Type: "shop.User", Count: true}, client.ScanOptions{})
	for sc.Next() {
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("count users: %v", err)
	}
	return sc.Count()
}

// A member lost for good is replaced by a new one on a new data directory
// and new ports, which catches up and votes: once it has, the cluster
// keeps its quorum with another of the first members down, and the server
// goes on writing. The member that came back after the replacement
// restarts on its data, as before.
func TestReplaceMember(t *testing.T) {
	c := startCluster(t, 1)
	srv := c.Servers[0]
	cl, err := client.Dial(srv.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if _, err := cl.ApplySchema(t.Context(), map[string]string{"shop.proto": testschema.Shop}, client.SchemaOptions{}); err != nil {
		t.Fatal(err)
	}
	users(t, cl, 1, 100)

	lost := c.Etcd.Members()[1]
	if err := c.Etcd.Kill(1); err != nil {
		t.Fatal(err)
	}
	users(t, cl, 101, 100) // two of three commit
	ctx, cancel := context.WithTimeout(t.Context(), 2*cluster.StartTimeout)
	defer cancel()
	m, err := c.Etcd.Replace(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	if m.Name != "m4" || m.Dir == lost.Dir || m.ClientURL == lost.ClientURL || c.Etcd.Members()[1] != m {
		t.Fatalf("replacement %+v of %+v: want m4 on a new directory and port, in m2's place", m, lost)
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: c.Etcd.Endpoints(), DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	list, err := cli.MemberList(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, mem := range list.Members {
		names = append(names, mem.Name)
	}
	if len(names) != 3 || names[0]+names[1]+names[2] == "" {
		t.Fatalf("members after the replacement: %q, want m1, m3 and m4", names)
	}
	for _, n := range names {
		if n != "m1" && n != "m3" && n != "m4" {
			t.Fatalf("members after the replacement: %q, want m1, m3 and m4", names)
		}
	}
	// The new member catches up: a read of its own state (serializable)
	// finds every key the cluster holds.
	want, err := cli.Get(ctx, "/protobase/", clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		t.Fatal(err)
	}
	own, err := clientv3.New(clientv3.Config{Endpoints: []string{m.ClientURL}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer own.Close()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		got, err := own.Get(ctx, "/protobase/", clientv3.WithPrefix(), clientv3.WithCountOnly(),
			clientv3.WithSerializable(), clientv3.WithRev(want.Header.Revision))
		if err == nil && got.Count == want.Count {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the new member did not catch up within 30 s (%v)", err)
		}
	}

	// m1 down as well: m3 and the new m4 are a quorum of three.
	if err := c.Etcd.Kill(0); err != nil {
		t.Fatal(err)
	}
	users(t, cl, 201, 100)
	if got := count(t, cl); got != 300 {
		t.Errorf("%d users after the replacement, want 300", got)
	}
	if err := c.Etcd.Restart(ctx, 0); err != nil {
		t.Fatal(err)
	}
	users(t, cl, 301, 100)
	if got := count(t, cl); got != 400 {
		t.Errorf("%d users after m1's restart, want 400", got)
	}
}
