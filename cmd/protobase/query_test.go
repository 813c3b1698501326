package main

import (
	"fmt"
	"strings"
	"testing"

	"github.com/protobase/protobase/internal/exitstatus"
)

func TestQueryCommand(t *testing.T) {
	addr := seedUsers(t)
	base := []string{"--addr", addr, "query", "--type", "shop.User"}

	// One page, then the rest with the token printed on stderr.
	r := mustCLI(t, "", append(base, "--where", "id > 3", "--page-size", "4")...)
	if got := fmt.Sprint(ids(t, r.stdout)); got != "[4 5 6 7]" {
		t.Fatalf("page 1: %s", got)
	}
	_, tok, ok := strings.Cut(strings.TrimSpace(r.stderr), "next page: --token ")
	if !ok || tok == "" {
		t.Fatalf("no token on stderr: %q", r.stderr)
	}
	r = mustCLI(t, "", append(base, "--where", "id > 3", "--page-size", "4", "--token", tok)...)
	if got := fmt.Sprint(ids(t, r.stdout)); got != "[8 9 10]" || r.stderr != "" {
		t.Fatalf("page 2: %s, stderr %q", got, r.stderr)
	}

	r = mustCLI(t, "", append(base, "--all", "--page-size", "3", "-w", `email contains "example.com"`)...)
	if got := fmt.Sprint(ids(t, r.stdout)); got != "[2 4 6 8 10]" || r.stderr != "" {
		t.Fatalf("--all: %s, stderr %q", got, r.stderr)
	}
	r = mustCLI(t, "", append(base, "--all", "--order", "pk desc", "--limit", "2")...)
	if got := fmt.Sprint(ids(t, r.stdout)); got != "[10 9]" {
		t.Fatalf("--order --limit: %s", got)
	}
	r = mustCLI(t, "", append(base, "--count", "-w", "id <= 4")...)
	if strings.TrimSpace(r.stdout) != "4" {
		t.Fatalf("--count printed %q", r.stdout)
	}
}

func TestGetCommand(t *testing.T) {
	addr := seedUsers(t)
	r := mustCLI(t, "", "--addr", addr, "get", "--type", "shop.User", "3", `"1"`, "[7]", `{"id": 10}`)
	if got := fmt.Sprint(ids(t, r.stdout)); got != "[3 1 7 10]" {
		t.Fatalf("get: %s", got)
	}
	r = mustCLI(t, "", "--addr", addr, "get", "-t", "shop.User", "2", "--format", "table")
	wantContains(t, r.stdout, "user-02", "u2@example.com")

	// Missing keys are named; the records found are still printed.
	r = cli(t, "", "--addr", addr, "get", "-t", "shop.User", "2", "99", "1000")
	wantCode(t, r, exitstatus.Failed)
	wantContains(t, r.stderr, "not found: 99", "not found: 1000", "2 of 3 keys not found")
	if got := fmt.Sprint(ids(t, r.stdout)); got != "[2]" {
		t.Fatalf("get with missing keys printed %s", got)
	}
}

// Malformed input to search, query and get: each exits non-zero with a
// message that says what is wrong and where.
func TestQueryGetErrors(t *testing.T) {
	addr := seedUsers(t)
	cases := []struct {
		name string
		args []string
		code int
		want []string
	}{
		{"query syntax error points at the column", []string{"query", "-t", "shop.User", "-w", "id >= and"}, exitstatus.Usage, []string{"--where:", "id >= and", "^"}},
		{"query unbalanced", []string{"query", "-t", "shop.User", "-w", "(id = 1"}, exitstatus.Usage, []string{"--where:", `expected ")"`}},
		{"query unknown field", []string{"query", "-t", "shop.User", "-w", "age > 3"}, exitstatus.Failed, []string{"age"}},
		{"query bad token", []string{"query", "-t", "shop.User", "--token", "garbage!"}, exitstatus.Failed, []string{"InvalidArgument", "token"}},
		{"query token and all", []string{"query", "-t", "shop.User", "--token", "x", "--all"}, exitstatus.Usage, []string{"token", "all"}},
		{"query bad page size", []string{"query", "-t", "shop.User", "--page-size", "-3"}, exitstatus.Usage, []string{"page-size"}},
		{"query missing type", []string{"query"}, exitstatus.Usage, []string{"type"}},
		{"query unknown type", []string{"query", "-t", "shop.Nope"}, exitstatus.Failed, []string{"shop.Nope"}},
		{"search hostile input", []string{"search", "-t", "shop.User", "-w", "name = \"\xff\""}, exitstatus.Usage, []string{"--where:", "UTF-8"}},
		{"search deep nesting", []string{"search", "-t", "shop.User", "-w", strings.Repeat("(", 500) + "id = 1" + strings.Repeat(")", 500)}, exitstatus.Usage, []string{"nested too deeply"}},
		{"get no keys", []string{"get", "-t", "shop.User"}, exitstatus.Usage, []string{"requires at least 1 arg"}},
		{"get missing type", []string{"get", "1"}, exitstatus.Usage, []string{"type"}},
		{"get unknown type", []string{"get", "-t", "shop.Nope", "1"}, exitstatus.Failed, []string{"shop.Nope"}},
		{"get null key", []string{"get", "-t", "shop.User", "null"}, exitstatus.Usage, []string{"key 1 (null)", "null is not a key"}},
		{"get text for an integer key", []string{"get", "-t", "shop.User", "ann"}, exitstatus.Failed, []string{"InvalidArgument", "keys[0]"}},
		{"get fraction", []string{"get", "-t", "shop.User", "1", "2.5"}, exitstatus.Failed, []string{"keys[1]"}},
		{"get wrong list length", []string{"get", "-t", "shop.User", "[1, 2]"}, exitstatus.Failed, []string{"keys[0]", "has 1 fields (id)"}},
		{"get non-key field", []string{"get", "-t", "shop.User", `{"name": "x"}`}, exitstatus.Failed, []string{`"name" is not a primary-key field`}},
		{"get bad format", []string{"get", "-t", "shop.User", "--format", "xml", "1"}, exitstatus.Usage, []string{"--format"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := cli(t, "", append([]string{"--addr", addr}, c.args...)...)
			wantCode(t, r, c.code)
			wantContains(t, r.stderr, c.want...)
		})
	}
}

// query --agg prints one JSON object per group, keys in flag order.
func TestQueryAggregateCommand(t *testing.T) {
	addr := seedUsers(t)
	base := []string{"--addr", addr, "query", "--type", "shop.User"}
	r := mustCLI(t, "", append(base, "-w", "id <= 4", "--agg", "count(),sum(id),min(name),max(email),avg(id)")...)
	want := `{"count()":4,"sum(id)":10,"min(name)":"user-01","max(email)":"u4@example.com","avg(id)":2.5}` + "\n"
	if r.stdout != want {
		t.Fatalf("aggregate printed %q, want %q", r.stdout, want)
	}
	r = mustCLI(t, "", append(base, "-w", "id <= 2", "--group-by", "email", "--agg", "count(), max(id)", "--explain")...)
	want = `{"email":"u1@example.org","count()":1,"max(id)":1}` + "\n" + `{"email":"u2@example.com","count()":1,"max(id)":2}` + "\n"
	if r.stdout != want {
		t.Fatalf("grouped printed %q, want %q", r.stdout, want)
	}
	wantContains(t, r.stderr, "plan: ", "aggregate group by email: count(), max(id) parallel")
	// A field or function named twice is one key of the object.
	r = mustCLI(t, "", append(base, "-w", "id <= 2", "--group-by", "email,email", "--agg", "count(),max(id),count()")...)
	if r.stdout != want {
		t.Fatalf("with names repeated printed %q, want %q", r.stdout, want)
	}
	r = mustCLI(t, "", append(base, "-w", "id > 100", "--agg", "count(),sum(id)")...)
	if want := `{"count()":0,"sum(id)":null}` + "\n"; r.stdout != want {
		t.Fatalf("empty input printed %q, want %q", r.stdout, want)
	}

	r = cli(t, "", append(base, "--agg", "median(id)")...)
	wantCode(t, r, exitstatus.Usage)
	wantContains(t, r.stderr, "--agg", "median")
	r = cli(t, "", append(base, "--group-by", "nope")...)
	wantCode(t, r, exitstatus.Failed)
	wantContains(t, r.stderr, "InvalidArgument", `"nope"`)
	r = cli(t, "", append(base, "--agg", "sum(name)")...)
	wantCode(t, r, exitstatus.Failed)
	wantContains(t, r.stderr, "sum(name)", "not a number")
}
