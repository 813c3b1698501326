// Package textfilter owns the text syntax of query filters: it parses
// text into protobase Expr messages and formats Expr messages back into
// text. It is the one parser of that syntax: the server parses the filter
// field of a Query with it, and the Go client (package client/where) and
// the CLI ("protobase search --where EXPR") use it too, so a filter means
// the same wherever it is written.
//
//	e, err := textfilter.Parse(`age >= 30 and (name prefix "An" or email contains "@example")`)
//
// # Syntax
//
// Keywords are case-insensitive and whitespace (space, tab, newline, carriage
// return) is insignificant between tokens.
//
//	expr     := or
//	or       := and ( "or" and )*
//	and      := unary ( "and" unary )*
//	unary    := "not" unary | "(" expr ")" | cmp
//	cmp      := path op value
//	          | path "in" "(" value ( "," value )* ")"
//	          | path "prefix" value
//	          | path "contains" value
//	          | path                      // shorthand for path = true
//	op       := "=" | "==" | "!=" | "<>" | "<" | "<=" | ">" | ">="
//	path     := name ( "." name )*
//	name     := ident | "`" any text, with "``" for a backquote "`"
//	ident    := [A-Za-z_][A-Za-z0-9_]*, but not a keyword
//	keyword  := and | or | not | in | prefix | contains | true | false
//	value    := int | uint | float | string | bytes | true | false | enum
//
// "not" binds tighter than "and", which binds tighter than "or", so
// "not a = 1 and b or c" means "((not a = 1) and b) or c". A chain of the
// same operator becomes one list: "a and b and c" is And{a, b, c}.
// Parentheses only group; "(a and b) and c" keeps the inner And as a nested
// element.
//
// Values:
//
//   - Integers are decimal ("42", "-7") or hexadecimal ("0xff", "-0x10").
//     An integer becomes Value.int when it fits in int64, otherwise
//     Value.uint when it fits in uint64, otherwise it is an error. A "u" suffix
//     ("5u", "0xffu") always makes a Value.uint.
//   - Floats have a fraction or an exponent ("1.5", "-2.0e-3", "1e9"), or are
//     inf, -inf or nan; they become Value.double.
//   - Strings are quoted with "..." or '...' and may use the escapes \" \' \\
//     \n \t \r \xHH (one byte) and \uHHHH (one code point). The result must be
//     valid UTF-8.
//   - Bytes are b"..." or b'...' with the same escapes; \xHH gives raw bytes.
//   - true and false are Value.bool.
//   - Any other identifier in value position is an enum value name
//     (Value.enum), resolved by the server; a backquoted name is always an
//     enum name, so `true` or `inf` can name enum values.
//
// The words inf and nan are literals only in value position; they can be
// used as field names without backquotes.
package textfilter

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"

	pb "github.com/protobase/protobase/gen/protobase/v1"
)

// maxDepth bounds the nesting of parentheses and "not" operators.
const maxDepth = 100

// Parse parses a filter expression. The error, if any, is a *SyntaxError.
func Parse(s string) (expr *pb.Expr, err error) {
	p := &parser{src: s, lx: lexer{src: s}}
	defer func() {
		if r := recover(); r != nil {
			b, ok := r.(bailout)
			if !ok {
				panic(r)
			}
			expr, err = nil, b.err
		}
	}()
	if !utf8.ValidString(s) {
		p.fail(firstInvalidUTF8(s), "invalid UTF-8 in input")
	}
	p.advance()
	if p.tok.kind == tEOF {
		p.fail(0, "empty expression")
	}
	e := p.parseOr()
	switch p.tok.kind {
	case tEOF:
		return e, nil
	case tRParen:
		p.fail(p.tok.pos, `unmatched ")"`)
	default:
		p.fail(p.tok.pos, `expected "and", "or" or end of input, found %s`, p.describe(p.tok))
	}
	panic("unreachable")
}

// FieldColumn returns the 1-based column (see SyntaxError.Column) where the
// field path field is first compared in the filter src, or 0 when src does
// not parse or compares no such field. The server uses it to point at the
// comparison it refuses (an unknown field, a value of the wrong type),
// which only the schema can tell; it parses src again, so it costs nothing
// until a query fails.
func FieldColumn(src, field string) int {
	p := &parser{src: src, lx: lexer{src: src}, fields: map[string]int{}}
	ok := func() (ok bool) {
		defer func() {
			if r := recover(); r != nil {
				if _, isBail := r.(bailout); !isBail {
					panic(r)
				}
			}
		}()
		if !utf8.ValidString(src) {
			return false
		}
		p.advance()
		if p.tok.kind == tEOF {
			return false
		}
		p.parseOr()
		return true
	}()
	off, found := p.fields[field]
	if !ok || !found {
		return 0
	}
	return column(src, off)
}

// bailout carries a syntax error from deep in the parser back to Parse.
type bailout struct{ err *SyntaxError }

type parser struct {
	src   string
	lx    lexer
	tok   token // current token
	depth int   // open parentheses and "not"s
	// fields, when set, receives the byte offset of each field path's
	// first comparison (FieldColumn).
	fields map[string]int
}

func (p *parser) fail(off int, format string, args ...any) {
	bail(p.src, off, format, args...)
}

// bail abandons parsing src with a syntax error at byte offset off.
func bail(src string, off int, format string, args ...any) {
	panic(bailout{newSyntaxError(src, off, fmt.Sprintf(format, args...))})
}

func (p *parser) advance() {
	p.tok = p.lx.next()
}

func (p *parser) text(t token) string {
	return p.src[t.pos:t.end]
}

// isKeyword reports whether the current token is the keyword kw (lower case).
func (p *parser) isKeyword(kw string) bool {
	return p.tok.kind == tIdent && asciiLower(p.text(p.tok)) == kw
}

// enter notes one more level of nesting, failing beyond maxDepth.
func (p *parser) enter() {
	p.depth++
	if p.depth > maxDepth {
		p.fail(p.tok.pos, "expression nested too deeply (limit %d)", maxDepth)
	}
}

func (p *parser) parseOr() *pb.Expr {
	first := p.parseAnd()
	if !p.isKeyword("or") {
		return first
	}
	list := []*pb.Expr{first}
	for p.isKeyword("or") {
		p.advance()
		list = append(list, p.parseAnd())
	}
	return &pb.Expr{Expr: &pb.Expr_Or{Or: &pb.ExprList{Exprs: list}}}
}

func (p *parser) parseAnd() *pb.Expr {
	first := p.parseUnary()
	if !p.isKeyword("and") {
		return first
	}
	list := []*pb.Expr{first}
	for p.isKeyword("and") {
		p.advance()
		list = append(list, p.parseUnary())
	}
	return &pb.Expr{Expr: &pb.Expr_And{And: &pb.ExprList{Exprs: list}}}
}

func (p *parser) parseUnary() *pb.Expr {
	switch {
	case p.isKeyword("not"):
		p.enter()
		p.advance()
		x := p.parseUnary()
		p.depth--
		return &pb.Expr{Expr: &pb.Expr_Not{Not: x}}
	case p.tok.kind == tLParen:
		p.enter()
		open := p.tok
		p.advance()
		x := p.parseOr()
		if p.tok.kind != tRParen {
			p.fail(p.tok.pos, `expected ")" to close "(" at column %d, found %s`,
				column(p.src, open.pos), p.describe(p.tok))
		}
		p.advance()
		p.depth--
		return x
	default:
		return p.parseCmp()
	}
}

func (p *parser) parseCmp() *pb.Expr {
	start := p.tok.pos
	field := p.parseName(`expected field name, "not" or "(", found %s`)
	for p.tok.kind == tDot {
		p.advance()
		field += "." + p.parseName(`expected field name after ".", found %s`)
	}
	if _, seen := p.fields[field]; p.fields != nil && !seen {
		p.fields[field] = start
	}
	c := &pb.Comparison{Field: field}
	switch {
	case p.tok.kind == tOp:
		c.Op = opFromText(p.text(p.tok))
		c.Value = p.parseValue()
	case p.isKeyword("prefix"):
		c.Op = pb.Op_OP_PREFIX
		c.Value = p.parseValue()
	case p.isKeyword("contains"):
		c.Op = pb.Op_OP_CONTAINS
		c.Value = p.parseValue()
	case p.isKeyword("in"):
		c.Op = pb.Op_OP_IN
		in := p.tok
		p.advance()
		if p.tok.kind != tLParen {
			p.fail(p.tok.pos, `expected "(" after %q, found %s`, p.text(in), p.describe(p.tok))
		}
		lparen := p.tok
		p.advance()
		if p.tok.kind == tRParen {
			p.fail(p.tok.pos, `empty list after %q`, p.text(in))
		}
		c.Values = append(c.Values, p.parseValueHere(lparen))
		for p.tok.kind == tComma {
			comma := p.tok
			p.advance()
			c.Values = append(c.Values, p.parseValueHere(comma))
		}
		if p.tok.kind != tRParen {
			p.fail(p.tok.pos, `expected "," or ")" in list, found %s`, p.describe(p.tok))
		}
		p.advance()
	default:
		// Bare path: boolean shorthand for path = true.
		c.Op = pb.Op_OP_EQ
		c.Value = &pb.Value{Kind: &pb.Value_Bool{Bool: true}}
	}
	return &pb.Expr{Expr: &pb.Expr_Cmp{Cmp: c}}
}

// parseName parses one path element; msg describes what was expected, with
// one %s for the token found.
func (p *parser) parseName(msg string) string {
	t := p.tok
	switch t.kind {
	case tQuoted:
		p.advance()
		return t.val
	case tIdent:
		text := p.text(t)
		if !keywords[asciiLower(text)] {
			p.advance()
			return text
		}
		p.fail(t.pos, msg+"; write `%s` to use a keyword as a name", p.describe(t), text)
	}
	p.fail(t.pos, msg, p.describe(t))
	panic("unreachable")
}

// parseValue consumes the operator at the current token and parses the value
// after it.
func (p *parser) parseValue() *pb.Value {
	after := p.tok
	p.advance()
	return p.parseValueHere(after)
}

// parseValueHere parses a value at the current token; after is the token
// before it, which an error message quotes (only then: a filter that
// parses allocates nothing for its messages).
func (p *parser) parseValueHere(after token) *pb.Value {
	t := p.tok
	var v *pb.Value
	switch t.kind {
	case tNumber:
		v = p.number(t)
	case tString:
		v = &pb.Value{Kind: &pb.Value_String_{String_: t.val}}
	case tBytes:
		v = &pb.Value{Kind: &pb.Value_Bytes{Bytes: []byte(t.val)}}
	case tQuoted:
		v = &pb.Value{Kind: &pb.Value_Enum{Enum: t.val}}
	case tIdent:
		text := p.text(t)
		switch asciiLower(text) {
		case "true":
			v = &pb.Value{Kind: &pb.Value_Bool{Bool: true}}
		case "false":
			v = &pb.Value{Kind: &pb.Value_Bool{Bool: false}}
		case "inf":
			v = &pb.Value{Kind: &pb.Value_Double{Double: math.Inf(1)}}
		case "nan":
			v = &pb.Value{Kind: &pb.Value_Double{Double: math.NaN()}}
		default:
			if keywords[asciiLower(text)] {
				p.fail(t.pos, "expected value after %q, found %s", p.text(after), p.describe(t))
			}
			v = &pb.Value{Kind: &pb.Value_Enum{Enum: text}}
		}
	default:
		p.fail(t.pos, "expected value after %q, found %s", p.text(after), p.describe(t))
	}
	p.advance()
	return v
}

// number converts a number token to a Value.
func (p *parser) number(t token) *pb.Value {
	text := p.text(t)
	if t.num == numFloat {
		if asciiLower(text) == "-inf" {
			return &pb.Value{Kind: &pb.Value_Double{Double: math.Inf(-1)}}
		}
		f, err := strconv.ParseFloat(text, 64)
		if err != nil {
			p.fail(t.pos, "float out of range")
		}
		return &pb.Value{Kind: &pb.Value_Double{Double: f}}
	}
	digits, neg := strings.CutPrefix(text, "-")
	if t.num == numUint {
		digits = digits[:len(digits)-1] // "u" suffix
	}
	base := 10
	if len(digits) > 1 && digits[0] == '0' && (digits[1]|0x20) == 'x' {
		base, digits = 16, digits[2:]
	}
	mag, err := strconv.ParseUint(digits, base, 64)
	if err != nil {
		p.fail(t.pos, "integer out of range")
	}
	switch {
	case t.num == numUint:
		if neg {
			p.fail(t.pos, "unsigned integer cannot be negative")
		}
		return &pb.Value{Kind: &pb.Value_Uint{Uint: mag}}
	case neg:
		if mag > 1<<63 {
			p.fail(t.pos, "integer out of range")
		}
		return &pb.Value{Kind: &pb.Value_Int{Int: int64(-mag)}} // wraps correctly for 1<<63
	case mag <= math.MaxInt64:
		return &pb.Value{Kind: &pb.Value_Int{Int: int64(mag)}}
	default:
		return &pb.Value{Kind: &pb.Value_Uint{Uint: mag}}
	}
}

// describe renders a token for "found ..." in error messages.
func (p *parser) describe(t token) string {
	text := truncate(p.text(t), 32)
	switch t.kind {
	case tEOF:
		return "end of input"
	case tString:
		return "string " + text
	case tBytes:
		return "bytes " + text
	case tQuoted:
		return "name " + text
	}
	return strconv.Quote(text)
}

func opFromText(s string) pb.Op {
	switch s {
	case "=", "==":
		return pb.Op_OP_EQ
	case "!=", "<>":
		return pb.Op_OP_NE
	case "<":
		return pb.Op_OP_LT
	case "<=":
		return pb.Op_OP_LE
	case ">":
		return pb.Op_OP_GT
	case ">=":
		return pb.Op_OP_GE
	}
	return pb.Op_OP_UNSPECIFIED
}

// keywords are the words that cannot be plain identifiers.
var keywords = map[string]bool{
	"and": true, "or": true, "not": true, "in": true,
	"prefix": true, "contains": true, "true": true, "false": true,
}

// asciiLower lowercases ASCII letters only; identifiers are ASCII.
func asciiLower(s string) string {
	for i := 0; i < len(s); i++ {
		if c := s[i]; 'A' <= c && c <= 'Z' {
			b := []byte(s)
			for j := i; j < len(b); j++ {
				if 'A' <= b[j] && b[j] <= 'Z' {
					b[j] += 'a' - 'A'
				}
			}
			return string(b)
		}
	}
	return s
}

// truncate shortens s to at most n runes, marking the cut with "…".
func truncate(s string, n int) string {
	i := 0
	for j := range s {
		if i == n {
			return s[:j] + "…"
		}
		i++
	}
	return s
}

func firstInvalidUTF8(s string) int {
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			return i
		}
		i += size
	}
	return len(s)
}
