package server_test

import (
	"context"
	"os"
	"path/filepath"
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
