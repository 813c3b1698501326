package docs

import (
	"regexp"
	"strconv"
	"strings"
)

// block is a fenced code block of a Markdown page.
type block struct {
	lang string
	text string
	line int // of its first line of code, 1-based
}

// blocks returns the fenced code blocks of text, in order.
func blocks(text string) []block {
	var out []block
	var cur *block
	var body []string
	for i, l := range strings.Split(text, "\n") {
		trimmed := strings.TrimSpace(l)
		switch {
		case cur == nil && strings.HasPrefix(trimmed, "```"):
			cur = &block{lang: strings.TrimSpace(strings.TrimPrefix(trimmed, "```")), line: i + 2}
			body = body[:0]
		case cur != nil && trimmed == "```":
			cur.text = strings.Join(body, "\n")
			out = append(out, *cur)
			cur = nil
		case cur != nil:
			body = append(body, l)
		}
	}
	return out
}

// section returns the part of a Markdown page under the level-2 heading
// named, up to the next one.
func section(text, heading string) string {
	start := strings.Index(text, "\n## "+heading+"\n")
	if start < 0 {
		return ""
	}
	rest := text[start+1:]
	if end := strings.Index(rest[3:], "\n## "); end >= 0 {
		return rest[:end+3]
	}
	return rest
}

// statement is one command of a shell block, with what the page says of
// its outcome.
type statement struct {
	text    string
	line    int      // its first line in the block, 1-based
	comment string   // the comments on its own lines, joined
	output  []string // the comment lines right after it: its documented output
}

// wantExit is the exit status the statement's comment documents: "(exit
// N)" is N, a comment that begins "fails" any failure (-1), otherwise 0.
func (s statement) wantExit() int {
	if m := exitNote.FindStringSubmatch(s.comment); m != nil {
		n, _ := strconv.Atoi(m[1])
		return n
	}
	if strings.HasPrefix(s.comment, "fails") {
		return -1
	}
	return 0
}

var exitNote = regexp.MustCompile(`\(exit (\d+)\)`)

// runsUntilStopped reports whether the page says the command runs until
// the user stops it.
func (s statement) runsUntilStopped() bool { return strings.Contains(s.comment, "Ctrl-C") }

// shellStatements splits a shell block into its commands as a shell
// would: a command ends at a newline outside quotes and here-documents,
// unless the line ends in a continuation (a backslash, a pipe, && or ||).
// Lines holding only a comment right after a command are its documented
// output; a blank line ends that.
func shellStatements(text string) []statement {
	var out []statement
	lines := strings.Split(text, "\n")
	for i := 0; i < len(lines); i++ {
		trimmed := strings.TrimSpace(lines[i])
		switch {
		case trimmed == "":
			if len(out) > 0 {
				out[len(out)-1].output = append(out[len(out)-1].output, "") // a blank line: no more output lines
			}
			continue
		case strings.HasPrefix(trimmed, "#"):
			if n := len(out); n > 0 && !ended(out[n-1].output) {
				out[n-1].output = append(out[n-1].output, strings.TrimSpace(strings.TrimPrefix(trimmed, "#")))
			}
			continue
		}
		s := statement{line: i + 1}
		var sc shellScan
		var body, comments []string
		for ; i < len(lines); i++ {
			body = append(body, lines[i])
			code, comment := sc.line(lines[i])
			if comment != "" {
				comments = append(comments, comment)
			}
			if sc.heredoc != "" {
				for i++; i < len(lines) && strings.TrimSpace(lines[i]) != sc.heredoc; i++ {
					body = append(body, lines[i])
				}
				if i < len(lines) {
					body = append(body, lines[i])
				}
				sc.heredoc = ""
			}
			if sc.quote != 0 || continues(code) {
				continue
			}
			break
		}
		s.text, s.comment = strings.Join(body, "\n"), strings.Join(comments, " ")
		out = append(out, s)
	}
	for i := range out {
		out[i].output = trimOutput(out[i].output)
	}
	return out
}

func ended(output []string) bool { return len(output) > 0 && output[len(output)-1] == "" }

func trimOutput(output []string) []string {
	for len(output) > 0 && output[len(output)-1] == "" {
		output = output[:len(output)-1]
	}
	return output
}

func continues(code string) bool {
	code = strings.TrimSpace(code)
	for _, end := range []string{`\`, "|", "&&", "||"} {
		if strings.HasSuffix(code, end) {
			return true
		}
	}
	return false
}

// shellScan follows quotes across the lines of one command.
type shellScan struct {
	quote   byte   // the open quote, 0 outside
	heredoc string // the word ending a here-document begun on the line
}

// line returns the code of one line and the comment that ends it.
func (sc *shellScan) line(l string) (code, comment string) {
	for i := 0; i < len(l); i++ {
		c := l[i]
		switch {
		case sc.quote == '\'':
			if c == '\'' {
				sc.quote = 0
			}
		case sc.quote == '"':
			switch c {
			case '\\':
				i++
			case '"':
				sc.quote = 0
			}
		case c == '\\':
			i++
		case c == '\'' || c == '"':
			sc.quote = c
		case c == '#' && (i == 0 || l[i-1] == ' ' || l[i-1] == '\t'):
			return l[:i], strings.TrimSpace(l[i+1:])
		case strings.HasPrefix(l[i:], "<<"):
			word := strings.TrimLeft(l[i+2:], "-")
			word = strings.Fields(word + " ")[0]
			sc.heredoc = strings.Trim(word, `'"`)
			i += 1 + len(word)
		}
	}
	return l, ""
}

// matches reports whether got holds the documented output want, read with
// whitespace ignored and "..." standing for anything.
func matches(got string, want []string) bool {
	var re strings.Builder
	for i, part := range strings.Split(squeeze(strings.Join(want, "")), "...") {
		if i > 0 {
			re.WriteString(".*?")
		}
		re.WriteString(regexp.QuoteMeta(part))
	}
	return regexp.MustCompile("(?s)" + re.String()).MatchString(squeeze(got))
}

func squeeze(s string) string {
	return strings.Map(func(r rune) rune {
		if r == ' ' || r == '\t' || r == '\n' || r == '\r' {
			return -1
		}
		return r
	}, s)
}
