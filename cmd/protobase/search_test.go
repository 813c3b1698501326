package main

import (
	"fmt"
	"strings"
	"testing"

	"github.com/protobase/protobase/internal/exitstatus"
)

// seedUsers starts a server with the shop schema and ten users: ids 1..10,
// names "user-01".."user-10", emails at example.com for even ids and at
// example.org for odd ones.
func seedUsers(t *testing.T) string {
	t.Helper()
	srv := startServer(t)
	addr := srv.Addr()
	applyShop(t, addr)
	var in strings.Builder
	for id := 1; id <= 10; id++ {
		domain := "example.org"
		if id%2 == 0 {
			domain = "example.com"
		}
		fmt.Fprintf(&in, `{"id": %d, "name": "user-%02d", "email": "u%d@%s"}`+"\n", id, id, id, domain)
	}
	mustCLI(t, in.String(), "--addr", addr, "insert", "--type", "shop.User")
	return addr
}

// ids extracts the "id" values of JSON lines in output order.
func ids(t *testing.T, jsonl string) []string {
	t.Helper()
	var out []string
	for _, line := range strings.Split(strings.TrimSpace(jsonl), "\n") {
		if line == "" {
			continue
		}
		i := strings.Index(line, `"id":"`)
		if i < 0 {
			t.Fatalf("line without id: %q", line)
		}
		rest := line[i+len(`"id":"`):]
		out = append(out, rest[:strings.IndexByte(rest, '"')])
	}
	return out
}

func TestSearchCommand(t *testing.T) {
	addr := seedUsers(t)
	cases := []struct {
		name string
		args []string
		want string // ids in output order
	}{
		{"all", nil, "[1 2 3 4 5 6 7 8 9 10]"},
		{"pk in", []string{"--where", "id in (3, 1, 99)"}, "[1 3]"},
		{"contains and range", []string{"-w", `email contains "example.com" and id >= 6`}, "[6 8 10]"},
		{"not", []string{"-w", `not (id < 9)`}, "[9 10]"},
		{"limit", []string{"--limit", "2"}, "[1 2]"},
		{"order desc", []string{"--order", "pk desc", "--limit", "3"}, "[10 9 8]"},
		{"order by unique index", []string{"--order", "email desc", "-w", `email prefix "u1"`}, "[1 10]"},
		{"no match", []string{"-w", `name = "nobody"`}, "[]"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			args := append([]string{"--addr", addr, "search", "--type", "shop.User"}, c.args...)
			r := mustCLI(t, "", args...)
			if got := fmt.Sprint(ids(t, r.stdout)); got != c.want {
				t.Errorf("ids %s, want %s\n%s", got, c.want, r.stdout)
			}
		})
	}

	r := mustCLI(t, "", "--addr", addr, "search", "-t", "shop.User", "-w", `email contains "example.org"`, "--count")
	if strings.TrimSpace(r.stdout) != "5" {
		t.Errorf("--count printed %q, want 5", r.stdout)
	}

	r = mustCLI(t, "", "--addr", addr, "search", "-t", "shop.User", "-w", `email = "u4@example.com"`, "--explain")
	wantContains(t, r.stderr, "plan: index_range")
	if got := fmt.Sprint(ids(t, r.stdout)); got != "[4]" {
		t.Errorf("indexed lookup: %s", got)
	}
	r = mustCLI(t, "", "--addr", addr, "search", "-t", "shop.User", "-w", `name = "user-04"`, "--explain")
	wantContains(t, r.stderr, "plan: full_scan")

	r = mustCLI(t, "", "--addr", addr, "search", "-t", "shop.User", "-w", "id = 2", "--keys-only")
	if strings.TrimSpace(r.stdout) != `{"id":"2"}` {
		t.Errorf("--keys-only printed %q", r.stdout)
	}

	r = mustCLI(t, "", "--addr", addr, "search", "-t", "shop.User", "-w", "id <= 2", "--format", "table")
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if len(lines) != 3 || strings.Fields(lines[0])[0] != "id" || strings.Fields(lines[2])[1] != "user-02" {
		t.Errorf("table:\n%s", r.stdout)
	}
}

func TestScanCommand(t *testing.T) {
	addr := seedUsers(t)
	for _, par := range []string{"1", "3", "16"} {
		r := mustCLI(t, "", "--addr", addr, "scan", "-t", "shop.User", "--parallelism", par, "--order", "pk")
		if got := fmt.Sprint(ids(t, r.stdout)); got != "[1 2 3 4 5 6 7 8 9 10]" {
			t.Errorf("parallelism %s: %s", par, got)
		}
	}
	r := mustCLI(t, "", "--addr", addr, "scan", "-t", "shop.User", "--parallelism", "4", "-w", "id > 7", "--count")
	if strings.TrimSpace(r.stdout) != "3" {
		t.Errorf("scan --count printed %q", r.stdout)
	}
}

// TestReadCommandErrors covers bad flags and queries the server refuses:
// each exits non-zero with a message that says what is wrong.
func TestReadCommandErrors(t *testing.T) {
	addr := seedUsers(t)
	cases := []struct {
		name string
		args []string
		code int
		want []string
	}{
		{"syntax error points at the column", []string{"search", "-t", "shop.User", "-w", "id >= and"}, exitstatus.Usage,
			[]string{"--where:", "id >= and", "^"}},
		{"unterminated string", []string{"search", "-t", "shop.User", "-w", `name = "abc`}, exitstatus.Usage, []string{"--where:"}},
		{"unknown field", []string{"search", "-t", "shop.User", "-w", "id > 1 and age > 3"}, exitstatus.Failed, []string{"column 12", "no field \"age\""}},
		{"type mismatch", []string{"search", "-t", "shop.User", "-w", `id = "x"`}, exitstatus.Failed, []string{"InvalidArgument", "id"}},
		{"operator not valid", []string{"search", "-t", "shop.User", "-w", "id prefix 3"}, exitstatus.Failed, []string{"InvalidArgument"}},
		{"unknown type", []string{"search", "-t", "shop.Nope"}, exitstatus.Failed, []string{"shop.Nope"}},
		{"missing type", []string{"search"}, exitstatus.Usage, []string{"type"}},
		{"bad format", []string{"search", "-t", "shop.User", "--format", "xml"}, exitstatus.Usage, []string{"--format"}},
		{"bad order direction", []string{"search", "-t", "shop.User", "--order", "pk sideways"}, exitstatus.Usage, []string{"asc or desc"}},
		{"order without index", []string{"search", "-t", "shop.User", "--order", "name"}, exitstatus.Usage, []string{"no index on \"name\""}},
		{"scan unknown field", []string{"scan", "-t", "shop.User", "-w", "nope = 1"}, exitstatus.Failed, []string{"nope"}},
		{"scan bad parallelism", []string{"scan", "-t", "shop.User", "--parallelism", "-1"}, exitstatus.Usage, []string{"parallelism"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := cli(t, "", append([]string{"--addr", addr}, c.args...)...)
			wantCode(t, r, c.code)
			wantContains(t, r.stderr, c.want...)
		})
	}
}
