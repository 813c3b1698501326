package server_test

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/protobase/protobase/client"
	pb "github.com/protobase/protobase/gen/protobase/v1"
	"github.com/protobase/protobase/internal/store/pebble"
	"github.com/protobase/protobase/server"
)

// diskFullDeadline is the deadline of each write of TestDiskFull: a write
// the full disk hangs meets it; one refused at once does not.
const diskFullDeadline = 10 * time.Second

// On a full disk (the data directory's filesystem fails every write of a
// table with ENOSPC), a write is refused at once with RESOURCE_EXHAUSTED
// naming the disk, and so is the next one; reads go on; the storage
// engine's failures are logged a bounded number of times and retried
// at a growing interval, not in a loop; the metrics say so. Once space is
// freed, writes are taken again without a restart, and every acknowledged
// record is there, also after a restart.
func TestDiskFull(t *testing.T) {
	fs := pebble.NewMemFS()
	logs := &logRecorder{}
	ts := startServer(t, server.WithMemFS(server.Config{
		DataDir: "/data", MetricsAddr: "127.0.0.1:0", MemTableBytes: 4 << 20, Logger: slog.New(logs),
	}, fs))
	// Runs before the server's stop (cleanups run last first): a server
	// that hangs on the full disk can stop once space is back.
	t.Cleanup(func() { fs.SetDiskFull(false) })
	ts.MustApply(map[string]string{"shop.proto": shopProto})

	acked := 0 // users 1..acked are acknowledged
	batch := func(n int) []*anypb.Any {
		recs := make([]*anypb.Any, 0, diskFullBatch)
		for id := n*diskFullBatch + 1; id <= (n+1)*diskFullBatch; id++ {
			recs = append(recs, ts.Rec("shop.User", fmt.Sprintf(`{"id": %d, "name": "user %d", "email": "u%d@example.com", "tags": [%q]}`,
				id, id%97, id, strings.Repeat("t", 900))))
		}
		return recs
	}
	for n := range 3 {
		writeWithin(t, ts, batch(n))
		acked += diskFullBatch
	}

	fs.SetDiskFull(true)
	var refused error
	for n := acked / diskFullBatch; refused == nil; n++ {
		if n == 400 {
			t.Fatalf("%d MiB written to a full disk, none refused", n*diskFullBatch>>10)
		}
		if refused = writeWithin(t, ts, batch(n)); refused == nil {
			acked += diskFullBatch // in the write-ahead log, which has room
		}
	}
	wantDiskFull(t, refused)
	next := acked / diskFullBatch
	// Another write stream, and a single record, meet the same answer;
	// so does a schema change.
	wantDiskFull(t, writeWithin(t, ts, batch(next)[:1]))
	_, err := ts.Apply(map[string]string{"shop.proto": shopProto + `
message Note {
  option (protobase.v1.record) = { primary_key: "id" };
  int64 id = 1;
}
`}, client.SchemaOptions{})
	wantDiskFull(t, err)

	// Reads go on.
	if got, err := ts.C.Get(context.Background(), "shop.User", acked); err != nil || got[0] == nil {
		t.Fatalf("read of user %d on a full disk: %v, %v", acked, got, err)
	}
	if n := ts.Count("shop.User"); n != acked {
		t.Fatalf("%d users on a full disk, want the %d acknowledged", n, acked)
	}

	// While the disk stays full, the storage engine retries its flush
	// at a growing interval, and says so in a few lines.
	logsBefore, failsBefore := len(logs.all()), fs.NoSpaceErrors()
	time.Sleep(3 * time.Second)
	if n := len(logs.all()) - logsBefore; n > 3 {
		t.Errorf("%d lines logged in 3 s of a full disk, want at most 3; the last: %q", n, lastLines(logs, 3))
	}
	if n := fs.NoSpaceErrors() - failsBefore; n > 100 {
		t.Errorf("%d writes failed for the full disk in 3 s: the storage engine retries in a loop", n)
	}
	if logs.count("the disk is full") == 0 {
		t.Errorf("no line says the disk is full; last logged: %q", lastLines(logs, 5))
	}
	fams := scrape(t, "http://"+ts.Srv.MetricsAddr()+"/metrics")
	for name, want := range map[string]float64{"protobase_storage_disk_full": 1, "protobase_storage_disk_full_refused_total": 2, "protobase_write_errors_total": 2} {
		if v, ok := metricValue(fams, name, nil); !ok || v < want {
			t.Errorf("%s = %v (served: %v), want at least %v", name, v, ok, want)
		}
	}

	// Space is freed: the refused batch goes in once the engine has
	// written its tables again.
	fs.SetDiskFull(false)
	for start := time.Now(); ; time.Sleep(100 * time.Millisecond) {
		err := writeWithin(t, ts, batch(next))
		if err == nil {
			acked += diskFullBatch
			break
		}
		wantDiskFull(t, err)
		if time.Since(start) > 30*time.Second {
			t.Fatal("writes still refused 30 s after space was freed")
		}
	}
	writeWithin(t, ts, batch(next+1))
	acked += diskFullBatch
	fams = scrape(t, "http://"+ts.Srv.MetricsAddr()+"/metrics")
	if v, _ := metricValue(fams, "protobase_storage_disk_full", nil); v != 0 {
		t.Errorf("protobase_storage_disk_full = %v after space was freed, want 0", v)
	}
	if n := ts.Count("shop.User"); n != acked {
		t.Fatalf("%d users after space was freed, want the %d acknowledged", n, acked)
	}
	ts = ts.restart()
	if n := ts.Count("shop.User"); n != acked {
		t.Fatalf("%d users after a restart, want the %d acknowledged", n, acked)
	}
}

// diskFullBatch is the records of one batch of TestDiskFull, of about
// 1 KiB each.
const diskFullBatch = 200

// writeWithin inserts recs on a stream of its own and returns the error,
// failing the test if the write got no answer by diskFullDeadline.
func writeWithin(t *testing.T, ts *testServer, recs []*anypb.Any) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), diskFullDeadline)
	defer cancel()
	st, err := ts.C.API().Insert(ctx)
	if err == nil {
		if err = st.Send(&pb.WriteRequest{Records: recs}); err == nil {
			_, err = st.CloseAndRecv()
		}
	}
	if status.Code(err) == codes.DeadlineExceeded {
		t.Fatalf("a write got no answer within %v: %v", diskFullDeadline, err)
	}
	return err
}

func wantDiskFull(t *testing.T, err error) {
	t.Helper()
	st := status.Convert(err)
	if st.Code() != codes.ResourceExhausted || !strings.Contains(st.Message(), "disk holding the data directory is full") {
		t.Fatalf("on a full disk: %v, want RESOURCE_EXHAUSTED naming the full disk", err)
	}
}

func diskItemSchema(indexed bool) map[string]string {
	ix := ""
	if indexed {
		ix = ` index: { fields: "label" }`
	}
	return map[string]string{"disk.proto": `syntax = "proto3";
package disk;
import "protobase/v1/options.proto";

message Item {
  option (protobase.v1.record) = { primary_key: "id"` + ix + ` };
  int64 id = 1;
  string label = 2;
}
`}
}

// An index build that meets a full disk waits, says so, and ends by
// itself once space is freed.
func TestDiskFullIndexBuild(t *testing.T) {
	skipLargeInRaceRun(t)
	fs := pebble.NewMemFS()
	logs := &logRecorder{}
	ts := startServer(t, server.WithMemFS(server.Config{DataDir: "/data", MemTableBytes: 4 << 20, Logger: slog.New(logs)}, fs))
	t.Cleanup(func() { fs.SetDiskFull(false) })
	ts.MustApply(diskItemSchema(false))
	const items = 100_000 // index entries enough to fill the index instance's memtable
	for n := 0; n < items; n += 1000 {
		recs := make([]*anypb.Any, 0, 1000)
		for id := n; id < n+1000; id++ {
			recs = append(recs, ts.Rec("disk.Item", fmt.Sprintf(`{"id": %d, "label": "label %d"}`, id, id*7919%items)))
		}
		ts.MustWrite(insert, recs)
	}

	// The schema change itself reaches only the log; the build's index
	// entries need tables.
	fs.SetDiskFull(true)
	ts.MustApply(diskItemSchema(true))
	for start := time.Now(); logs.count("index build waits for disk space") == 0; time.Sleep(20 * time.Millisecond) {
		if time.Since(start) > 30*time.Second {
			t.Fatalf("no index build waits for disk space; last logged: %q", lastLines(logs, 5))
		}
	}
	fs.SetDiskFull(false)
	waitIndex(t, ts, "disk.Item", "label", pb.IndexState_INDEX_STATE_READY)
	ts.Stop()
	report, err := server.CheckMemFS(t.Context(), fs, "/data")
	if err != nil {
		t.Fatal(err)
	}
	if !report.OK() || report.Records != items || report.Entries != items {
		var out strings.Builder
		_, _ = report.WriteTo(&out)
		t.Fatalf("after the build: %s", out.String())
	}
}

// lastLines is the last n messages logs kept.
func lastLines(logs *logRecorder, n int) []string {
	all := logs.all()
	return all[max(len(all)-n, 0):]
}
