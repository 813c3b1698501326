package main

import (
	"context"
	"fmt"
	"maps"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/protobase/protobase/internal/exitstatus"
	"github.com/protobase/protobase/server"
)

// pitrProto has a unique index, a plain one, one on a repeated field, an
// aggregate index and an expiry, all of which a replay must maintain.
const pitrProto = `syntax = "proto3";
package shop;
import "protobase/v1/options.proto";

message User {
  option (protobase.v1.record) = {
    primary_key: "id"
    index: { fields: "email" unique: true }
    index: { fields: "name" }
    index: { fields: "tags" }
    aggregate: { name: "by_name" group_by: "name" sum: ["score"] }
    ttl: { field: "exp_ms" unit: TTL_UNIT_MILLISECONDS }
  };
  int64 id = 1;
  string name = 2;
  string email = 3;
  repeated string tags = 4;
  int64 score = 5;
  int64 exp_ms = 6;
}
`

// pitrModel is the records a store should hold: id → "id:name:email".
type pitrModel map[int]string

func (m pitrModel) upsert(t *testing.T, addr string, ids []int, name string) {
	t.Helper()
	var in strings.Builder
	for _, id := range ids {
		fmt.Fprintf(&in, `{"id": %d, "name": %q, "email": "u%d@x", "tags": ["t%d", "all"], "score": %d}`+"\n", id, name, id, id%3, id)
		m[id] = fmt.Sprintf("%d:%s:u%d@x", id, name, id)
	}
	mustCLI(t, in.String(), "--addr", addr, "upsert", "--type", "shop.User")
}

func (m pitrModel) remove(t *testing.T, addr string, ids []int) {
	t.Helper()
	var in strings.Builder
	for _, id := range ids {
		fmt.Fprintf(&in, `{"id": %d}`+"\n", id)
		delete(m, id)
	}
	mustCLI(t, in.String(), "--addr", addr, "remove", "--type", "shop.User")
}

func (m pitrModel) want() []string {
	return slices.Sorted(maps.Values(m))
}

func span(lo, hi int) []int {
	var ids []int
	for i := lo; i <= hi; i++ {
		ids = append(ids, i)
	}
	return ids
}

var backupPosition = regexp.MustCompile(`backup of position (\d+) `)

// takeBackup backs the server at addr up into a new directory and
// returns it and its position.
func takeBackup(t *testing.T, addr string) (string, uint64) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "bk")
	out := mustCLI(t, "", "--addr", addr, "backup", "--to", dir).stdout
	m := backupPosition.FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("backup printed no position:\n%s", out)
	}
	p, _ := strconv.ParseUint(m[1], 10, 64)
	return dir, p
}

// checkRestored runs the checker on data, then serves it and compares
// its records with want.
func checkRestored(t *testing.T, data string, want []string) {
	t.Helper()
	wantContains(t, mustCLI(t, "", "check", "--data", data).stdout, ": consistent")
	srv, err := server.Start(t.Context(), server.Config{DataDir: data, GRPCAddr: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Stop()
	if got := users(t, srv); !slices.Equal(got, want) {
		t.Fatalf("restored records differ from the model:\n got %v\nwant %v", got, want)
	}
	// The unique index answers for a record the replay wrote.
	r := mustCLI(t, "", "--addr", srv.Addr(), "search", "--type", "shop.User", "--where", `email == "u7@x"`)
	wantContains(t, r.stdout, `"u7@x"`)
}

// A wrong bulk update is undone: BASE, then LATER's change log replayed up
// to the position (or the time) just before the update, gives the records
// the model holds at that point, and the checker finds every index whole.
func TestPointInTimeRestore(t *testing.T) {
	srv := startServer(t)
	addr := srv.Addr()
	mustCLI(t, "", "--addr", addr, "schema", "apply", writeFile(t, t.TempDir(), "shop.proto", pitrProto))
	m := pitrModel{}
	m.upsert(t, addr, span(1, 10), "ann")
	m.upsert(t, addr, span(11, 20), "ann")
	// A record that expires soon, not in the model: an update of it is
	// replayed after it has expired.
	expires := time.Now().Add(4 * time.Second)
	mustCLI(t, fmt.Sprintf(`{"id": 50, "name": "eve", "email": "u50@x", "exp_ms": %d}`, expires.UnixMilli()), "--addr", addr, "insert", "--type", "shop.User")
	base, basePos := takeBackup(t, addr)
	mustCLI(t, fmt.Sprintf(`{"id": 50, "name": "eva", "email": "u50@x", "exp_ms": %d}`, expires.UnixMilli()), "--addr", addr, "update", "--type", "shop.User")

	m.upsert(t, addr, span(21, 30), "bob")
	m.remove(t, addr, []int{3, 4})
	m.upsert(t, addr, span(5, 8), "cy")
	_, goodPos := takeBackup(t, addr)
	good := m.want()
	goodTime := time.Now().UTC()

	bad := maps.Clone(m)
	bad.upsert(t, addr, span(1, 30), "WRONG") // the mistake
	bad.upsert(t, addr, span(31, 35), "dee")
	later, laterPos := takeBackup(t, addr)
	if goodPos <= basePos || laterPos <= goodPos+1 {
		t.Fatalf("positions: base %d, good %d, later %d", basePos, goodPos, laterPos)
	}
	time.Sleep(time.Until(expires.Add(100 * time.Millisecond)))

	data := filepath.Join(t.TempDir(), "byposition")
	r := mustCLI(t, "", "restore", "--from", base, "--log-from", later, "--to-position", strconv.FormatUint(goodPos, 10), "--data", data)
	wantContains(t, r.stdout, fmt.Sprintf("restored position %d ", goodPos), fmt.Sprintf("base position %d and %d commits", basePos, goodPos-basePos))
	checkRestored(t, data, good)

	data = filepath.Join(t.TempDir(), "bytime")
	r = mustCLI(t, "", "restore", "--from", base, "--log-from", later, "--to-time", goodTime.Format(time.RFC3339Nano), "--data", data)
	wantContains(t, r.stdout, fmt.Sprintf("restored position %d ", goodPos))
	checkRestored(t, data, good)

	// Up to LATER's last commit: the mistake and what followed it.
	data = filepath.Join(t.TempDir(), "all")
	mustCLI(t, "", "restore", "--from", base, "--log-from", later, "--to-position", strconv.FormatUint(laterPos, 10), "--data", data)
	checkRestored(t, data, bad.want())

	// Refused, naming positions: the backups swapped, targets outside the
	// span, and flags that do not go together.
	r = cli(t, "", "restore", "--from", later, "--log-from", base, "--to-position", strconv.FormatUint(laterPos, 10), "--data", filepath.Join(t.TempDir(), "x"))
	wantCode(t, r, exitstatus.Failed)
	wantContains(t, r.stderr, "is older than the base", fmt.Sprintf("position %d", basePos))
	r = cli(t, "", "restore", "--from", base, "--log-from", later, "--to-position", strconv.FormatUint(basePos-1, 10), "--data", filepath.Join(t.TempDir(), "x"))
	wantCode(t, r, exitstatus.Failed)
	wantContains(t, r.stderr, fmt.Sprintf("--to-position %d is before the base", basePos-1))
	r = cli(t, "", "restore", "--from", base, "--log-from", later, "--to-time", "2001-01-01T00:00:00Z", "--data", filepath.Join(t.TempDir(), "x"))
	wantCode(t, r, exitstatus.Failed)
	wantContains(t, r.stderr, "--to-time 2001-01-01T00:00:00Z is before the base")
	// A later backup of another store, with the same schema version and
	// more commits.
	other := startServer(t)
	mustCLI(t, "", "--addr", other.Addr(), "schema", "apply", writeFile(t, t.TempDir(), "shop.proto", pitrProto))
	for i := range int(basePos) + 1 {
		pitrModel{}.upsert(t, other.Addr(), span(1, 3), fmt.Sprint("o", i))
	}
	otherBackup, _ := takeBackup(t, other.Addr())
	r = cli(t, "", "restore", "--from", base, "--log-from", otherBackup, "--to-position", strconv.FormatUint(basePos+1, 10), "--data", filepath.Join(t.TempDir(), "x"))
	wantCode(t, r, exitstatus.Failed)
	wantContains(t, r.stderr, "is not of the base's store", fmt.Sprintf("its commit %d was committed ", basePos))
	r = cli(t, "", "restore", "--from", base, "--log-from", t.TempDir(), "--to-position", "3", "--data", filepath.Join(t.TempDir(), "x"))
	wantCode(t, r, exitstatus.Failed)
	wantContains(t, r.stderr, "restore: --log-from: ", "not a backup directory")
	if strings.Contains(r.stderr, "backup:") || strings.Count(r.stderr, "restore:") != 1 {
		t.Fatalf("a restore error reads as another command's:\n%s", r.stderr)
	}
	wantCode(t, cli(t, "", "restore", "--from", base, "--log-from", later, "--data", filepath.Join(t.TempDir(), "x")), exitstatus.Usage)
	wantCode(t, cli(t, "", "restore", "--from", base, "--to-position", "3", "--data", filepath.Join(t.TempDir(), "x")), exitstatus.Usage)
	wantCode(t, cli(t, "", "restore", "--from", base, "--log-from", later, "--to-time", "yesterday", "--data", filepath.Join(t.TempDir(), "x")), exitstatus.Usage)
}

// A change log trimmed past the base's position is refused, naming the
// commits missing, and nothing is written.
func TestPointInTimeRestoreTrimmed(t *testing.T) {
	srv, err := server.Start(context.Background(), server.Config{DataDir: t.TempDir(), GRPCAddr: "127.0.0.1:0", WatchRetentionBytes: 4 << 10})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Stop()
	addr := srv.Addr()
	mustCLI(t, "", "--addr", addr, "schema", "apply", writeFile(t, t.TempDir(), "shop.proto", pitrProto))
	m := pitrModel{}
	m.upsert(t, addr, span(1, 5), "ann")
	base, basePos := takeBackup(t, addr)
	// The log keeps 4 KiB: these batches push the base's commits out of
	// it once the trimming (every second) has run.
	deadline := time.Now().Add(30 * time.Second)
	for i := 0; ; i++ {
		m.upsert(t, addr, span(1, 40), fmt.Sprintf("n%d", i))
		later, _ := takeBackup(t, addr)
		data := filepath.Join(t.TempDir(), "x")
		r := cli(t, "", "restore", "--from", base, "--log-from", later, "--to-time", time.Now().UTC().Format(time.RFC3339Nano), "--data", data)
		if r.code == exitstatus.OK {
			if time.Now().After(deadline) {
				t.Fatal("the change log was never trimmed past the base's position")
			}
			time.Sleep(200 * time.Millisecond)
			continue
		}
		wantCode(t, r, exitstatus.Failed)
		wantContains(t, r.stderr, "were trimmed by the server's --watch-retention", fmt.Sprintf("after the base's position %d", basePos),
			fmt.Sprintf("commits %d to ", basePos+1))
		if entries, _ := filepath.Glob(filepath.Join(data, "*")); len(entries) > 0 {
			t.Fatalf("a refused restore wrote %v", entries)
		}
		return
	}
}
