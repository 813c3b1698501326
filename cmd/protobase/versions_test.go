package main

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/protobase/protobase/client"
)

// versionsOf parses the JSON lines of a read with --versions into each
// record's version by its id, checking that every line is a version and a
// record and nothing else.
func versionsOf(t *testing.T, jsonl string) map[string]uint64 {
	t.Helper()
	out := map[string]uint64{}
	for _, line := range strings.Split(strings.TrimSpace(jsonl), "\n") {
		var l struct {
			Version string          `json:"version"`
			Record  json.RawMessage `json:"record"`
		}
		dec := json.NewDecoder(strings.NewReader(line))
		dec.DisallowUnknownFields()
		var rec struct {
			ID string `json:"id"`
		}
		if err := dec.Decode(&l); err != nil || json.Unmarshal(l.Record, &rec) != nil {
			t.Fatalf("line %q: %v", line, err)
		}
		v, err := strconv.ParseUint(l.Version, 10, 64)
		if err != nil || rec.ID == "" {
			t.Fatalf("line %q: version %q, id %q", line, l.Version, rec.ID)
		}
		out[rec.ID] = v
	}
	return out
}

// getVersions reads the versions of users by id with the Go client.
func getVersions(t *testing.T, addr string, ids ...int) []uint64 {
	t.Helper()
	c, err := client.Dial(addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	keys := make([]any, len(ids))
	for i, id := range ids {
		keys[i] = id
	}
	_, vers, err := c.GetVersioned(t.Context(), "shop.User", keys...)
	if err != nil {
		t.Fatal(err)
	}
	return vers
}

// get, search, scan and query print each record's version with --versions,
// beside the record in JSON lines and as the first column of a table: the
// version a versioned read of the Go client returns.
func TestReadVersionsCommands(t *testing.T) {
	addr := startServer(t).Addr()
	applyShop(t, addr)
	mustCLI(t, `{"id": 1, "name": "Ann", "email": "ann@x"}`+"\n"+`{"id": 2, "name": "Bob", "email": "bob@x"}`+"\n",
		"--addr", addr, "insert", "--type", "shop.User")
	mustCLI(t, `{"id": 3, "name": "Cy", "email": "cy@x"}`+"\n", "--addr", addr, "insert", "--type", "shop.User")
	mustCLI(t, `{"id": 1, "name": "Ann", "email": "ann2@x"}`+"\n", "--addr", addr, "update", "--type", "shop.User")
	v := getVersions(t, addr, 1, 2, 3)
	if v[1] == 0 || v[2] <= v[1] || v[0] <= v[2] {
		t.Fatalf("versions %v", v)
	}
	want := map[string]uint64{"1": v[0], "2": v[1], "3": v[2]}

	r := mustCLI(t, "", "--addr", addr, "get", "--type", "shop.User", "--versions", "2", "1")
	if r.stdout != fmt.Sprintf(`{"version":"%d","record":{"id":"2","name":"Bob","email":"bob@x"}}`+"\n"+
		`{"version":"%d","record":{"id":"1","name":"Ann","email":"ann2@x"}}`+"\n", v[1], v[0]) {
		t.Fatalf("get --versions:\n%s", r.stdout)
	}
	for _, args := range [][]string{
		{"search", "--type", "shop.User"},
		{"scan", "--type", "shop.User", "--parallelism", "2"},
		{"query", "--type", "shop.User", "--all", "--page-size", "2"},
		{"search", "--type", "shop.User", "--where", "id = 3"},
	} {
		r := mustCLI(t, "", append(append([]string{"--addr", addr}, args...), "--versions")...)
		got := versionsOf(t, r.stdout)
		for id, ver := range got {
			if want[id] != ver {
				t.Errorf("%s: %v, want %v", strings.Join(args, " "), got, want)
				break
			}
		}
		if len(got) == 0 {
			t.Errorf("%s printed nothing", strings.Join(args, " "))
		}
	}

	// A table: the version is the first column.
	r = mustCLI(t, "", "--addr", addr, "query", "--type", "shop.User", "--where", "id <= 2", "--versions", "--format", "table")
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if len(lines) != 3 || strings.Join(strings.Fields(lines[0]), " ") != "version id name email" ||
		strings.Join(strings.Fields(lines[1]), " ") != fmt.Sprintf("%d 1 Ann ann2@x", v[0]) ||
		strings.Join(strings.Fields(lines[2]), " ") != fmt.Sprintf("%d 2 Bob bob@x", v[1]) {
		t.Fatalf("table with versions:\n%s", r.stdout)
	}
	// Without --versions, records alone, as before.
	r = mustCLI(t, "", "--addr", addr, "get", "--type", "shop.User", "3")
	if r.stdout != `{"id":"3","name":"Cy","email":"cy@x"}`+"\n" {
		t.Fatalf("get without --versions:\n%s", r.stdout)
	}
	for _, cmd := range []string{"get", "search", "scan", "query"} {
		wantContains(t, mustCLI(t, "", cmd, "--help").stdout, "--versions")
	}
}
