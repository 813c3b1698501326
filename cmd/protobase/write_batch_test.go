package main

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	labv1 "github.com/protobase/protobase/gen/protobase/lab/v1"
	"github.com/protobase/protobase/internal/exitstatus"
	"github.com/protobase/protobase/server"
)

// startLabServer starts a server with the lab service on (its Stats count
// the write batches applied) and cfg's limits.
func startLabServer(t *testing.T, cfg server.Config) (*server.Server, labv1.LabClient) {
	t.Helper()
	cfg.DataDir = t.TempDir()
	cfg.GRPCAddr = "127.0.0.1:0"
	cfg.Lab = true
	srv, err := server.Start(context.Background(), cfg)
	if err != nil {
		t.Fatalf("start server: %v", err)
	}
	t.Cleanup(func() {
		if err := srv.Stop(); err != nil {
			t.Errorf("stop server: %v", err)
		}
	})
	return srv, labClient(t, srv.Addr())
}

func labClient(t *testing.T, addr string) labv1.LabClient {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return labv1.NewLabClient(conn)
}

func labStats(t *testing.T, lab labv1.LabClient) *labv1.StatsResponse {
	t.Helper()
	st, err := lab.Stats(t.Context(), &labv1.StatsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// usersJSONL returns n shop.User lines from id first on, each with a name
// of nameBytes bytes.
func usersJSONL(first, n, nameBytes int) string {
	name := strings.Repeat("n", nameBytes)
	var b strings.Builder
	for i := first; i < first+n; i++ {
		fmt.Fprintf(&b, `{"id": %d, "name": %q, "email": "u%d@example.com"}`+"\n", i, name, i)
	}
	return b.String()
}

func TestInsertExactBatches(t *testing.T) {
	srv, lab := startLabServer(t, server.Config{})
	addr := srv.Addr()
	applyShop(t, addr)

	// 5000 records of ~330 bytes are 1.6 MiB: more than the writer's old
	// byte trigger, far less than the server's message limit.
	const n, batch = 20001, 5000
	p := writeFile(t, t.TempDir(), "users.jsonl", usersJSONL(0, n, 300))
	before := labStats(t, lab)
	mustCLI(t, "", "--addr", addr, "insert", "--type", "shop.User", "--batch", fmt.Sprint(batch), p)
	mid := labStats(t, lab)
	if got, want := mid.Batches-before.Batches, uint64(5); got != want {
		t.Errorf("from a file: %d batches, want %d (4 of %d and one of 1)", got, want, batch)
	}
	if got := mid.Records - before.Records; got != n {
		t.Errorf("from a file: %d records, want %d", got, n)
	}

	// The same from a pipe (stdin that is not a terminal).
	mustCLI(t, usersJSONL(n, n, 300), "--addr", addr, "insert", "--type", "shop.User", "--batch", fmt.Sprint(batch))
	after := labStats(t, lab)
	if got, want := after.Batches-mid.Batches, uint64(5); got != want {
		t.Errorf("from stdin: %d batches, want %d", got, want)
	}
	if got := after.Records - mid.Records; got != n {
		t.Errorf("from stdin: %d records, want %d", got, n)
	}
}

func TestInsertBatchOverServerLimit(t *testing.T) {
	srv, lab := startLabServer(t, server.Config{MaxRecordsPerBatch: 100})
	addr := srv.Addr()
	applyShop(t, addr)
	before := labStats(t, lab)
	r := cli(t, usersJSONL(0, 150, 1), "--addr", addr, "insert", "--type", "shop.User", "--batch", "101")
	wantCode(t, r, exitstatus.Usage)
	wantContains(t, r.stderr, "--batch 101 is over the server's limit of 100 records per batch")
	if st := labStats(t, lab); st.Batches != before.Batches || st.WriteErrors != before.WriteErrors {
		t.Errorf("something was sent: %d batches, %d refused", st.Batches-before.Batches, st.WriteErrors-before.WriteErrors)
	}
	// At the limit it works, in batches of exactly 100.
	mustCLI(t, usersJSONL(0, 150, 1), "--addr", addr, "insert", "--type", "shop.User", "--batch", "100")
	if got := labStats(t, lab).Batches - before.Batches; got != 2 {
		t.Errorf("%d batches, want 2", got)
	}
}

func TestInsertRecordOverMessageLimit(t *testing.T) {
	// 32 KiB: GetSchema's answer (16 KB) must still fit.
	srv, lab := startLabServer(t, server.Config{MaxMessageBytes: 32 << 10})
	addr := srv.Addr()
	applyShop(t, addr)
	// Records of ~10 KB in batches of 10: every batch is cut at the
	// message limit, none is refused. Then one record over it.
	in := usersJSONL(0, 10, 10000) + usersJSONL(10, 1, 40000) + usersJSONL(11, 1, 10)
	r := cli(t, in, "--addr", addr, "insert", "--type", "shop.User", "--batch", "10")
	wantCode(t, r, exitstatus.Failed)
	wantContains(t, r.stderr, "stdin line 11: a record of ", "over the server's limit of 32768 bytes per request (max_message_bytes)",
		"10 records before line 11 were written; nothing after it was sent")
	st := labStats(t, lab)
	if st.WriteErrors != 0 || st.Records != 10 || st.Batches < 3 {
		t.Errorf("%d batches, %d records, %d refused; want 10 records in 3 or more batches, none refused", st.Batches, st.Records, st.WriteErrors)
	}
}
