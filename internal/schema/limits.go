package schema

import "fmt"

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
)

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

// Kinds of open brackets in scanNesting.
const (
	openPlain   = iota // a block or a bracket outside option values
	openMessage        // the body of a message or group declaration
	openLiteral        // a message literal or list inside an option value
)

// maxTrackedNesting bounds the scanner's bracket stack; every limit is
// checked before the stack would need to grow past it.
const maxTrackedNesting = 1024

// scanNesting is a small lexer over one .proto file: it skips comments and
// string literals and follows brackets, and knows just enough of the
// grammar to tell a message body ("message Name {", "group Name = 1 {")
// from an option value (a bracket after '=' or ':' in an option, or inside
// another value). It never fails on a syntax error: the parser reports
// those.
func scanNesting(name, src string, l Limits) error {
	var stack [maxTrackedNesting]uint8
	depth, messages, literals := 0, 0, 0
	line, lineStart := 1, 0
	// prev is the last token: an identifier or keyword, or a one-byte
	// punctuation. declaring is set from "message"/"group" until the next
	// '{' or ';'.
	prev, declaring := "", false
	fail := func(limit string, max, at int) error {
		return &LimitError{Limit: limit, Max: max, File: name, Line: line, Col: at - lineStart + 1}
	}
	for i := 0; i < len(src); {
		c := src[i]
		switch {
		case c == '\n':
			line, lineStart = line+1, i+1
			i++
		case c == ' ' || c == '\t' || c == '\r' || c == '\f' || c == '\v':
			i++
		case c == '/' && i+1 < len(src) && src[i+1] == '/':
			for i < len(src) && src[i] != '\n' {
				i++
			}
		case c == '/' && i+1 < len(src) && src[i+1] == '*':
			i += 2
			for i < len(src) && !(src[i] == '*' && i+1 < len(src) && src[i+1] == '/') {
				if src[i] == '\n' {
					line, lineStart = line+1, i+1
				}
				i++
			}
			i += 2
		case c == '"' || c == '\'':
			i++
			for i < len(src) && src[i] != c && src[i] != '\n' {
				if src[i] == '\\' {
					i++
				}
				i++
			}
			i++
			prev = "\""
		case isIdentByte(c):
			j := i
			for j < len(src) && isIdentByte(src[j]) {
				j++
			}
			word := src[i:j]
			if (word == "message" || word == "group") && (depth == 0 || stack[depth-1] != openLiteral) {
				declaring = true
			}
			prev, i = word, j
		case c == '{' || c == '[' || c == '(' || c == '<':
			kind := uint8(openPlain)
			switch {
			case depth > 0 && stack[depth-1] == openLiteral:
				kind = openLiteral
			case c == '{' && declaring:
				kind = openMessage
			case (c == '{' || c == '<' || c == '[') && prev == "=":
				// The value of "option x = {...}" or "[(x) = {...}]".
				kind = openLiteral
			}
			if c == '{' {
				declaring = false
			}
			if depth >= l.MaxNesting || depth >= maxTrackedNesting {
				return fail(LimitNesting, l.MaxNesting, i)
			}
			switch kind {
			case openMessage:
				if messages++; messages > l.MaxMessageNesting {
					return fail(LimitMessageNesting, l.MaxMessageNesting, i)
				}
			case openLiteral:
				if literals++; literals > l.MaxLiteralNesting {
					return fail(LimitLiteralNesting, l.MaxLiteralNesting, i)
				}
			}
			stack[depth] = kind
			depth++
			prev = string(c)
			i++
		case c == '}' || c == ']' || c == ')' || c == '>':
			if depth > 0 {
				depth--
				switch stack[depth] {
				case openMessage:
					messages--
				case openLiteral:
					literals--
				}
			}
			prev = string(c)
			i++
		default:
			if c == ';' {
				declaring = false
			}
			prev = src[i : i+1]
			i++
		}
	}
	return nil
}

func isIdentByte(c byte) bool {
	return c == '_' || c == '.' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= 0x80
}
