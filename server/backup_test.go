package server_test

import (
	"context"
	"encoding/base64"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	pb "github.com/protobase/protobase/gen/protobase/v1"
	"github.com/protobase/protobase/internal/backup"
	"github.com/protobase/protobase/server"
)

// A backup taken while two writers run holds exactly the batches at
// positions up to its manifest's, and a server started on the restored
// directory serves them, with the schema; a damaged file is refused before
// anything is written.
func TestBackupWhileWriting(t *testing.T) {
	ts := startServer(t, server.Config{})
	ts.MustApply(map[string]string{"shop.proto": shopProto})

	type batch struct {
		pos uint64
		ids []int
	}
	var (
		mu      sync.Mutex
		acked   []batch
		wg      sync.WaitGroup
		started = make(chan struct{}, 2)
	)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for w := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			st, err := ts.C.API().Write(ctx)
			if err != nil {
				t.Error(err)
				return
			}
			var sent [][]int
			for b := 0; b < 40; b++ {
				var recs []*anypb.Any
				var ids []int
				for i := range 25 {
					id := w*1_000_000 + b*100 + i + 1
					ids = append(ids, id)
					recs = append(recs, ts.Rec("shop.User", `{"id": `+itoa(id)+`, "email": "e`+itoa(id)+`"}`))
				}
				if err := st.Send(&pb.WriteStreamRequest{Op: pb.WriteOp_WRITE_OP_INSERT, Records: recs, Ack: true}); err != nil {
					t.Error(err)
					return
				}
				sent = append(sent, ids)
				resp, err := st.Recv()
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				acked = append(acked, batch{resp.GetPosition(), sent[resp.GetBatch()]})
				mu.Unlock()
				if b == 5 {
					started <- struct{}{}
				}
			}
			_ = st.CloseSend()
		}()
	}
	<-started
	<-started
	dir := filepath.Join(t.TempDir(), "backup")
	m, err := ts.C.Backup(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if m.GetPosition() == 0 || m.GetSchemaVersion() != 1 || m.GetStore() != "pebble" {
		t.Fatalf("manifest %v", m)
	}
	want := map[int64]bool{}
	for _, b := range acked {
		if b.pos <= m.GetPosition() {
			for _, id := range b.ids {
				want[int64(id)] = true
			}
		}
	}
	if len(want) == 0 || len(want) == 2*40*25 {
		t.Fatalf("the backup at position %d holds %d of %d records: it was not taken while writes went on", m.GetPosition(), len(want), 2*40*25)
	}
	if _, err := backup.Verify(dir); err != nil {
		t.Fatal(err)
	}

	// Restore and serve.
	data := filepath.Join(t.TempDir(), "restored")
	if _, err := backup.Restore(dir, data); err != nil {
		t.Fatal(err)
	}
	rs := startServer(t, server.Config{DataDir: data})
	got := map[int64]bool{}
	for _, u := range rs.Records("shop.User") {
		got[u.Get(u.Descriptor().Fields().ByName("id")).Int()] = true
	}
	if len(got) != len(want) {
		t.Errorf("restored %d records, want %d (position %d)", len(got), len(want), m.GetPosition())
	}
	for id := range want {
		if !got[id] {
			t.Errorf("record %d (acknowledged at or before the backup's position) is missing", id)
			break
		}
	}
	if gs, err := rs.C.GetSchema(context.Background()); err != nil || gs.GetVersion() != 1 {
		t.Fatalf("restored schema: %v %v", gs.GetVersion(), err)
	}
	if rep, err := server.Check(context.Background(), data); err == nil {
		t.Fatalf("check while the restored server runs: %v", rep) // locked: it is in use
	}
	// A second restore, checked: the index entries (in the store's index
	// instance, index/ in the backup) came back with the records.
	again := filepath.Join(t.TempDir(), "again")
	if _, err := backup.Restore(dir, again); err != nil {
		t.Fatal(err)
	}
	if rep, err := server.Check(context.Background(), again); err != nil || !rep.OK() || rep.Entries < uint64(2*len(want)) {
		t.Fatalf("check of the restored copy: %+v, %v; want both indexes' entries of %d records", rep, err, len(want))
	}

	// A damaged file: restore refuses, and writes nothing.
	ents, _ := os.ReadDir(dir)
	var victim string
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), ".sst") || strings.HasPrefix(e.Name(), "MANIFEST") {
			victim = filepath.Join(dir, e.Name())
			break
		}
	}
	b, err := os.ReadFile(victim)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)/2] ^= 0x40
	if err := os.WriteFile(victim, b, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := backup.Verify(dir); err == nil || !strings.Contains(err.Error(), "damaged") {
		t.Fatalf("verify of a damaged backup: %v", err)
	}
	bad := filepath.Join(t.TempDir(), "bad")
	if _, err := backup.Restore(dir, bad); err == nil || !strings.Contains(err.Error(), "damaged") {
		t.Fatalf("restore of a damaged backup: %v", err)
	}
	if _, err := os.Stat(bad); !os.IsNotExist(err) {
		t.Fatalf("a refused restore created %s: %v", bad, err)
	}
}

// A restored backup holds every record at the version it had when the
// backup was taken, on every read path, and a write on the restored store
// gets a version above all of them: a version is the commit sequence of
// the batch that wrote it, and the copy holds the records' headers and
// the sequence as they were at the backup's position.
func TestBackupKeepsVersions(t *testing.T) {
	ts := startServer(t, server.Config{})
	ts.MustApply(map[string]string{"shop.proto": shopProto})
	user := func(id int, email string) *anypb.Any {
		return ts.Rec("shop.User", `{"id": `+itoa(id)+`, "name": "u", "email": "`+email+`"}`)
	}
	ts.MustWrite(insert, []*anypb.Any{user(1, "a"), user(2, "b"), user(3, "c")})
	ts.MustWrite(insert, []*anypb.Any{user(4, "d")})
	if err := ts.Flush(); err != nil { // some versions in tables, some in the log
		t.Fatal(err)
	}
	ts.MustWrite(update, []*anypb.Any{user(1, "a2")})
	recs, before := getVersions(t, ts, 1, 2, 3, 4)
	want := map[string]uint64{} // by the record's bytes
	for i, r := range recs {
		want[string(r.Value)] = before[i]
	}
	if before[0] <= before[3] || before[3] <= before[1] || before[1] != before[2] {
		t.Fatalf("versions before the backup: %v", before)
	}

	dir := filepath.Join(t.TempDir(), "backup")
	m, err := ts.C.Backup(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	ts.MustWrite(update, []*anypb.Any{user(2, "b2")}) // after the backup: not in it

	data := filepath.Join(t.TempDir(), "restored")
	if _, err := backup.Restore(dir, data); err != nil {
		t.Fatal(err)
	}
	rs := startServer(t, server.Config{DataDir: data})
	_, after := getVersions(t, rs, 1, 2, 3, 4)
	if !slices.Equal(after, before) {
		t.Fatalf("versions after the restore %v, want %v", after, before)
	}
	for path, got := range readAll(t, rs, "") {
		if len(got) != len(want) {
			t.Errorf("%s: %d records, want %d", path, len(got), len(want))
		}
		for _, v := range got {
			if w, ok := want[string(v.rec)]; !ok || v.ver != w {
				t.Errorf("%s: record %x at version %d, want %d", path, v.rec, v.ver, w)
			}
		}
	}
	rs.MustWrite(update, []*anypb.Any{user(3, "c2")})
	_, later := getVersions(t, rs, 3)
	if later[0] <= slices.Max(before) || later[0] <= m.GetPosition() {
		t.Fatalf("a write after the restore: version %d, want above %v and the backup's position %d", later[0], before, m.GetPosition())
	}
}

// protobase_backups_in_progress counts a Backup call while it streams the
// copy, and drops back once the call ends.
func TestBackupsInProgressMetric(t *testing.T) {
	skipLargeInRaceRun(t)
	ts := startServer(t, server.Config{MetricsAddr: "127.0.0.1:0"})
	ts.MustApply(map[string]string{"shop.proto": shopProto})
	// A copy larger than gRPC's flow-control windows (16 MiB at most per
	// stream) cannot be sent while the client reads nothing: the call is
	// still running when the metric is read.
	rnd := rand.New(rand.NewPCG(1, 2))
	for b := range 4 {
		var recs []*anypb.Any
		for i := range 6 {
			blob := make([]byte, 768<<10)
			for j := range blob {
				blob[j] = byte(rnd.Uint32())
			}
			recs = append(recs, ts.Rec("shop.User", fmt.Sprintf(`{"id": %d, "email": "e%d", "name": %q}`,
				b*10+i+1, b*10+i+1, base64.StdEncoding.EncodeToString(blob))))
		}
		ts.MustWrite(pb.WriteOp_WRITE_OP_INSERT, recs)
	}
	url := "http://" + ts.Srv.MetricsAddr() + "/metrics"
	running := func() float64 {
		t.Helper()
		v, ok := metricValue(scrape(t, url), "protobase_backups_in_progress", nil)
		if !ok {
			t.Fatal("no protobase_backups_in_progress")
		}
		return v
	}
	if v := running(); v != 0 {
		t.Fatalf("before a backup: %v in progress", v)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	st, err := ts.C.API().Backup(ctx, &pb.BackupRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Recv(); err != nil {
		t.Fatal(err)
	}
	if v := running(); v != 1 {
		t.Fatalf("during a backup: %v in progress, want 1", v)
	}
	total := 0
	for {
		c, err := st.Recv()
		if err != nil {
			break
		}
		total += proto.Size(c)
	}
	if total < 20<<20 {
		t.Fatalf("the backup is %d bytes: too small to keep its call blocked on flow control", total)
	}
	deadline := time.Now().Add(30 * time.Second)
	for running() != 0 {
		if time.Now().After(deadline) {
			t.Fatal("the backup still counts as in progress after its stream ended")
		}
		time.Sleep(10 * time.Millisecond)
	}
}
