package server_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

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
