package schema

import (
	"fmt"
	"strings"
)

// Limits bound what one set of schema sources may cost before the parser
// sees it. The protocompile parser's memory grows with the bytes (about 160
// bytes of heap per source byte for plain fields, 400 for nested option
// literals) and, much faster, with bracket depth (a 0.29 MB option literal
// "{a:{a:{a:..." took 866 MB), so both are bounded. A zero field takes its
// default.
type Limits struct {
	// MaxSourceBytes bounds the total bytes of all files, names included.
	MaxSourceBytes int
	// MaxFiles bounds the number of files.
	MaxFiles int
	// MaxNesting bounds how deeply brackets ({ [ ( <) nest in one file.
	MaxNesting int
	// MaxMessageNesting bounds how deeply message (and group) declarations
	// nest inside each other.
	MaxMessageNesting int
	// MaxLiteralNesting bounds how deeply message literals ({...} or <...>)
	// and lists nest in an option value.
	MaxLiteralNesting int
}

// DefaultLimits are the limits Compile applies: far above what a
// hand-written schema needs, far below what strains the parser.
var DefaultLimits = Limits{
	MaxSourceBytes:    2 << 20,
	MaxFiles:          10000,
	MaxNesting:        64,
	MaxMessageNesting: 32,
	MaxLiteralNesting: 32,
}

func (l Limits) withDefaults() Limits {
	d := DefaultLimits
	if l.MaxSourceBytes <= 0 {
		l.MaxSourceBytes = d.MaxSourceBytes
	}
	if l.MaxFiles <= 0 {
		l.MaxFiles = d.MaxFiles
	}
	if l.MaxNesting <= 0 {
		l.MaxNesting = d.MaxNesting
	}
	if l.MaxMessageNesting <= 0 {
		l.MaxMessageNesting = d.MaxMessageNesting
	}
	if l.MaxLiteralNesting <= 0 {
		l.MaxLiteralNesting = d.MaxLiteralNesting
	}
	return l
}

// Names of the limits, as a LimitError reports them.
const (
	LimitSourceBytes    = "max_source_bytes"
	LimitFiles          = "max_files"
	LimitNesting        = "max_nesting"
	LimitMessageNesting = "max_message_nesting"
	LimitLiteralNesting = "max_literal_nesting"
	LimitKeyPathDepth   = "max_key_path_depth"
)

// MaxKeyPathDepth bounds the fields of one primary-key or index field path
// ("a.b.c" is 3). A path through a recursive message could otherwise be as
// deep as the source allows, deeper than a record can nest (decoders stop
// at 100 levels), naming a key no record can set; every field along it is
// also compared by every schema change.
const MaxKeyPathDepth = 16

// LimitError refuses sources that exceed a Limit; it maps to
// INVALID_ARGUMENT. File, Line and Col locate the excess when it is in one
// file (Line is 0 otherwise).
type LimitError struct {
	Limit     string
	Max       int
	File      string
	Line, Col int
}

func (e *LimitError) Error() string {
	what := map[string]string{
		LimitSourceBytes:    "the schema files total more than %d bytes",
		LimitFiles:          "the schema has more than %d files",
		LimitNesting:        "brackets nest deeper than %d levels",
		LimitMessageNesting: "message declarations nest deeper than %d levels",
		LimitLiteralNesting: "an option value nests deeper than %d levels",
	}[e.Limit]
	msg := fmt.Sprintf("schema limit %s exceeded: "+what, e.Limit, e.Max)
	switch {
	case e.File != "" && e.Line > 0:
		return fmt.Sprintf("%s:%d:%d: %s", e.File, e.Line, e.Col, msg)
	case e.File != "":
		return e.File + ": " + msg
	}
	return msg
}

// CheckLimits returns a *LimitError when files exceed l; it reads each byte
// once and allocates nothing per byte.
func CheckLimits(files map[string]string, l Limits) error {
	l = l.withDefaults()
	if len(files) > l.MaxFiles {
		return &LimitError{Limit: LimitFiles, Max: l.MaxFiles}
	}
	total := 0
	for name, src := range files {
		total += len(name) + len(src)
		if total > l.MaxSourceBytes {
			return &LimitError{Limit: LimitSourceBytes, Max: l.MaxSourceBytes}
		}
	}
	for _, name := range sortedKeys(files) {
		if err := scanNesting(name, files[name], l); err != nil {
			return err
		}
	}
	return nil
}

// Kinds of open brackets in nestScanner.
const (
	openPlain   = iota // a block or a bracket outside option values
	openMessage        // the body of a message or group declaration
	openLiteral        // a message literal or list inside an option value
)

// maxTrackedNesting bounds the scanner's bracket stack; every limit is
// checked before the stack would need to grow past it.
const maxTrackedNesting = 1024

// nestScanner is a small lexer over one .proto file: it skips comments and
// string literals and follows brackets, and knows just enough of the
// grammar to tell a message body ("message Name {", "group Name = 1 {")
// from an option value (a bracket after '=', or inside another value). It
// never fails on a syntax error: the parser reports those.
type nestScanner struct {
	name, src       string
	l               Limits
	i               int // next byte
	line, lineStart int // 1-based line of src[i] and where it starts

	stack              [maxTrackedNesting]uint8 // kinds of the open brackets
	depth              int
	messages, literals int // open brackets of each kind
	// prev is the last token: an identifier or keyword, or a one-byte
	// punctuation. declaring is set from "message" or "group" until the
	// next '{' or ';'.
	prev      string
	declaring bool
}

// scanNesting returns a *LimitError when brackets in src nest past l.
func scanNesting(name, src string, l Limits) error {
	s := &nestScanner{name: name, src: src, l: l, line: 1}
	for s.i < len(s.src) {
		if err := s.next(); err != nil {
			return err
		}
	}
	return nil
}

// next consumes one token, or one byte of white space.
func (s *nestScanner) next() error {
	c := s.src[s.i]
	switch {
	case c == '\n':
		s.i++
		s.line, s.lineStart = s.line+1, s.i
	case isSpace(c):
		s.i++
	case c == '/' && s.peek() == '/':
		s.skipLineComment()
	case c == '/' && s.peek() == '*':
		s.skipBlockComment()
	case c == '"' || c == '\'':
		s.skipString(c)
	case isIdentByte(c):
		s.word()
	case strings.IndexByte("{[(<", c) >= 0:
		return s.open(c)
	case strings.IndexByte("}])>", c) >= 0:
		s.close()
	default:
		if c == ';' {
			s.declaring = false
		}
		s.punct()
	}
	return nil
}

// peek returns the byte after the current one, or 0 at the end.
func (s *nestScanner) peek() byte {
	if s.i+1 < len(s.src) {
		return s.src[s.i+1]
	}
	return 0
}

// skipLineComment consumes a // comment up to, not including, its newline,
// which next counts.
func (s *nestScanner) skipLineComment() {
	for s.i < len(s.src) && s.src[s.i] != '\n' {
		s.i++
	}
}

// skipBlockComment consumes a /* */ comment, counting the lines inside it so
// that errors after it point at the right line; an unterminated one runs to
// the end.
func (s *nestScanner) skipBlockComment() {
	src := s.src
	s.i += 2
	for s.i < len(src) && (src[s.i] != '*' || s.i+1 >= len(src) || src[s.i+1] != '/') {
		if src[s.i] == '\n' {
			s.line, s.lineStart = s.line+1, s.i+1
		}
		s.i++
	}
	s.i += 2
}

// skipString consumes a string literal quoted by q, so that brackets inside
// it do not count. A literal cannot span lines: at a newline it ends, and
// the parser reports it.
func (s *nestScanner) skipString(q byte) {
	src := s.src
	s.i++
	for s.i < len(src) && src[s.i] != q && src[s.i] != '\n' {
		if src[s.i] == '\\' {
			s.i++
		}
		s.i++
	}
	s.i++
	s.prev = "\""
}

// word consumes an identifier or keyword. "message" and "group" start a
// declaration, whose body is a message, unless they are a value inside an
// option literal.
func (s *nestScanner) word() {
	j := s.i
	for j < len(s.src) && isIdentByte(s.src[j]) {
		j++
	}
	word := s.src[s.i:j]
	if (word == "message" || word == "group") && !s.inLiteral() {
		s.declaring = true
	}
	s.prev, s.i = word, j
}

// inLiteral reports whether the innermost open bracket is part of an option
// value.
func (s *nestScanner) inLiteral() bool {
	return s.depth > 0 && s.stack[s.depth-1] == openLiteral
}

// close consumes a closing bracket. An unbalanced one is left for the parser
// to report.
func (s *nestScanner) close() {
	if s.depth > 0 {
		s.depth--
		switch s.stack[s.depth] {
		case openMessage:
			s.messages--
		case openLiteral:
			s.literals--
		}
	}
	s.punct()
}

// punct consumes a one-byte token.
func (s *nestScanner) punct() {
	s.prev = s.src[s.i : s.i+1]
	s.i++
}

// open consumes an opening bracket c and checks the limits.
func (s *nestScanner) open(c byte) error {
	kind := uint8(openPlain)
	switch {
	case s.inLiteral():
		kind = openLiteral
	case c == '{' && s.declaring:
		kind = openMessage
	case (c == '{' || c == '<' || c == '[') && s.prev == "=":
		// The value of "option x = {...}" or "[(x) = {...}]".
		kind = openLiteral
	}
	if c == '{' {
		s.declaring = false
	}
	if s.depth >= s.l.MaxNesting || s.depth >= maxTrackedNesting {
		return s.fail(LimitNesting, s.l.MaxNesting)
	}
	switch kind {
	case openMessage:
		if s.messages++; s.messages > s.l.MaxMessageNesting {
			return s.fail(LimitMessageNesting, s.l.MaxMessageNesting)
		}
	case openLiteral:
		if s.literals++; s.literals > s.l.MaxLiteralNesting {
			return s.fail(LimitLiteralNesting, s.l.MaxLiteralNesting)
		}
	}
	s.stack[s.depth] = kind
	s.depth++
	s.prev = s.src[s.i : s.i+1]
	s.i++
	return nil
}

func (s *nestScanner) fail(limit string, max int) error {
	// The name ends up in a gRPC status, which must be UTF-8.
	name := strings.ToValidUTF8(s.name, "\uFFFD")
	return &LimitError{Limit: limit, Max: max, File: name, Line: s.line, Col: s.i - s.lineStart + 1}
}

// isSpace reports white space other than a newline, which next counts.
func isSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\r' || c == '\f' || c == '\v'
}

func isIdentByte(c byte) bool {
	return c == '_' || c == '.' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= 0x80
}
