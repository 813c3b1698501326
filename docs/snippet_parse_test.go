package docs

import (
	"reflect"
	"testing"
)

func TestShellStatements(t *testing.T) {
	for _, tc := range []struct {
		name string
		text string
		want []statement
	}{
		{"one per line", "a 1\nb 2", []statement{{text: "a 1", line: 1}, {text: "b 2", line: 2}}},
		{"trailing comment", "a # fails: X (exit 1)", []statement{{text: "a # fails: X (exit 1)", line: 1, comment: "fails: X (exit 1)"}}},
		{"output lines", "a\n# {\"x\": 1}\n# more\n\n# prose\nb", []statement{
			{text: "a", line: 1, output: []string{`{"x": 1}`, "more"}}, {text: "b", line: 6}}},
		{"continuations", "a \\\n  b |\n  c &&\n  d\ne", []statement{{text: "a \\\n  b |\n  c &&\n  d", line: 1}, {text: "e", line: 5}}},
		{"quotes span lines", "a -d '{\"r\": [\n 1]}' x\nb \"q\n#no\"", []statement{
			{text: "a -d '{\"r\": [\n 1]}' x", line: 1}, {text: "b \"q\n#no\"", line: 3}}},
		{"hash inside a word", "curl a#b 'c # d'", []statement{{text: "curl a#b 'c # d'", line: 1}}},
		{"heredoc", "cat > f <<'P'\nx # y\n'\nP\nb", []statement{{text: "cat > f <<'P'\nx # y\n'\nP", line: 1}, {text: "b", line: 5}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := shellStatements(tc.text)
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("shellStatements(%q)\n got %#v\nwant %#v", tc.text, got, tc.want)
			}
		})
	}
}

func TestStatementExit(t *testing.T) {
	for comment, want := range map[string]int{
		"":                           0,
		"fails: ALREADY_EXISTS":      -1,
		"a second run fails":         0,
		"stderr: not found (exit 1)": 1,
	} {
		if got := (statement{comment: comment}).wantExit(); got != want {
			t.Errorf("wantExit of %q = %d, want %d", comment, got, want)
		}
	}
}

func TestMatches(t *testing.T) {
	for _, tc := range []struct {
		got  string
		want []string
		ok   bool
	}{
		{"{\n  \"a\": 1,\n  \"b\": [2, 3]\n}", []string{`{"a": 1, "b": [...]}`}, true},
		{`{"a": 2, "b": []}`, []string{`{"a": 1, ...}`}, false},
		{"x\n{\"op\":\"I\",\"k\":1}\ny", []string{`{"op":"I", ...}`}, true},
		{"0 None [1, 2]\n", []string{"0 None [1, ...]"}, true},
		{"", []string{"x"}, false},
	} {
		if got := matches(tc.got, tc.want); got != tc.ok {
			t.Errorf("matches(%q, %q) = %v, want %v", tc.got, tc.want, got, tc.ok)
		}
	}
}
