package textfilter

import (
	"strconv"
	"strings"
	"unicode/utf8"
)

type tokKind uint8

const (
	tEOF    tokKind = iota
	tIdent          // identifier or keyword; the source text is the name
	tQuoted         // `quoted name`; val is the name
	tNumber         // number; num says which kind
	tString         // "string" or 'string'; val is the decoded text
	tBytes          // b"bytes"; val is the decoded bytes
	tOp             // comparison operator
	tLParen         // (
	tRParen         // )
	tComma          // ,
	tDot            // .
)

type numKind uint8

const (
	numInt   numKind = iota // integer without suffix
	numUint                 // integer with a "u" suffix
	numFloat                // float, inf or -inf
)

type token struct {
	kind     tokKind
	pos, end int // byte offsets of the source text
	val      string
	num      numKind
}

// lexer splits the input into tokens on demand, so that the first error in
// the input is the one reported.
type lexer struct {
	src string
	pos int
}

func (l *lexer) fail(off int, format string, args ...any) {
	bail(l.src, off, format, args...)
}

func (l *lexer) next() token {
	s := l.src
	for l.pos < len(s) && isSpace(s[l.pos]) {
		l.pos++
	}
	start := l.pos
	if start >= len(s) {
		return token{kind: tEOF, pos: start, end: start}
	}
	c := s[start]
	switch {
	case isIdentStart(c):
		i := start + 1
		for i < len(s) && isIdentChar(s[i]) {
			i++
		}
		if i == start+1 && (c == 'b' || c == 'B') && i < len(s) && (s[i] == '"' || s[i] == '\'') {
			return l.lexString(start, i, tBytes)
		}
		return l.emit(tIdent, start, i)
	case c == '"' || c == '\'':
		return l.lexString(start, start, tString)
	case c == '`':
		return l.lexQuoted(start)
	case isDigit(c) || c == '-':
		return l.lexNumber(start)
	}
	if kind, ok := punct[c]; ok {
		return l.emit(kind, start, start+1)
	}
	if n := opLen(c, l.at(start+1)); n > 0 {
		return l.emit(tOp, start, start+n)
	}
	r, _ := utf8.DecodeRuneInString(s[start:])
	l.fail(start, "unexpected character %q", r)
	panic("unreachable")
}

// punct is the token of each one-byte punctuation mark.
var punct = map[byte]tokKind{'(': tLParen, ')': tRParen, ',': tComma, '.': tDot}

// opLen returns the length of the comparison operator starting with c,
// followed by d: "=", "==", "!=", "<", "<=", "<>", ">", ">=" (0: none).
func opLen(c, d byte) int {
	switch c {
	case '=', '>':
		if d == '=' {
			return 2
		}
		return 1
	case '<':
		if d == '=' || d == '>' {
			return 2
		}
		return 1
	case '!':
		if d == '=' {
			return 2
		}
	}
	return 0
}

// at returns the byte at i, or 0 past the end.
func (l *lexer) at(i int) byte {
	if i < len(l.src) {
		return l.src[i]
	}
	return 0
}

func (l *lexer) emit(kind tokKind, start, end int) token {
	l.pos = end
	return token{kind: kind, pos: start, end: end}
}

func (l *lexer) lexNumber(start int) token {
	s := l.src
	i := start
	if s[i] == '-' {
		i++
		switch {
		case i < len(s) && isDigit(s[i]):
		case hasWordAt(s, i, "inf"):
			t := l.emit(tNumber, start, i+3)
			t.num = numFloat
			return t
		default:
			l.fail(start, `unexpected character "-"`)
		}
	}
	num := numInt
	if s[i] == '0' && (l.at(i+1)|0x20) == 'x' {
		i += 2
		j := i
		for i < len(s) && isHex(s[i]) {
			i++
		}
		if i == j {
			l.badNumber(start, i)
		}
	} else {
		i = skipDigits(s, i)
		if l.at(i) == '.' && isDigit(l.at(i+1)) {
			num = numFloat
			i = skipDigits(s, i+1)
		}
		if (l.at(i) | 0x20) == 'e' {
			j := i + 1
			if c := l.at(j); c == '+' || c == '-' {
				j++
			}
			if isDigit(l.at(j)) {
				num = numFloat
				i = skipDigits(s, j)
			}
		}
	}
	if num == numInt && (l.at(i)|0x20) == 'u' {
		num = numUint
		i++
	}
	if c := l.at(i); isIdentChar(c) || c == '.' {
		l.badNumber(start, i)
	}
	t := l.emit(tNumber, start, i)
	t.num = num
	return t
}

// badNumber reports a malformed number starting at start; i is where the
// number stopped making sense.
func (l *lexer) badNumber(start, i int) {
	for c := l.at(i); isIdentChar(c) || c == '.' || c == '+' || c == '-'; c = l.at(i) {
		i++
	}
	l.fail(start, "invalid number %q", truncate(l.src[start:i], 32))
}

// lexString lexes a string or bytes literal whose prefix starts at start and
// whose opening quote is at q.
func (l *lexer) lexString(start, q int, kind tokKind) token {
	s := l.src
	quote := s[q]
	what := "string"
	if kind == tBytes {
		what = "bytes literal"
	}
	var buf strings.Builder
	i := q + 1
	for {
		if i >= len(s) || s[i] == '\n' || s[i] == '\r' {
			l.fail(start, "unterminated %s", what)
		}
		c := s[i]
		if c == quote {
			i++
			break
		}
		if c != '\\' {
			buf.WriteByte(c)
			i++
			continue
		}
		if i+1 >= len(s) {
			l.fail(start, "unterminated %s", what)
		}
		switch e := s[i+1]; e {
		case '"', '\'', '\\':
			buf.WriteByte(e)
			i += 2
		case 'n':
			buf.WriteByte('\n')
			i += 2
		case 't':
			buf.WriteByte('\t')
			i += 2
		case 'r':
			buf.WriteByte('\r')
			i += 2
		case 'x':
			v, ok := hexValue(s, i+2, 2)
			if !ok {
				l.fail(i, `invalid escape: \x must be followed by two hex digits`)
			}
			buf.WriteByte(byte(v))
			i += 4
		case 'u':
			v, ok := hexValue(s, i+2, 4)
			if !ok {
				l.fail(i, `invalid escape: \u must be followed by four hex digits`)
			}
			if 0xD800 <= v && v <= 0xDFFF {
				l.fail(i, `invalid escape: \u%04X is a surrogate half`, v)
			}
			buf.WriteRune(rune(v))
			i += 6
		default:
			r, _ := utf8.DecodeRuneInString(s[i+1:])
			if strconv.IsPrint(r) {
				l.fail(i, `invalid escape "\%c"`, r)
			}
			l.fail(i, `invalid escape: backslash followed by %q`, r)
		}
	}
	val := buf.String()
	if kind == tString && !utf8.ValidString(val) {
		l.fail(start, `string is not valid UTF-8 (use b"..." for bytes)`)
	}
	t := l.emit(kind, start, i)
	t.val = val
	return t
}

// lexQuoted lexes a backquoted name, in which two backquotes stand for one.
func (l *lexer) lexQuoted(start int) token {
	s := l.src
	var buf strings.Builder
	i := start + 1
	for {
		if i >= len(s) || s[i] == '\n' || s[i] == '\r' {
			l.fail(start, "unterminated quoted name")
		}
		if s[i] == '`' {
			if l.at(i+1) != '`' {
				i++
				break
			}
			i++
		}
		buf.WriteByte(s[i])
		i++
	}
	if buf.Len() == 0 {
		l.fail(start, "empty quoted name")
	}
	t := l.emit(tQuoted, start, i)
	t.val = buf.String()
	return t
}

// hexValue decodes n hex digits at s[i:].
func hexValue(s string, i, n int) (uint32, bool) {
	if i+n > len(s) {
		return 0, false
	}
	var v uint32
	for _, c := range []byte(s[i : i+n]) {
		if !isHex(c) {
			return 0, false
		}
		v = v<<4 | uint32(unhex(c))
	}
	return v, true
}

// hasWordAt reports whether s has the (lower-case) word w at i, in any case,
// not followed by an identifier character.
func hasWordAt(s string, i int, w string) bool {
	return len(s)-i >= len(w) && asciiLower(s[i:i+len(w)]) == w &&
		(i+len(w) == len(s) || !isIdentChar(s[i+len(w)]))
}

func skipDigits(s string, i int) int {
	for i < len(s) && isDigit(s[i]) {
		i++
	}
	return i
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }
func isDigit(c byte) bool { return '0' <= c && c <= '9' }
func isHex(c byte) bool   { return isDigit(c) || 'a' <= c|0x20 && c|0x20 <= 'f' }

func isIdentStart(c byte) bool {
	return 'a' <= c|0x20 && c|0x20 <= 'z' || c == '_'
}

func isIdentChar(c byte) bool { return isIdentStart(c) || isDigit(c) }

func unhex(c byte) byte {
	if isDigit(c) {
		return c - '0'
	}
	return (c | 0x20) - 'a' + 10
}
