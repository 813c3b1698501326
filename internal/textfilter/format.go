package textfilter

import (
	"math"
	"strconv"
	"strings"
	"unicode/utf8"

	pb "github.com/protobase/protobase/gen/protobase/v1"
)

// Format renders e in the syntax Parse accepts, in a canonical form: lower
// case keywords, single spaces, "=" and "!=" for equality, double-quoted
// strings, decimal integers, and parentheses only where the tree needs them.
// A comparison "field = true" is written as the bare field.
//
// Parse(Format(e)) is equal to e for every e that Parse returns, and for
// every well-formed e built by hand. Parts that Parse could not produce are
// written so that Parse rejects them rather than misreading them: a nil or
// empty expression, a comparison without a value or with an unknown operator,
// and an empty And or Or list are written as "<invalid>"; an empty field or
// enum name as two backquotes; an "in" without values as "in ()". An And or Or with a
// single element is written as that element, and a string that is not valid
// UTF-8 keeps its bad bytes as \x escapes, which Parse rejects.
func Format(e *pb.Expr) string {
	var b strings.Builder
	writeExpr(&b, e, ctxTop)
	return b.String()
}

// context is what encloses an expression being formatted.
type context uint8

const (
	ctxTop context = iota
	ctxOr
	ctxAnd
	ctxNot
)

const invalid = "<invalid>"

func writeExpr(b *strings.Builder, e *pb.Expr, ctx context) {
	switch x := e.GetExpr().(type) {
	case *pb.Expr_Cmp:
		writeCmp(b, x.Cmp)
	case *pb.Expr_Not:
		b.WriteString("not ")
		writeExpr(b, x.Not, ctxNot)
	case *pb.Expr_And:
		// And binds tighter than or, so it needs parentheses only inside
		// another and (to stay nested) or under not.
		writeList(b, x.And.GetExprs(), " and ", ctxAnd, ctx == ctxAnd || ctx == ctxNot)
	case *pb.Expr_Or:
		writeList(b, x.Or.GetExprs(), " or ", ctxOr, ctx != ctxTop)
	default:
		b.WriteString(invalid)
	}
}

func writeList(b *strings.Builder, list []*pb.Expr, sep string, inner context, paren bool) {
	switch len(list) {
	case 0:
		b.WriteString(invalid)
		return
	case 1:
		// Not expressible; the element alone means the same.
		writeExpr(b, list[0], inner)
		return
	}
	if paren {
		b.WriteByte('(')
	}
	for i, x := range list {
		if i > 0 {
			b.WriteString(sep)
		}
		writeExpr(b, x, inner)
	}
	if paren {
		b.WriteByte(')')
	}
}

var opText = map[pb.Op]string{
	pb.Op_OP_EQ:       "=",
	pb.Op_OP_NE:       "!=",
	pb.Op_OP_LT:       "<",
	pb.Op_OP_LE:       "<=",
	pb.Op_OP_GT:       ">",
	pb.Op_OP_GE:       ">=",
	pb.Op_OP_PREFIX:   "prefix",
	pb.Op_OP_CONTAINS: "contains",
}

func writeCmp(b *strings.Builder, c *pb.Comparison) {
	writeField(b, c.GetField())
	op := c.GetOp()
	if op == pb.Op_OP_IN {
		b.WriteString(" in (")
		for i, v := range c.GetValues() {
			if i > 0 {
				b.WriteString(", ")
			}
			writeValue(b, v)
		}
		b.WriteByte(')')
		return
	}
	if op == pb.Op_OP_EQ {
		if x, ok := c.GetValue().GetKind().(*pb.Value_Bool); ok && x.Bool {
			return // bare field: shorthand for field = true
		}
	}
	text, ok := opText[op]
	if !ok || c.GetValue() == nil {
		b.WriteString(" " + invalid)
		return
	}
	b.WriteString(" " + text + " ")
	writeValue(b, c.GetValue())
}

// writeField writes a dotted field path, backquoting the parts that are not
// plain identifiers. A path with an empty part is backquoted whole.
func writeField(b *strings.Builder, field string) {
	parts := strings.Split(field, ".")
	for _, p := range parts {
		if p == "" {
			writeQuotedName(b, field)
			return
		}
	}
	for i, p := range parts {
		if i > 0 {
			b.WriteByte('.')
		}
		if isPlainIdent(p) && !keywords[asciiLower(p)] {
			b.WriteString(p)
		} else {
			writeQuotedName(b, p)
		}
	}
}

func writeQuotedName(b *strings.Builder, name string) {
	b.WriteByte('`')
	b.WriteString(strings.ReplaceAll(name, "`", "``"))
	b.WriteByte('`')
}

func writeValue(b *strings.Builder, v *pb.Value) {
	switch x := v.GetKind().(type) {
	case *pb.Value_Int:
		b.WriteString(strconv.FormatInt(x.Int, 10))
	case *pb.Value_Uint:
		b.WriteString(strconv.FormatUint(x.Uint, 10))
		if x.Uint <= math.MaxInt64 {
			b.WriteByte('u') // would otherwise read back as an int
		}
	case *pb.Value_Double:
		b.WriteString(formatFloat(x.Double))
	case *pb.Value_Bool:
		b.WriteString(strconv.FormatBool(x.Bool))
	case *pb.Value_String_:
		writeQuoted(b, x.String_, false)
	case *pb.Value_Bytes:
		b.WriteByte('b')
		writeQuoted(b, string(x.Bytes), true)
	case *pb.Value_Enum:
		if isPlainIdent(x.Enum) && !keywords[asciiLower(x.Enum)] && !isFloatWord(x.Enum) {
			b.WriteString(x.Enum)
		} else {
			writeQuotedName(b, x.Enum)
		}
	default:
		b.WriteString(invalid)
	}
}

func formatFloat(f float64) string {
	switch {
	case math.IsNaN(f):
		return "nan"
	case math.IsInf(f, 1):
		return "inf"
	case math.IsInf(f, -1):
		return "-inf"
	}
	s := strconv.FormatFloat(f, 'g', -1, 64)
	if !strings.ContainsAny(s, ".e") {
		s += ".0" // keep it a float
	}
	return s
}

// writeQuoted writes s as a double-quoted literal. Bytes literals escape
// everything outside printable ASCII; strings keep printable Unicode.
func writeQuoted(b *strings.Builder, s string, bytes bool) {
	const hex = "0123456789abcdef"
	b.WriteByte('"')
	for i := 0; i < len(s); {
		r, size := rune(s[i]), 1
		if r >= utf8.RuneSelf && !bytes {
			r, size = utf8.DecodeRuneInString(s[i:])
		}
		i += size
		switch {
		case r == '"' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\t':
			b.WriteString(`\t`)
		case r == '\r':
			b.WriteString(`\r`)
		case r < 0x20 || r == 0x7f || (bytes && r >= 0x80) || (r == utf8.RuneError && size == 1):
			c := s[i-size]
			b.WriteString(`\x`)
			b.WriteByte(hex[c>>4])
			b.WriteByte(hex[c&15])
		case r < 0x80 || strconv.IsPrint(r) || r > 0xFFFF:
			b.WriteRune(r)
		default:
			b.WriteString(`\u`)
			for shift := 12; shift >= 0; shift -= 4 {
				b.WriteByte(hex[r>>shift&15])
			}
		}
	}
	b.WriteByte('"')
}

func isPlainIdent(s string) bool {
	if s == "" || !isIdentStart(s[0]) {
		return false
	}
	for i := 1; i < len(s); i++ {
		if !isIdentChar(s[i]) {
			return false
		}
	}
	return true
}

// isFloatWord reports whether s reads as a float literal in value position.
func isFloatWord(s string) bool {
	s = asciiLower(s)
	return s == "inf" || s == "nan"
}
