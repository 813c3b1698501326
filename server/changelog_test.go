package server_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/protobase/protobase/client"
	pb "github.com/protobase/protobase/gen/protobase/v1"
	"github.com/protobase/protobase/internal/store"
	"github.com/protobase/protobase/server"
	"github.com/protobase/protobase/server/servertest"
)

// randomBlob is a big.Blob of id holding n random bytes, and the bytes.
func randomBlob(id int64, n int, seed uint64) (*anypb.Any, []byte) {
	data := make([]byte, n)
	r := rand.New(rand.NewPCG(seed, uint64(id)))
	for i := range data {
		data[i] = byte(r.Uint32())
	}
	b := protowire.AppendTag(nil, 1, protowire.VarintType)
	b = protowire.AppendVarint(b, uint64(id))
	b = protowire.AppendTag(b, 2, protowire.BytesType)
	b = protowire.AppendBytes(b, data)
	return &anypb.Any{TypeUrl: blobURL, Value: b}, data
}

// flushStore writes a stopped server's memtables to tables and compacts
// them, so that every record and log entry is in a table to damage.
func flushStore(t *testing.T, dir string) {
	t.Helper()
	st, err := store.Open(store.Options{Dir: dir, Sync: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := st.Compact(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestStopWithStuckCall stops a server while a Scan is stuck in storage:
// its record's block is damaged, and Pebble searches a damaged block for a
// flipped bit before it fails the read (seconds for a block of a few MiB),
// where no cancellation reaches. Stop cuts the call at the shutdown
// timeout and returns soon after, abandoning it, instead of waiting for
// the search.
func TestStopWithStuckCall(t *testing.T) {
	dir := t.TempDir()
	cfg := server.Config{DataDir: dir, WatchRetention: -1, ShutdownTimeout: time.Second, MetricsAddr: "127.0.0.1:0"}
	ts := startServer(t, cfg)
	ts.mustApply(map[string]string{"big.proto": blobProto})
	rec, data := randomBlob(1, 3<<20, 1)
	ts.mustWrite(pb.WriteOp_WRITE_OP_INSERT, []*anypb.Any{rec})
	ts.stop()
	flushStore(t, dir)
	servertest.FlipTableByte(t, dir, data[1<<20:1<<20+64])

	cfg.GRPCAddr = "127.0.0.1:0"
	srv, err := server.Start(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.Dial(srv.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	scan, err := c.API().Scan(context.Background(), &pb.ScanRequest{Query: &pb.Query{Type: "big.Blob"}})
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		for {
			if _, err := scan.Recv(); err != nil {
				return
			}
		}
	}()
	// Stop once the server runs the call.
	for deadline := time.Now().Add(30 * time.Second); ; {
		fams := scrape(t, "http://"+srv.MetricsAddr()+"/metrics")
		if v, _ := metricValue(fams, "grpc_server_started_total", map[string]string{"grpc_method": "Scan"}); v >= 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the server never started the Scan")
		}
		time.Sleep(20 * time.Millisecond)
	}
	stopped := make(chan error, 1)
	go func() { stopped <- srv.Stop() }()
	// The bound: the timeout, the cut's 2 s, and room for a loaded machine.
	select {
	case err := <-stopped:
		if !errors.Is(err, server.ErrStopAbandoned) {
			t.Fatalf("Stop with a stuck call = %v, want ErrStopAbandoned", err)
		}
	case <-time.After(cfg.ShutdownTimeout + 2*time.Second + 5*time.Second):
		t.Fatal("Stop did not return within the shutdown timeout and the cut's wait")
	}
}
