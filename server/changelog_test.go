package server_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/protobase/protobase/client"
	pb "github.com/protobase/protobase/gen/protobase/v1"
	"github.com/protobase/protobase/internal/keyspace"
	"github.com/protobase/protobase/internal/store/pebble"
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
	st, err := pebble.Open(pebble.Options{Dir: dir, Layout: keyspace.Layout{}, Sync: true})
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
// flipped bit before it fails the read (about 20 s for this 2 MiB block),
// where no cancellation reaches. Stop cuts the call at the shutdown
// timeout and returns soon after, abandoning it, instead of waiting for
// the search.
func TestStopWithStuckCall(t *testing.T) {
	dir := t.TempDir()
	cfg := server.Config{DataDir: dir, WatchRetention: -1, ShutdownTimeout: time.Second, MetricsAddr: "127.0.0.1:0"}
	ts := startServer(t, cfg)
	ts.MustApply(map[string]string{"big.proto": blobProto})
	rec, data := randomBlob(1, 2<<20, 1)
	ts.MustWrite(pb.WriteOp_WRITE_OP_INSERT, []*anypb.Any{rec})
	ts.Stop()
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

// TestWatchLargeUpdate updates a 40 MiB record: the change with its old
// record (80 MiB) is over the largest watch message (64 MiB by default).
// A watcher asking for old records gets the change without the old one,
// flagged, and goes on; one that does not ask gets it whole.
func TestWatchLargeUpdate(t *testing.T) {
	skipLargeInRaceRun(t)
	ts := startServer(t, server.Config{})
	ts.MustApply(map[string]string{"big.proto": blobProto})
	withOld := ts.watch(&pb.WatchRequest{Types: []string{"big.Blob"}, OldRecords: true})
	start := withOld.first()
	plain := ts.watch(&pb.WatchRequest{Types: []string{"big.Blob"}})
	plain.first()

	v1, _ := randomBlob(1, 40<<20, 1)
	v2, _ := randomBlob(1, 40<<20, 2)
	small, _ := randomBlob(2, 100, 3)
	ts.MustWrite(pb.WriteOp_WRITE_OP_INSERT, []*anypb.Any{v1})
	ts.MustWrite(pb.WriteOp_WRITE_OP_UPDATE, []*anypb.Any{v2})
	ts.MustWrite(pb.WriteOp_WRITE_OP_INSERT, []*anypb.Any{small})

	check := func(name string, got []*pb.Change, old bool) {
		t.Helper()
		checkChange(t, got[0], pb.ChangeOp_CHANGE_OP_INSERT, "big.Blob", v1, nil)
		up := got[1]
		if up.GetOp() != pb.ChangeOp_CHANGE_OP_UPDATE || !proto.Equal(up.GetRecord(), v2) || up.GetOldRecord() != nil ||
			up.GetOldRecordOmitted() != old || up.GetRecordOmitted() {
			t.Fatalf("%s: the update = op %v, record of %d bytes, old of %d, old omitted %v, record omitted %v; want the record, no old record, old omitted %v",
				name, up.GetOp(), len(up.GetRecord().GetValue()), len(up.GetOldRecord().GetValue()), up.GetOldRecordOmitted(), up.GetRecordOmitted(), old)
		}
		checkChange(t, got[2], pb.ChangeOp_CHANGE_OP_INSERT, "big.Blob", small, nil)
	}
	check("watcher with old records", withOld.next(3), true)
	check("watcher without", plain.next(3), false)

	// Resumed just before the update: the same.
	again := ts.watch(&pb.WatchRequest{Types: []string{"big.Blob"}, OldRecords: true, Start: after(start.GetCommit() + 1)})
	again.first()
	got := again.next(2)
	if !got[0].GetOldRecordOmitted() || !proto.Equal(got[1].GetRecord(), small) {
		t.Fatalf("resumed before the update: %v omitted, then %v", got[0].GetOldRecordOmitted(), got[1].GetPosition())
	}
}
