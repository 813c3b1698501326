package main

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/protobase/protobase/client"
	"github.com/protobase/protobase/internal/exitstatus"
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

// The write commands take --if-version for one record and --condition
// (protobuf JSON) for any target: the batch applies when they hold, and
// fails with Aborted, applying nothing and naming the condition and the
// version found, when one does not.
func TestConditionalWriteCommands(t *testing.T) {
	addr := startServer(t).Addr()
	applyShop(t, addr)
	w := func(stdin string, args ...string) result {
		t.Helper()
		return cli(t, stdin, append([]string{"--addr", addr}, args...)...)
	}
	mustW := func(stdin string, args ...string) result {
		t.Helper()
		r := w(stdin, args...)
		wantCode(t, r, exitstatus.OK)
		return r
	}
	aborted := func(r result, want ...string) {
		t.Helper()
		wantCode(t, r, exitstatus.Failed)
		wantContains(t, r.stderr, append([]string{"failed (Aborted)", "applied: 0 records"}, want...)...)
	}
	mustW(`{"id": 1, "name": "Ann", "email": "ann@x"}`, "insert", "-t", "shop.User")
	v1 := getVersions(t, addr, 1)[0]

	// --if-version: the stored record's version, or 0 for none.
	r := mustW(`{"id": 1, "name": "Ann", "email": "ann2@x"}`, "update", "-t", "shop.User", "--if-version", fmt.Sprint(v1))
	v2 := getVersions(t, addr, 1)[0]
	wantContains(t, r.stderr, fmt.Sprintf("updated 1 record at position %d; 1 condition held", v2))
	r = w(`{"id": 1, "name": "Ann", "email": "ann3@x"}`, "update", "-t", "shop.User", "--if-version", fmt.Sprint(v1))
	aborted(r, fmt.Sprintf("condition: 0 (--if-version %d), found version %d", v1, v2), "input:   stdin line 1")
	if got := getVersions(t, addr, 1)[0]; got != v2 {
		t.Fatalf("a failed conditional update wrote: version %d, want %d", got, v2)
	}
	aborted(w(`{"id": 1, "email": "x@x"}`, "insert", "-t", "shop.User", "--if-version", "0"),
		fmt.Sprintf("found version %d", v2))
	mustW(`{"id": 2, "name": "Bob", "email": "bob@x"}`, "upsert", "-t", "shop.User", "--if-version", "0")
	wantCode(t, w(`{"id": 3}`+"\n"+`{"id": 4}`, "upsert", "-t", "shop.User", "--if-version", "0"), exitstatus.Usage)
	wantCode(t, w("", "upsert", "-t", "shop.User", "--if-version", "0"), exitstatus.Usage)

	// --condition on a key, with a filter; on a query, with a count.
	bob := `{"key": {"@type": "type.googleapis.com/shop.User", "id": "2"}, "filter": "name = \"Bob\""}`
	nobody := `{"query": {"type": "shop.User", "filter": "email contains \"@y\""}, "count": "0"}`
	r = mustW(`{"id": 3, "name": "Cy", "email": "cy@y"}`, "insert", "-t", "shop.User", "--condition", bob, "--condition", nobody)
	wantContains(t, r.stderr, "inserted 1 record at position", "2 conditions held")
	r = w(`{"id": 4, "name": "Di", "email": "di@y"}`, "insert", "-t", "shop.User", "--condition", bob, "--condition", nobody)
	aborted(r, "condition: 1 (--condition "+nobody+"), found version "+fmt.Sprint(getVersions(t, addr, 3)[0]))
	if strings.Contains(r.stderr, "input:") {
		t.Errorf("a failed query condition names an input line:\n%s", r.stderr)
	}
	// A condition on the second record of the input names its line.
	r = w(`{"id": 5, "email": "e5@x"}`+"\n\n"+`{"id": 1, "email": "ann4@x"}`, "upsert", "-t", "shop.User", "--condition", `{"record": 1, "version": "1"}`)
	aborted(r, "input:   stdin line 3", fmt.Sprintf("found version %d", v2))
	if recs := getVersions(t, addr, 5); recs[0] != 0 {
		t.Fatalf("a batch whose condition failed wrote record 5")
	}
	// Conditions and no records: a check.
	wantContains(t, mustW("", "remove", "-t", "shop.User", "--condition", bob).stderr, "removed 0 records", "1 condition held")
	aborted(w("", "remove", "-t", "shop.User", "--condition", nobody), "condition: 0")
	mustW(`{"id": 2}`, "remove", "-t", "shop.User", "--if-version", fmt.Sprint(getVersions(t, addr, 2)[0]))
	if getVersions(t, addr, 2)[0] != 0 {
		t.Fatal("remove --if-version left the record")
	}

	// Conditions that do not parse, or that the server refuses.
	r = w(`{"id": 6}`, "insert", "-t", "shop.User", "--condition", `{"record": 0, "nope": 1}`)
	wantCode(t, r, exitstatus.Usage)
	wantContains(t, r.stderr, "--condition 1 (", "not a protobase.v1.Condition")
	r = w(`{"id": 6}`, "insert", "-t", "shop.User", "--condition", `{"record": 0}`)
	wantCode(t, r, exitstatus.Failed)
	wantContains(t, r.stderr, "InvalidArgument")
	for _, cmd := range []string{"insert", "update", "upsert", "remove", "patch"} {
		wantContains(t, mustCLI(t, "", cmd, "--help").stdout, "--if-version", "--condition", "Aborted")
	}
}

// pagesProto is patch's schema: a counter and a nested message.
const pagesProto = `syntax = "proto3";
package shop;
import "protobase/v1/options.proto";
message Page {
  option (protobase.v1.record) = { primary_key: "id" };
  int64 id = 1;
  string title = 2;
  int64 views = 3;
  Meta meta = 4;
}
message Meta {
  string author = 1;
  int32 likes = 2;
}
`

// patch sets the fields --fields names and adds to those --add names,
// keeping everything else a record holds; it streams like the other
// writes, or goes as one batch with conditions.
func TestPatchCommand(t *testing.T) {
	addr := startServer(t).Addr()
	mustCLI(t, "", "--addr", addr, "schema", "apply", writeFile(t, t.TempDir(), "pages.proto", pagesProto))
	w := func(stdin string, args ...string) result {
		t.Helper()
		return cli(t, stdin, append([]string{"--addr", addr}, args...)...)
	}
	pages := func() string {
		t.Helper()
		return mustCLI(t, "", "--addr", addr, "get", "-t", "shop.Page", "1", "2").stdout
	}
	wantCode(t, w(`{"id": 1, "title": "One", "views": "5", "meta": {"author": "ann", "likes": 1}}`+"\n"+
		`{"id": 2, "title": "Two", "views": "5"}`, "insert", "-t", "shop.Page"), exitstatus.OK)

	r := w(`{"id": 1, "title": "Uno", "views": "999"}`, "patch", "-t", "shop.Page", "--fields", "title")
	wantCode(t, r, exitstatus.OK)
	wantContains(t, r.stderr, "patched 1 record")
	// Two patches of page 1 in one batch, counters added; nested fields.
	wantCode(t, w(`{"id": 1, "views": "3"}`+"\n"+`{"id": 2, "views": "1"}`+"\n"+`{"id": 1, "views": "2"}`,
		"patch", "-t", "shop.Page", "--add", "views"), exitstatus.OK)
	wantCode(t, w(`{"id": 1, "meta": {"author": "bob", "likes": 4}}`, "patch", "-t", "shop.Page",
		"--fields", "meta.author", "--add", "meta.likes"), exitstatus.OK)
	// A field the line leaves out is cleared.
	wantCode(t, w(`{"id": 2}`, "patch", "-t", "shop.Page", "--fields", "title"), exitstatus.OK)
	want := `{"id":"1","title":"Uno","views":"10","meta":{"author":"bob","likes":5}}` + "\n" + `{"id":"2","views":"6"}` + "\n"
	if got := pages(); got != want {
		t.Fatalf("after the patches:\n%s\nwant:\n%s", got, want)
	}

	// With a condition: one batch, applied only if it holds.
	v := strings.TrimSuffix(strings.TrimPrefix(strings.SplitN(mustCLI(t, "", "--addr", addr, "get", "-t", "shop.Page", "--versions", "2").stdout, ",", 2)[0], `{"version":"`), `"`)
	wantCode(t, w(`{"id": 2, "views": "1"}`, "patch", "-t", "shop.Page", "--add", "views", "--if-version", v), exitstatus.OK)
	r = w(`{"id": 2, "views": "1"}`, "patch", "-t", "shop.Page", "--add", "views", "--if-version", v)
	wantCode(t, r, exitstatus.Failed)
	wantContains(t, r.stderr, "patch failed (Aborted)", "condition: 0 (--if-version "+v+")")

	// A missing record, a field that is not one, no field at all.
	r = w(`{"id": 1, "views": "1"}`+"\n"+`{"id": 9, "views": "1"}`, "patch", "-t", "shop.Page", "--add", "views")
	wantCode(t, r, exitstatus.Failed)
	wantContains(t, r.stderr, "patch failed (NotFound)", "input:   stdin line 2", "applied: 0 records")
	r = w(`{"id": 1}`, "patch", "-t", "shop.Page", "--fields", "nope")
	wantCode(t, r, exitstatus.Failed)
	wantContains(t, r.stderr, "InvalidArgument", "nope")
	wantCode(t, w(`{"id": 1}`, "patch", "-t", "shop.Page"), exitstatus.Usage)
	want = `{"id":"1","title":"Uno","views":"10","meta":{"author":"bob","likes":5}}` + "\n" + `{"id":"2","views":"7"}` + "\n"
	if got := pages(); got != want {
		t.Fatalf("after the refused patches:\n%s\nwant:\n%s", got, want)
	}
	wantContains(t, mustCLI(t, "", "patch", "--help").stdout, "--fields", "--add", "counters")
}

// write applies lines of several operations and types as one batch: all
// of them, or none when a record fails or a condition does not hold.
func TestWriteCommand(t *testing.T) {
	addr := startServer(t).Addr()
	dir := t.TempDir()
	mustCLI(t, "", "--addr", addr, "schema", "apply", writeFile(t, dir, "shop.proto", shopProto), writeFile(t, dir, "pages.proto", pagesProto))
	w := func(stdin string, args ...string) result {
		t.Helper()
		return cli(t, stdin, append([]string{"--addr", addr, "write"}, args...)...)
	}
	state := func() string {
		t.Helper()
		u := cli(t, "", "--addr", addr, "get", "-t", "shop.User", "1", "2").stdout
		return u + mustCLI(t, "", "--addr", addr, "get", "-t", "shop.Page", "1").stdout
	}
	r := w(`{"op": "insert", "type": "shop.User", "record": {"id": 1, "name": "Ann", "email": "ann@x"}}` + "\n" +
		`{"op": "insert", "type": "shop.Page", "record": {"id": 1, "title": "One", "views": "5"}}`)
	wantCode(t, r, exitstatus.OK)
	wantContains(t, r.stderr, "wrote 2 records at position")

	// Every operation in one batch, by word or by protobuf name; a line
	// without a type takes --type.
	wantCode(t, w(`{"op": "update", "record": {"id": 1, "name": "Ann Lee", "email": "ann@x"}}`+"\n"+
		`{"op": "WRITE_OP_PATCH", "type": "shop.Page", "record": {"id": 1, "views": "3"}}`+"\n"+
		`{"op": "upsert", "record": {"id": 2, "name": "Bob", "email": "bob@x"}}`+"\n"+
		`{"op": "remove", "record": {"id": 2}}`, "--type", "shop.User", "--add", "views"), exitstatus.OK)
	want := `{"id":"1","name":"Ann Lee","email":"ann@x"}` + "\n" + `{"id":"1","title":"One","views":"8"}` + "\n"
	if got := state(); got != want {
		t.Fatalf("after the batch:\n%s\nwant:\n%s", got, want)
	}

	// One record fails: nothing of the batch applies.
	r = w(`{"op": "patch", "type": "shop.Page", "record": {"id": 1, "views": "1"}}`+"\n"+
		`{"op": "insert", "type": "shop.User", "record": {"id": 1, "email": "x@x"}}`, "--add", "views")
	wantCode(t, r, exitstatus.Failed)
	wantContains(t, r.stderr, "write failed (AlreadyExists)", "input:   stdin line 2", "applied: 0 records")
	// A condition does not hold: nothing applies.
	v := getVersions(t, addr, 1)[0]
	r = w(`{"op": "patch", "type": "shop.Page", "record": {"id": 1, "views": "1"}}`, "--add", "views",
		"--condition", fmt.Sprintf(`{"key": {"@type": "type.googleapis.com/shop.User", "id": "1"}, "version": "%d"}`, v+1))
	wantCode(t, r, exitstatus.Failed)
	wantContains(t, r.stderr, "write failed (Aborted)", fmt.Sprintf("found version %d", v))
	if got := state(); got != want {
		t.Fatalf("after the refused batches:\n%s\nwant:\n%s", got, want)
	}

	// Lines that are not records of the schema.
	for line, msg := range map[string]string{
		`{"op": "merge", "type": "shop.User", "record": {"id": 1}}`: `op "merge" is not insert`,
		`{"op": "insert", "record": {"id": 9}}`:                     `no "type"`,
		`{"op": "insert", "type": "shop.Nope", "record": {}}`:       `"shop.Nope" is not a record type`,
		`{"op": "insert", "type": "shop.User"}`:                     `no "record"`,
		`{"op": "insert", "type": "shop.User", "record": {"x": 1}}`: "not a valid shop.User",
		`{"op": "insert", "type": "shop.User", "rec": {}}`:          "not a line",
	} {
		r := w(`{"op": "insert", "type": "shop.User", "record": {"id": 9}}` + "\n" + line)
		wantCode(t, r, exitstatus.Failed)
		wantContains(t, r.stderr, "stdin line 2", msg, "nothing was sent")
	}
	if got := state(); got != want {
		t.Fatalf("after the refused inputs:\n%s\nwant:\n%s", got, want)
	}
	wantContains(t, mustCLI(t, "", "write", "--help").stdout, `"op": "insert"|"update"`, "--condition", "--add")
}
