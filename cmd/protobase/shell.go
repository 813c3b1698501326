package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strings"

	"github.com/peterh/liner"
	"github.com/spf13/cobra"

	"github.com/protobase/protobase/internal/exitstatus"
)

// shellPrompt is the prompt of an interactive shell.
const shellPrompt = "protobase> "

// shellHelp lists the shell's statements; the shell prints it for help.
const shellHelp = `Statements (TYPE is a record type's full name, FILTER the filter syntax of
"protobase search --help", written as it is, without quotes around it):

  search TYPE [FILTER]         every match, as a table or JSON lines (\format)
  query TYPE [FILTER]          one page of matches (the Query call; the next
                               page's token is printed after it)
  count TYPE [FILTER]          the number of matches
  explain TYPE [FILTER]        the plan the server chose, and the count
  get TYPE KEY...              records by primary key (KEY as for "get": 1,
                               ann, '[7, 1001]')
  insert TYPE JSON             write one record (JSON: the record, on the
  upsert TYPE JSON             same line); remove takes the key's fields
  update TYPE JSON
  remove TYPE JSON
  watch TYPE [FILTER]          print changes as they are committed, until
                               Ctrl-C (which ends the watch, not the shell)
  schema                       the schema: types, keys, indexes, files
  \format table|json           how search, query and get print records: a
                               table on a terminal and JSON lines (one
                               object a line) from a script, until changed
  help                         this text
  exit, quit, \q, Ctrl-D       leave

Any other command line of the CLI's client commands works as well, flags
and all: search -t shop.User -w 'age > 30' --limit 5, schema get --format
json, keys list, insert -t shop.User users.jsonl (the write commands
written so read a file: their stdin is empty). Words in quotes ('...' or
"...") stay one word. Tab completes statements, type names and, in a
filter, field names.`

// shellCommands are the CLI commands a shell line may run with flags.
var shellCommands = []string{
	"search", "scan", "query", "get", "insert", "upsert", "update", "remove",
	"patch", "write", "watch", "schema", "keys", "export", "import", "version",
}

// shellStatements are what the first word of a line may be, for completion.
var shellStatements = []string{
	"search", "query", "count", "explain", "get", "insert", "upsert", "update",
	"remove", "watch", "schema", "scan", "keys", "help", "exit", "quit",
	`\format`, `\q`,
}

func (a *app) shellCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "shell",
		Short: "An interactive shell: search, get, write and watch records",
		Long: `shell reads statements and runs them against the server at --addr (with
--api-key and the --tls-* flags, as every client command). On a terminal it
edits lines (arrows, Ctrl-A/E, Ctrl-R to search the history), keeps a
history for the session (up and down arrows), and completes statements,
record type names and field names with Tab; Ctrl-C clears the line, Ctrl-D
or exit leaves. A running statement (a watch) stops at Ctrl-C, and the
prompt comes back.

When stdin is not a terminal, the shell reads statements from it, one per
line, without prompts, and runs every one; lines starting with # are
comments. It exits 0 when every statement succeeded, else 1. Ctrl-C
while a statement runs ends that statement and the script goes on (a
watch in a script runs until then); between statements it ends the shell.

` + shellHelp,
		Example: `  protobase shell
  protobase shell --addr db.example.com:7070 --tls-ca ca.pem
  printf 'count shop.User\nsearch shop.User age >= 30\n' | protobase shell`,
		Args: cobra.NoArgs,
		RunE: exitstatus.RunE(func(cmd *cobra.Command, _ []string) error {
			return a.shell(cmd.Context())
		}),
	}
}

// shell is one session: its output format and its completion's schema.
type shell struct {
	a      *app
	format string // "table" or "jsonl"
	comp   *completer
	failed bool // a statement failed
	// sigs receives SIGINT while a statement runs (the whole session on
	// a terminal); interactive says the statements come from a terminal.
	sigs        chan os.Signal
	interactive bool
}

func (a *app) shell(ctx context.Context) error {
	c, err := a.dial()
	if err != nil {
		return err
	}
	defer c.Close()
	s := &shell{a: a, format: "table", comp: newCompleter(ctx, c, a.conn.Addr), sigs: make(chan os.Signal, 1)}
	defer signal.Stop(s.sigs)
	if f, ok := a.stdin.(*os.File); ok && f == os.Stdin && isTerminalReader(f) {
		// SIGINT belongs to the shell for the whole session: during a
		// statement it ends the statement (run), and never the process.
		// At the prompt the line editor reads Ctrl-C as a key.
		signal.Notify(s.sigs, os.Interrupt)
		s.interactive = true
		return s.prompt(ctx)
	}
	s.format = "jsonl"
	in := bufio.NewScanner(a.stdin)
	in.Buffer(make([]byte, 64<<10), 64<<20)
	for in.Scan() {
		if s.line(ctx, in.Text()) {
			break
		}
	}
	if err := in.Err(); err != nil {
		return fmt.Errorf("read statements: %w", err)
	}
	if s.failed {
		// Each failure was printed as it happened.
		return &exitstatus.Error{Code: exitstatus.Failed}
	}
	return nil
}

// prompt runs statements typed on the terminal, with line editing.
func (s *shell) prompt(ctx context.Context) error {
	ln := liner.NewLiner()
	defer ln.Close()
	ln.SetCtrlCAborts(true)
	ln.SetTabCompletionStyle(liner.TabPrints)
	ln.SetWordCompleter(s.comp.complete)
	fmt.Fprintf(s.a.stdout, "Server %s. Type help for the statements, Ctrl-D to leave.\n", s.a.conn.Addr)
	for {
		text, err := ln.Prompt(shellPrompt)
		switch {
		case errors.Is(err, liner.ErrPromptAborted):
			continue
		case errors.Is(err, io.EOF):
			fmt.Fprintln(s.a.stdout)
			return nil
		case err != nil:
			return fmt.Errorf("read a statement: %w", err)
		}
		if strings.TrimSpace(text) != "" {
			ln.AppendHistory(text)
		}
		if s.line(ctx, text) {
			return nil
		}
	}
}

// line runs one statement; it reports whether the shell should end.
func (s *shell) line(ctx context.Context, text string) (quit bool) {
	text = strings.TrimSpace(text)
	if text == "" || strings.HasPrefix(text, "#") {
		return false
	}
	args, stdin, err := s.translate(text)
	switch {
	case errors.Is(err, errShellQuit):
		return true
	case err != nil:
		fmt.Fprintf(s.a.stderr, "error: %v\n", err)
		s.failed = true
		return false
	case args == nil:
		return false
	}
	if code := s.run(ctx, args, stdin); code != exitstatus.OK {
		s.failed = true
	}
	if args[0] == "schema" {
		s.comp.forget()
	}
	return false
}

// run runs the CLI command line args, with stdin as its input, through
// the CLI's own commands (the same code as on the command line), until it
// ends or Ctrl-C stops it.
func (s *shell) run(ctx context.Context, args []string, stdin string) int {
	if !s.interactive {
		// A script is interrupted as a whole except while a statement
		// runs: Ctrl-C then ends the statement (a watch) and the script
		// goes on.
		signal.Notify(s.sigs, os.Interrupt)
		defer signal.Stop(s.sigs)
	}
	// Drop an interrupt that came between statements.
	select {
	case <-s.sigs:
	default:
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-s.sigs:
			cancel()
		case <-ctx.Done():
		}
	}()
	sub := &app{stdin: strings.NewReader(stdin), stdout: s.a.stdout, stderr: s.a.stderr, isTerminal: s.a.isTerminal}
	root := sub.rootCommand()
	// The session's connection flags, over the defaults that building the
	// commands registered.
	sub.conn = s.a.conn
	root.SetArgs(args)
	root.SetIn(sub.stdin)
	root.SetOut(sub.stdout)
	root.SetErr(sub.stderr)
	return exitstatus.Execute(ctx, root, sub.stderr)
}

// errShellQuit is a statement that leaves the shell.
var errShellQuit = errors.New("quit")

// translate turns a statement into the CLI command line that runs it and
// the input that command reads; nil args for a statement the shell
// handled itself.
func (s *shell) translate(text string) (args []string, stdin string, err error) {
	verb, rest, _ := strings.Cut(text, " ")
	rest = strings.TrimSpace(rest)
	switch verb {
	case "exit", "quit", `\q`:
		return nil, "", errShellQuit
	case "help", `\help`, `\?`:
		fmt.Fprintln(s.a.stdout, shellHelp)
		return nil, "", nil
	case `\format`:
		switch rest {
		case "table":
			s.format = "table"
		case "json", "jsonl":
			s.format = "jsonl"
		default:
			return nil, "", fmt.Errorf(`\format %q: want table or json`, rest)
		}
		return nil, "", nil
	case "schema":
		if rest == "" {
			return []string{"schema", "get"}, "", nil
		}
	case "count", "explain":
		typ, filter := cutWord(rest)
		if typ == "" {
			return nil, "", fmt.Errorf("%s: want %s TYPE [FILTER]", verb, verb)
		}
		args = []string{"search", "--type", typ, "--count"}
		if verb == "explain" {
			args = append(args, "--explain")
		}
		return withFilter(args, filter), "", nil
	}
	if !slices.Contains(shellCommands, verb) {
		return nil, "", fmt.Errorf("unknown statement %q (help lists them)", verb)
	}
	if rest == "" || strings.HasPrefix(rest, "-") {
		// The CLI's own command line, flags and all.
		words, err := splitWords(text)
		if err != nil {
			return nil, "", err
		}
		return s.withFormat(words), "", nil
	}
	return s.shorthand(verb, rest)
}

// shorthand translates "VERB TYPE ..." statements.
func (s *shell) shorthand(verb, rest string) (args []string, stdin string, err error) {
	typ, more := cutWord(rest)
	switch verb {
	case "search", "scan", "query", "watch":
		args = withFilter([]string{verb, "--type", typ}, more)
		return s.withFormat(args), "", nil
	case "get":
		keys, err := splitWords(more)
		if err != nil {
			return nil, "", err
		}
		if len(keys) == 0 {
			return nil, "", errors.New("get: want get TYPE and one key or more")
		}
		return s.withFormat(append([]string{"get", "--type", typ}, keys...)), "", nil
	case "insert", "upsert", "update", "remove":
		if more == "" {
			return nil, "", fmt.Errorf("%s: want %s TYPE JSON (the record on the same line)", verb, verb)
		}
		return []string{verb, "--type", typ}, more + "\n", nil
	}
	return nil, "", fmt.Errorf("%s: give its flags (%s --help)", verb, verb)
}

// withFilter adds --where filter when there is one.
func withFilter(args []string, filter string) []string {
	if filter = strings.TrimSpace(filter); filter != "" {
		args = append(args, "--where", filter)
	}
	return args
}

// withFormat adds the session's --format to the commands that print
// records, unless the line gives one.
func (s *shell) withFormat(args []string) []string {
	switch args[0] {
	case "search", "scan", "query", "get":
	default:
		return args
	}
	for _, a := range args {
		if a == "--format" || strings.HasPrefix(a, "--format=") || a == "--count" {
			return args
		}
	}
	return append(args, "--format", s.format)
}

// cutWord splits s at its first run of spaces.
func cutWord(s string) (word, rest string) {
	s = strings.TrimSpace(s)
	word, rest, _ = strings.Cut(s, " ")
	return word, strings.TrimSpace(rest)
}

// splitWords splits a line into words as a POSIX shell does for quotes:
// '...' keeps everything, "..." keeps everything but \" and \\, and a
// backslash outside quotes keeps the next character.
func splitWords(s string) ([]string, error) {
	var words []string
	var cur strings.Builder
	inWord := false
	for i := 0; i < len(s); i++ {
		ch := s[i]
		switch {
		case ch == ' ' || ch == '\t':
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
				inWord = false
			}
			continue
		case ch == '\'':
			end := strings.IndexByte(s[i+1:], '\'')
			if end < 0 {
				return nil, fmt.Errorf("unterminated ' at column %d", i+1)
			}
			cur.WriteString(s[i+1 : i+1+end])
			i += end + 1
		case ch == '"':
			j := i + 1
			for ; j < len(s) && s[j] != '"'; j++ {
				if s[j] == '\\' && j+1 < len(s) && (s[j+1] == '"' || s[j+1] == '\\') {
					j++
				}
				cur.WriteByte(s[j])
			}
			if j == len(s) {
				return nil, fmt.Errorf(`unterminated " at column %d`, i+1)
			}
			i = j
		case ch == '\\' && i+1 < len(s):
			i++
			cur.WriteByte(s[i])
		default:
			cur.WriteByte(ch)
		}
		inWord = true
	}
	if inWord {
		words = append(words, cur.String())
	}
	return words, nil
}
