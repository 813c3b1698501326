package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/protobase/protobase/internal/exitstatus"
)

func TestWriteCommands(t *testing.T) {
	srv := startServer(t)
	addr := srv.Addr()
	applyShop(t, addr)

	in := `{"id": 1, "name": "ada", "email": "ada@example.com"}

{"id": "2", "name": "bob", "email": "bob@example.com"}
  {"id": 3, "name": "cy", "email": "cy@example.com"}  ` // no final newline
	r := mustCLI(t, in, "--addr", addr, "insert", "--type", "shop.User")
	if !regexp.MustCompile(`^inserted 3 records in \d+\.\d\ds \(\d+ records/s\)\n$`).MatchString(r.stderr) {
		t.Errorf("insert summary: %q", r.stderr)
	}
	if r.stdout != "" {
		t.Errorf("insert printed on stdout: %q", r.stdout)
	}
	want := []string{"1:ada:ada@example.com", "2:bob:bob@example.com", "3:cy:cy@example.com"}
	if got := users(t, srv); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("after insert: %v, want %v", got, want)
	}

	r = mustCLI(t, `{"id": 3, "name": "cyd", "email": "cy@example.com"}
{"id": 4, "name": "dee", "email": "dee@example.com"}`, "--addr", addr, "upsert", "-t", "shop.User", "-")
	wantContains(t, r.stderr, "upserted 2 records in ")

	r = mustCLI(t, `{"id": 1, "name": "ada l", "email": "ada@example.com"}`, "--addr", addr, "update", "--type", "shop.User")
	wantContains(t, r.stderr, "updated 1 record in ")

	r = mustCLI(t, "{\"id\": 2}\n{\"id\": 4}\n", "--addr", addr, "remove", "--type", "shop.User", "--batch", "1")
	wantContains(t, r.stderr, "removed 2 records in ")

	want = []string{"1:ada l:ada@example.com", "3:cyd:cy@example.com"}
	if got := users(t, srv); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("after upsert, update, remove: %v, want %v", got, want)
	}

	// Update and remove of a missing key fail with NotFound.
	r = cli(t, `{"id": 99, "name": "x"}`, "--addr", addr, "update", "--type", "shop.User")
	wantCode(t, r, exitstatus.Failed)
	wantContains(t, r.stderr, "update failed (NotFound)", "input:   stdin line 1")
	r = cli(t, `{"id": 99}`, "--addr", addr, "remove", "--type", "shop.User")
	wantCode(t, r, exitstatus.Failed)
	wantContains(t, r.stderr, "remove failed (NotFound)")

	// An empty input writes nothing, successfully.
	r = mustCLI(t, "\n\n", "--addr", addr, "insert", "--type", "shop.User")
	wantContains(t, r.stderr, "inserted 0 records in ")
}

func TestWriteFromFile(t *testing.T) {
	srv := startServer(t)
	addr := srv.Addr()
	applyShop(t, addr)
	var b strings.Builder
	for i := 1; i <= 2500; i++ {
		fmt.Fprintf(&b, `{"id": %d, "name": "user %d", "email": "u%d@example.com"}`+"\n", i, i, i)
	}
	p := writeFile(t, t.TempDir(), "users.jsonl", b.String())
	r := mustCLI(t, "", "--addr", addr, "insert", "--type", "shop.User", "--batch", "300", p)
	wantContains(t, r.stderr, "inserted 2500 records in ")
	if n := len(users(t, srv)); n != 2500 {
		t.Errorf("%d records stored, want 2500", n)
	}

	r = cli(t, "", "--addr", addr, "insert", "--type", "shop.User", p+".missing")
	wantCode(t, r, exitstatus.Failed)
	wantContains(t, r.stderr, "users.jsonl.missing")
}

func TestInsertDuplicate(t *testing.T) {
	srv := startServer(t)
	addr := srv.Addr()
	applyShop(t, addr)
	mustCLI(t, `{"id": 1, "name": "ada", "email": "ada@example.com"}`, "--addr", addr, "insert", "--type", "shop.User")

	// One record per batch: the failing batch is the third, after two
	// applied records; blank lines shift the input lines.
	in := "\n" + `{"id": 2, "email": "b@example.com"}` + "\n\n" +
		`{"id": 3, "email": "c@example.com"}` + "\n" +
		`{"id": 1, "email": "other@example.com"}` + "\n" +
		`{"id": 4, "email": "d@example.com"}` + "\n"
	r := cli(t, in, "--addr", addr, "insert", "--type", "shop.User", "--batch", "1")
	wantCode(t, r, exitstatus.Failed)
	wantContains(t, r.stderr,
		"insert failed (AlreadyExists): ",
		"  input:   stdin line 5\n",
		"  batch:   2 (record 0 of the batch)\n",
		"  type:    shop.User\n",
		"  field:   id\n",
		"  reason:  ",
		"  applied: 2 records (2 batches), durable; the failing batch and all after it were not applied (input from line 5 on)")
	want := "[1:ada:ada@example.com 2::b@example.com 3::c@example.com]"
	if got := fmt.Sprint(users(t, srv)); got != want {
		t.Errorf("stored %s, want %s", got, want)
	}
}

func TestInsertDuplicateInBatch(t *testing.T) {
	srv := startServer(t)
	addr := srv.Addr()
	applyShop(t, addr)
	// A unique-index conflict in the middle of big batches: whatever the
	// batches were (the writer may send partial ones), the line is right.
	var b strings.Builder
	for i := 1; i <= 1000; i++ {
		email := fmt.Sprintf("u%d@example.com", i)
		if i == 777 {
			email = "u5@example.com"
			b.WriteString("\n")
		}
		fmt.Fprintf(&b, `{"id": %d, "email": %q}`+"\n", i, email)
	}
	r := cli(t, b.String(), "--addr", addr, "insert", "--type", "shop.User", "--batch", "100")
	wantCode(t, r, exitstatus.Failed)
	wantContains(t, r.stderr, "insert failed (AlreadyExists)", "  input:   stdin line 778\n", "  field:   email\n")
	m := regexp.MustCompile(`applied: (\d+) records`).FindStringSubmatch(r.stderr)
	if m == nil {
		t.Fatalf("no applied count in:\n%s", r.stderr)
	}
	if n := len(users(t, srv)); fmt.Sprint(n) != m[1] {
		t.Errorf("%d records stored, error says %s applied", n, m[1])
	}
}

func TestInsertMalformedLine(t *testing.T) {
	srv := startServer(t)
	addr := srv.Addr()
	applyShop(t, addr)
	in := `{"id": 1, "email": "a"}
{"id": 2, "email": "b"}

{"id": 3, "nam": "typo"}
{"id": 4, "email": "d"}
`
	r := cli(t, in, "--addr", addr, "insert", "--type", "shop.User")
	wantCode(t, r, exitstatus.Failed)
	wantContains(t, r.stderr, "stdin line 4: not a valid shop.User: ", `unknown field "nam"`,
		"2 records before line 4 were written; nothing after it was sent")
	if got, want := fmt.Sprint(users(t, srv)), "[1::a 2::b]"; got != want {
		t.Errorf("stored %s, want %s", got, want)
	}

	r = cli(t, "{\"id\": 5, \"email\": \"e\"}\nnot json\n", "--addr", addr, "insert", "--type", "shop.User")
	wantCode(t, r, exitstatus.Failed)
	wantContains(t, r.stderr, "stdin line 2: not a valid shop.User: ", "1 record before line 2 was written")
}

func TestWriteUnknownType(t *testing.T) {
	srv := startServer(t)
	addr := srv.Addr()

	r := cli(t, "{}", "--addr", addr, "insert", "--type", "shop.User")
	wantCode(t, r, exitstatus.Failed)
	wantContains(t, r.stderr, `unknown record type "shop.User": the server has no record types`)

	applyShop(t, addr)
	r = cli(t, "{}", "--addr", addr, "insert", "--type", "shop.Usr")
	wantCode(t, r, exitstatus.Failed)
	wantContains(t, r.stderr, `unknown record type "shop.Usr"; the server's record types are:`, "  shop.User")
}

func TestWriteReadError(t *testing.T) {
	srv := startServer(t)
	addr := srv.Addr()
	applyShop(t, addr)
	in := io.MultiReader(strings.NewReader("{\"id\": 1}\n"), iotest.ErrReader(fmt.Errorf("disk on fire")))
	var stdout, stderr bytes.Buffer
	code := run(t.Context(), []string{"--addr", addr, "insert", "--type", "shop.User"}, in, &stdout, &stderr)
	if code != exitstatus.Failed {
		t.Fatalf("exit %d, want 1\n%s", code, stderr.String())
	}
	wantContains(t, stderr.String(), "read stdin: disk on fire", "1 record read before the error was written")
}

func TestWriteProgress(t *testing.T) {
	srv := startServer(t)
	addr := srv.Addr()
	applyShop(t, addr)
	var b strings.Builder
	for i := 1; i <= 100; i++ {
		fmt.Fprintf(&b, `{"id": %d, "email": "u%d"}`+"\n", i, i)
	}
	p := writeFile(t, t.TempDir(), "users.jsonl", b.String())
	for _, args := range [][]string{
		{"--addr", addr, "upsert", "--type", "shop.User", p}, // a bar: the size is known
		{"--addr", addr, "upsert", "--type", "shop.User"},    // a spinner
	} {
		var stdout, stderr bytes.Buffer
		a := &app{stdin: strings.NewReader(b.String()), stdout: &stdout, stderr: &stderr,
			isTerminal: func(io.Writer) bool { return true }}
		if code := a.run(t.Context(), args); code != exitstatus.OK {
			t.Fatalf("exit %d\n%s", code, stderr.String())
		}
		wantContains(t, stderr.String(), "upsert", "100 records", "upserted 100 records in ")
	}
}

func TestLineMap(t *testing.T) {
	var m lineMap
	lines := []uint64{1, 2, 3, 5, 6, 9, 10, 11, 12, 20}
	for _, l := range lines {
		m.add(l)
	}
	for ord, want := range lines {
		if got, ok := m.line(uint64(ord)); !ok || got != want {
			t.Errorf("line(%d) = %d, %v; want %d", ord, got, ok, want)
		}
	}
	if _, ok := m.line(uint64(len(lines))); ok {
		t.Errorf("line past the end found")
	}
	if len(m.jumps) != 4 {
		t.Errorf("%d jumps, want 4: %v", len(m.jumps), m.jumps)
	}
}

func TestLineReaderLongLines(t *testing.T) {
	long := strings.Repeat("x", 3<<20)
	lr := newLineReader(strings.NewReader("a\n" + long + "\nb"))
	var got []string
	for {
		l, err := lr.next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, strings.TrimSuffix(string(l), "\n"))
	}
	if len(got) != 3 || got[0] != "a" || got[1] != long || got[2] != "b" {
		t.Errorf("read %d lines", len(got))
	}
}
