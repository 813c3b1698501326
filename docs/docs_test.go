// Package docs holds the project's reference pages. Its test keeps them
// true to the module and to each other: the package map of
// architecture.md names every Go package and no other, every relative link
// of the pages and of the README reaches a file and a heading, no page
// and no comment in the code speaks of how the work on the project was
// organised, and the README's quick start and docs/clients.md run, in
// order, against a real server and print what they show (run_test.go).
package docs

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode"
)

// pages returns the Markdown files the checks cover, relative to the
// module root: every .md file under docs/, and the README.
func pages(t *testing.T) []string {
	t.Helper()
	out := []string{"README.md"}
	err := filepath.WalkDir(".", func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && strings.HasSuffix(p, ".md") {
			out = append(out, filepath.Join("docs", p))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// read returns a file of the module by its path from the module root.
func read(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", path))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// prose returns the lines of a Markdown page outside fenced code blocks,
// with inline code spans blanked, so that neither is read as a heading or
// a link. Line numbers stay those of the file (1-based index i+1).
func prose(text string) []string {
	lines := strings.Split(text, "\n")
	out := make([]string, len(lines))
	fence := ""
	for i, l := range lines {
		trimmed := strings.TrimLeft(l, " ")
		if fence == "" && (strings.HasPrefix(trimmed, "```") || strings.HasPrefix(trimmed, "~~~")) {
			fence = trimmed[:3]
			continue
		}
		if fence != "" {
			if strings.HasPrefix(trimmed, fence) {
				fence = ""
			}
			continue
		}
		out[i] = codeSpan.ReplaceAllStringFunc(l, func(s string) string { return strings.Repeat(" ", len(s)) })
	}
	return out
}

var codeSpan = regexp.MustCompile("`[^`]*`")

// The package map: one table row per package, its path in backquotes in
// the first cell.
var mapRow = regexp.MustCompile("^\\| `([^`]+)` \\|")

func TestPackageMapMatchesModule(t *testing.T) {
	mod := strings.TrimSpace(goList(t, "-m")) + "/"
	// One line per package: its path, then the module's packages it imports.
	imports := map[string][]string{}
	var module []string
	for _, l := range strings.Split(strings.TrimSpace(goList(t, "-f", "{{.ImportPath}} {{join .Imports \" \"}}", "./...")), "\n") {
		f := strings.Fields(l)
		p := strings.TrimPrefix(f[0], mod)
		module = append(module, p)
		for _, imp := range f[1:] {
			if strings.HasPrefix(imp, mod) {
				imports[p] = append(imports[p], strings.TrimPrefix(imp, mod))
			}
		}
	}

	row := map[string]int{}  // package → its row in the table
	line := map[string]int{} // package → its line in the page
	inMap := false
	sc := bufio.NewScanner(strings.NewReader(read(t, "docs/architecture.md")))
	for n := 1; sc.Scan(); n++ {
		l := sc.Text()
		if strings.HasPrefix(l, "## ") {
			inMap = l == "## Package map"
			continue
		}
		if m := mapRow.FindStringSubmatch(l); inMap && m != nil {
			if line[m[1]] != 0 {
				t.Errorf("docs/architecture.md:%d: package %s is listed twice in the package map", n, m[1])
			}
			row[m[1]], line[m[1]] = len(row), n
		}
	}
	if len(row) == 0 {
		t.Fatal(`docs/architecture.md has no "## Package map" table`)
	}
	for _, p := range module {
		if line[p] == 0 {
			t.Errorf("package %s (go list ./...) is missing from the package map of docs/architecture.md", p)
			continue
		}
		for _, imp := range imports[p] {
			if r, ok := row[imp]; ok && r < row[p] {
				t.Errorf("docs/architecture.md:%d: %s imports %s, which the package map lists above it", line[p], p, imp)
			}
		}
	}
	for p, n := range line {
		if !slices.Contains(module, p) {
			t.Errorf("docs/architecture.md:%d: the package map lists %s, which is no package of the module", n, p)
		}
	}
}

// goList runs go list in the module's root and returns its output.
func goList(t *testing.T, args ...string) string {
	t.Helper()
	cmd := exec.Command("go", append([]string{"list"}, args...)...)
	cmd.Dir = ".."
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return string(out)
}

// How the work was organised is not reference text: no session or issue
// numbers (also when a line break splits them), no "before this change",
// no lab-notebook dates in headings.
var (
	workWords   = regexp.MustCompile(`(?i)session\s+[0-9]+|issue\s+[0-9]+|before\s+this\s+change`)
	datedHeader = regexp.MustCompile(`(?m)^#+ .*\b20[0-9]{2}-[0-9]{2}-[0-9]{2}\b.*$`)
)

func TestNoWorkHistory(t *testing.T) {
	for _, p := range pages(t) {
		text := read(t, p)
		for _, m := range workWords.FindAllStringIndex(text, -1) {
			line := 1 + strings.Count(text[:m[0]], "\n")
			t.Errorf("%s:%d: %q speaks of how the work was organised", p, line, text[m[0]:m[1]])
		}
		for _, m := range datedHeader.FindAllStringIndex(text, -1) {
			line := 1 + strings.Count(text[:m[0]], "\n")
			t.Errorf("%s:%d: a dated heading is a lab notebook's, not reference text: %s", p, line, text[m[0]:m[1]])
		}
	}
}

// A Markdown link or image: [text](target) or [text](target "title").
var link = regexp.MustCompile(`!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)`)

func TestRelativeLinksResolve(t *testing.T) {
	anchors := map[string]map[string]bool{}
	anchorsOf := func(path string) map[string]bool {
		if a, ok := anchors[path]; ok {
			return a
		}
		a := headingAnchors(read(t, path))
		anchors[path] = a
		return a
	}
	for _, p := range pages(t) {
		lines := prose(read(t, p))
		// Links may wrap; join the page back with its line breaks and map
		// each match to its line.
		text := strings.Join(lines, "\n")
		for _, m := range link.FindAllStringSubmatchIndex(text, -1) {
			target := text[m[2]:m[3]]
			line := 1 + strings.Count(text[:m[0]], "\n")
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			file, anchor, _ := strings.Cut(target, "#")
			dest := p
			if file != "" {
				dest = filepath.Join(filepath.Dir(p), file)
				if _, err := os.Stat(filepath.Join("..", dest)); err != nil {
					t.Errorf("%s:%d: link %s: no file %s", p, line, target, dest)
					continue
				}
			}
			if anchor == "" {
				continue
			}
			if !strings.HasSuffix(dest, ".md") {
				t.Errorf("%s:%d: link %s: an anchor in a file that is not Markdown", p, line, target)
				continue
			}
			if !anchorsOf(dest)[anchor] {
				t.Errorf("%s:%d: link %s: %s has no heading with anchor #%s (it has %s)",
					p, line, target, dest, anchor, strings.Join(sortedKeys(anchorsOf(dest)), ", "))
			}
		}
	}
}

// headingAnchors returns the anchors GitHub gives the headings of a page:
// the heading's text in lower case, with everything but letters, marks,
// digits, connector punctuation, spaces and hyphens removed and spaces
// made hyphens; a repeated anchor gets -1, -2, ... in order.
func headingAnchors(text string) map[string]bool {
	out := map[string]bool{}
	seen := map[string]int{}
	raw := strings.Split(text, "\n")
	for i, l := range prose(text) {
		if !strings.HasPrefix(l, "#") {
			continue
		}
		if title := strings.TrimLeft(l, "#"); title == "" || title[0] != ' ' {
			continue
		}
		// The heading as written: prose blanked its code spans.
		a := anchor(strings.TrimSpace(strings.TrimLeft(raw[i], "#")))
		if n := seen[a]; n > 0 {
			seen[a] = n + 1
			a = fmt.Sprintf("%s-%d", a, n)
		} else {
			seen[a] = 1
		}
		out[a] = true
	}
	return out
}

var inlineLink = regexp.MustCompile(`\[([^\]]*)\]\([^)]*\)`)

func anchor(heading string) string {
	heading = inlineLink.ReplaceAllString(heading, "$1")
	var b bytes.Buffer
	for _, r := range strings.ToLower(heading) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || unicode.IsLetter(r) || unicode.IsMark(r) || unicode.IsNumber(r) || unicode.Is(unicode.Pc, r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

func sortedKeys(m map[string]bool) []string {
	var out []string
	for k := range m {
		out = append(out, "#"+k)
	}
	slices.Sort(out)
	return out
}

func TestAnchor(t *testing.T) {
	for in, want := range map[string]string{
		"The storage contract and etcd":           "the-storage-contract-and-etcd",
		"External server (`--nats-url`)":          "external-server---nats-url",
		"`batching` (seed 000)":                   "batching-seed-000",
		"Memory in total":                         "memory-in-total",
		"A [linked](x.md) heading":                "a-linked-heading",
		"Lookups ÷ Echo, batch 1,000":             "lookups--echo-batch-1000",
		"snake_case stays":                        "snake_case-stays",
		"Reads: one snapshot, never a decode (✓)": "reads-one-snapshot-never-a-decode-",
	} {
		if got := anchor(in); got != want {
			t.Errorf("anchor(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestEngineKnowsNoTransport checks what the architecture page says of the
// engine: it links no RPC framework (neither gRPC nor its buffers nor the
// REST gateway), so that transports stay adapters onto it.
func TestEngineKnowsNoTransport(t *testing.T) {
	for _, pkg := range []string{"./internal/engine", "./internal/changelog"} {
		for _, dep := range strings.Fields(goList(t, "-deps", pkg)) {
			if strings.HasPrefix(dep, "google.golang.org/grpc") || strings.HasPrefix(dep, "github.com/grpc-ecosystem/") ||
				strings.HasSuffix(dep, "/internal/grpcbuf") || strings.Contains(dep, "/internal/transport/") {
				t.Errorf("%s depends on %s", pkg, dep)
			}
		}
	}
}

// The Go blocks of docs/concurrency.md are parts of the runnable examples
// in client/example_tx_test.go, which go test runs and checks the output
// of: each block's lines, indentation aside, appear in that order there.
func TestConcurrencyExamplesRun(t *testing.T) {
	const page = "docs/concurrency.md"
	for _, c := range []struct{ lang, examples string }{
		{"go", "client/example_tx_test.go"},
		{"python", "python/examples/concurrency.py"},
	} {
		src := "\n" + strings.Join(trimmedLines(read(t, c.examples)), "\n") + "\n"
		n := 0
		for line, block := range fencedBlocks(read(t, page), c.lang) {
			n++
			if !strings.Contains(src, "\n"+strings.Join(trimmedLines(block), "\n")+"\n") {
				t.Errorf("%s:%d: this %s block is not a part of %s:\n%s", page, line, c.lang, c.examples, block)
			}
		}
		if n == 0 {
			t.Errorf("%s has no %s block", page, c.lang)
		}
	}
}

// fencedBlocks returns the fenced blocks of lang on a page by the line of
// their opening fence.
func fencedBlocks(text, lang string) map[int]string {
	out := map[int]string{}
	start, body := 0, []string(nil)
	for i, l := range strings.Split(text, "\n") {
		switch {
		case start == 0 && strings.TrimSpace(l) == "```"+lang:
			start, body = i+1, nil
		case start != 0 && strings.TrimSpace(l) == "```":
			out[start] = strings.Join(body, "\n")
			start = 0
		case start != 0:
			body = append(body, l)
		}
	}
	return out
}

func trimmedLines(text string) []string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		out = append(out, strings.TrimSpace(l))
	}
	return out
}

// sourceDirs are the module's directories of hand-written code whose
// comments TestNoWorkHistoryInSource reads; generated code (gen/, the
// Python and TypeScript stubs) is left to its generators.
var sourceDirs = []string{
	"bench", "client", "cmd", "internal", "proto", "scripts", "server", "tests",
	"python/bench", "python/examples", "python/src", "python/tests", "ts/bench", "ts/examples", "ts/src", "ts/test",
}

// commentJoin folds a comment continued over several lines into one, so
// that "issue" at the end of one line and its number on the next read as
// the words they are.
var commentJoin = regexp.MustCompile(`\n[ \t]*(//|#|\*)?[ \t]*`)

// TestNoWorkHistoryInSource holds the code's comments to the rule the
// pages keep: they describe the code as it is, not the work that made it.
func TestNoWorkHistoryInSource(t *testing.T) {
	for _, dir := range sourceDirs {
		root := filepath.Join("..", dir)
		if _, err := os.Stat(root); os.IsNotExist(err) {
			continue
		}
		err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() {
				if n := d.Name(); n == "gen" || n == "node_modules" || strings.HasPrefix(n, ".") {
					return filepath.SkipDir
				}
				return nil
			}
			if !slices.Contains([]string{".go", ".py", ".ts", ".proto", ".sh"}, filepath.Ext(p)) ||
				strings.HasSuffix(p, "_pb2.py") || strings.HasSuffix(p, "_pb2_grpc.py") {
				return nil
			}
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			text := commentJoin.ReplaceAllString(string(b), " ")
			for _, m := range workWords.FindAllString(text, -1) {
				t.Errorf("%s: %q speaks of how the work was organised", p, m)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}
