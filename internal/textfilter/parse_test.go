package textfilter_test

import (
	"errors"
	"math"
	"strings"
	"testing"
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/proto"

	pb "github.com/protobase/protobase/gen/protobase/v1"
	"github.com/protobase/protobase/internal/textfilter"
)

// Builders for expected expressions.

func cmp(field string, op pb.Op, v *pb.Value) *pb.Expr {
	return &pb.Expr{Expr: &pb.Expr_Cmp{Cmp: &pb.Comparison{Field: field, Op: op, Value: v}}}
}

func eq(field string, v *pb.Value) *pb.Expr { return cmp(field, pb.Op_OP_EQ, v) }

// flag is the bare-path shorthand: field = true.
func flag(field string) *pb.Expr { return eq(field, bl(true)) }

func in(field string, vs ...*pb.Value) *pb.Expr {
	return &pb.Expr{Expr: &pb.Expr_Cmp{Cmp: &pb.Comparison{Field: field, Op: pb.Op_OP_IN, Values: vs}}}
}

func and(xs ...*pb.Expr) *pb.Expr {
	return &pb.Expr{Expr: &pb.Expr_And{And: &pb.ExprList{Exprs: xs}}}
}

func or(xs ...*pb.Expr) *pb.Expr {
	return &pb.Expr{Expr: &pb.Expr_Or{Or: &pb.ExprList{Exprs: xs}}}
}

func not(x *pb.Expr) *pb.Expr { return &pb.Expr{Expr: &pb.Expr_Not{Not: x}} }

func i64(n int64) *pb.Value   { return &pb.Value{Kind: &pb.Value_Int{Int: n}} }
func u64(n uint64) *pb.Value  { return &pb.Value{Kind: &pb.Value_Uint{Uint: n}} }
func f64(f float64) *pb.Value { return &pb.Value{Kind: &pb.Value_Double{Double: f}} }
func bl(b bool) *pb.Value     { return &pb.Value{Kind: &pb.Value_Bool{Bool: b}} }
func str(s string) *pb.Value  { return &pb.Value{Kind: &pb.Value_String_{String_: s}} }
func byt(b string) *pb.Value  { return &pb.Value{Kind: &pb.Value_Bytes{Bytes: []byte(b)}} }
func enum(n string) *pb.Value { return &pb.Value{Kind: &pb.Value_Enum{Enum: n}} }

func show(m proto.Message) string {
	return prototext.MarshalOptions{}.Format(m)
}

func nest(open, inner, close string, n int) string {
	return strings.Repeat(open, n) + inner + strings.Repeat(close, n)
}

var validTests = []struct {
	in   string
	want *pb.Expr
}{
	// The examples from the documentation.
	{`age >= 30 and (name prefix "An" or email contains "@example")`, and(
		cmp("age", pb.Op_OP_GE, i64(30)),
		or(cmp("name", pb.Op_OP_PREFIX, str("An")), cmp("email", pb.Op_OP_CONTAINS, str("@example"))),
	)},
	{`id in (1, 2, 3)`, in("id", i64(1), i64(2), i64(3))},
	{`not active`, not(flag("active"))},
	{`status = ACTIVE`, eq("status", enum("ACTIVE"))},
	{`address.city = "Oslo"`, eq("address.city", str("Oslo"))},
	{`score > -1.5e3`, cmp("score", pb.Op_OP_GT, f64(-1500))},
	{`data = b"\x00\xff"`, eq("data", byt("\x00\xff"))},

	// Precedence, grouping and flattening.
	{`a or b and c`, or(flag("a"), and(flag("b"), flag("c")))},
	{`a and b or c`, or(and(flag("a"), flag("b")), flag("c"))},
	{`not a = 1 and b`, and(not(eq("a", i64(1))), flag("b"))},
	{`not a or b`, or(not(flag("a")), flag("b"))},
	{`a and b and c and d`, and(flag("a"), flag("b"), flag("c"), flag("d"))},
	{`a or b or c`, or(flag("a"), flag("b"), flag("c"))},
	{`(a and b) and c`, and(and(flag("a"), flag("b")), flag("c"))},
	{`a or (b or c)`, or(flag("a"), or(flag("b"), flag("c")))},
	{`(a or b) and c`, and(or(flag("a"), flag("b")), flag("c"))},
	{`not (a or b)`, not(or(flag("a"), flag("b")))},
	{`not not a`, not(not(flag("a")))},
	{`((a))`, flag("a")},
	{`(((a = 1)) and ((b)))`, and(eq("a", i64(1)), flag("b"))},
	{`not(a)and(b)or(c)`, or(and(not(flag("a")), flag("b")), flag("c"))},
	{nest("(", "a", ")", 100), flag("a")},
	{nest("not ", "a", "", 50) + " and " + nest("(", "b", ")", 50), and(
		func() *pb.Expr {
			x := flag("a")
			for range 50 {
				x = not(x)
			}
			return x
		}(), flag("b"))},

	// Keywords are case-insensitive.
	{`NOT a AND b OR c`, or(and(not(flag("a")), flag("b")), flag("c"))},
	{`Not a And b oR c`, or(and(not(flag("a")), flag("b")), flag("c"))},
	{`x IN (1)`, in("x", i64(1))},
	{`name PREFIX "x"`, cmp("name", pb.Op_OP_PREFIX, str("x"))},
	{`name Contains 'y'`, cmp("name", pb.Op_OP_CONTAINS, str("y"))},
	{`x = TRUE`, flag("x")},
	{`x = False`, eq("x", bl(false))},

	// Operators.
	{`a = 1`, eq("a", i64(1))},
	{`a == 1`, eq("a", i64(1))},
	{`a != 1`, cmp("a", pb.Op_OP_NE, i64(1))},
	{`a <> 1`, cmp("a", pb.Op_OP_NE, i64(1))},
	{`a < 1`, cmp("a", pb.Op_OP_LT, i64(1))},
	{`a <= 1`, cmp("a", pb.Op_OP_LE, i64(1))},
	{`a > 1`, cmp("a", pb.Op_OP_GT, i64(1))},
	{`a >= 1`, cmp("a", pb.Op_OP_GE, i64(1))},
	{`a>=1 and b<2 and c!=3`, and(cmp("a", pb.Op_OP_GE, i64(1)), cmp("b", pb.Op_OP_LT, i64(2)), cmp("c", pb.Op_OP_NE, i64(3)))},

	// Integers.
	{`n = 0`, eq("n", i64(0))},
	{`n = -0`, eq("n", i64(0))},
	{`n = 007`, eq("n", i64(7))},
	{`n = -42`, eq("n", i64(-42))},
	{`n = 9223372036854775807`, eq("n", i64(math.MaxInt64))},
	{`n = -9223372036854775808`, eq("n", i64(math.MinInt64))},
	{`n = 9223372036854775808`, eq("n", u64(1<<63))},
	{`n = 18446744073709551615`, eq("n", u64(math.MaxUint64))},
	{`n = 0xff`, eq("n", i64(255))},
	{`n = 0XFf`, eq("n", i64(255))},
	{`n = -0x10`, eq("n", i64(-16))},
	{`n = 0xFFFFFFFFFFFFFFFF`, eq("n", u64(math.MaxUint64))},
	{`n = 5u`, eq("n", u64(5))},
	{`n = 0x10U`, eq("n", u64(16))},

	// Floats.
	{`x = 1.5`, eq("x", f64(1.5))},
	{`x = -2.0e-3`, eq("x", f64(-0.002))},
	{`x = 1e9`, eq("x", f64(1e9))},
	{`x = 1E+2`, eq("x", f64(100))},
	{`x = 0.0`, eq("x", f64(0))},
	{`x = -0.0`, eq("x", f64(math.Copysign(0, -1)))},
	{`x = 1e-400`, eq("x", f64(0))},
	{`x = 1.7976931348623157e308`, eq("x", f64(math.MaxFloat64))},
	{`x = inf`, eq("x", f64(math.Inf(1)))},
	{`x = -inf`, eq("x", f64(math.Inf(-1)))},
	{`x = INF`, eq("x", f64(math.Inf(1)))},
	{`x = -Inf`, eq("x", f64(math.Inf(-1)))},
	{`x = NaN`, eq("x", f64(math.NaN()))},

	// Strings and bytes.
	{`s = ""`, eq("s", str(""))},
	{`s = "a\"b\\c\n\t\r\x41\u00e9"`, eq("s", str("a\"b\\c\n\t\rAé"))},
	{`s = 'it\'s'`, eq("s", str("it's"))},
	{`s = "it's"`, eq("s", str("it's"))},
	{`s = 'say "hi"'`, eq("s", str(`say "hi"`))},
	{`s = "\""`, eq("s", str(`"`))},
	{`s = "h\u00E9llo ✓ 😀"`, eq("s", str("héllo ✓ 😀"))},
	{`s = "\xc3\xa9"`, eq("s", str("é"))},
	{`s = "and or not"`, eq("s", str("and or not"))},
	{`b = b''`, eq("b", byt(""))},
	{`b = b'abc'`, eq("b", byt("abc"))},
	{`b = B"\u00e9é"`, eq("b", byt("éé"))},
	{`b = b"\"\'\\\n\t\r"`, eq("b", byt("\"'\\\n\t\r"))},

	// Enums and quoted names.
	{`status = active`, eq("status", enum("active"))},
	{`status = _x1`, eq("status", enum("_x1"))},
	{"status = `true`", eq("status", enum("true"))},
	{"status = `inf`", eq("status", enum("inf"))},
	{"status = `in`", eq("status", enum("in"))},
	{`status = info`, eq("status", enum("info"))},
	{"`in` = 1", eq("in", i64(1))},
	{"a.`not`.b = 1", eq("a.not.b", i64(1))},
	{"`a.b` = 1", eq("a.b", i64(1))},
	{"`odd ``name`` é` = 1", eq("odd `name` é", i64(1))},
	{"`and`", flag("and")},
	{`inf = 1`, eq("inf", i64(1))},
	{`nan`, flag("nan")},
	{`a.b.c`, flag("a.b.c")},
	{`a . b = 1`, eq("a.b", i64(1))},
	{`b = 1`, eq("b", i64(1))},
	{`bb = b"x"`, eq("bb", byt("x"))},
	{`_ = 1`, eq("_", i64(1))},
	{`notable and inside or orange`, or(and(flag("notable"), flag("inside")), flag("orange"))},

	// In lists.
	{`x in (1)`, in("x", i64(1))},
	{`x in ( "a" , 'b', b"c", E, 1.5, true, -1, 18446744073709551615, ` + "`x`" + `)`,
		in("x", str("a"), str("b"), byt("c"), enum("E"), f64(1.5), bl(true), i64(-1), u64(math.MaxUint64), enum("x"))},
	{`not x in (1, 2) and y`, and(not(in("x", i64(1), i64(2))), flag("y"))},

	// Whitespace.
	{"  a=1\n and\tb\r\n  ", and(eq("a", i64(1)), flag("b"))},
	{`a=1 and(b)`, and(eq("a", i64(1)), flag("b"))},
}

func TestParse(t *testing.T) {
	for _, tt := range validTests {
		got, err := textfilter.Parse(tt.in)
		if err != nil {
			t.Errorf("Parse(%q): %v", tt.in, err)
			continue
		}
		if !proto.Equal(got, tt.want) {
			t.Errorf("Parse(%q) =\n%s\nwant\n%s", tt.in, show(got), show(tt.want))
		}
	}
}

func TestRoundTrip(t *testing.T) {
	for _, tt := range validTests {
		e, err := textfilter.Parse(tt.in)
		if err != nil {
			continue // reported by TestParse
		}
		text := textfilter.Format(e)
		back, err := textfilter.Parse(text)
		if err != nil {
			t.Errorf("Parse(Format(Parse(%q))) = Parse(%q): %v", tt.in, text, err)
			continue
		}
		if !proto.Equal(back, e) {
			t.Errorf("round trip of %q through %q:\n%s\nwant\n%s", tt.in, text, show(back), show(e))
		}
		if again := textfilter.Format(back); again != text {
			t.Errorf("Format not stable for %q: %q then %q", tt.in, text, again)
		}
	}
}

func TestFormat(t *testing.T) {
	tests := []struct{ in, want string }{
		{`age >= 30 AND (name prefix "An" or email contains "@example")`, `age >= 30 and (name prefix "An" or email contains "@example")`},
		{`not active`, `not active`},
		{`x == TRUE`, `x`},
		{`x = false`, `x = false`},
		{`a <> 1`, `a != 1`},
		{`a==1`, `a = 1`},
		{`score > -1.5e3`, `score > -1500.0`},
		{`x = 1e100`, `x = 1e+100`},
		{`x = -0.0`, `x = -0.0`},
		{`x = 0.1`, `x = 0.1`},
		{`x = -INF or y = nan`, `x = -inf or y = nan`},
		{`data = b"\x00\xff"`, `data = b"\x00\xff"`},
		{`data = b'A\x7f\u00e9"'`, `data = b"A\x7f\xc3\xa9\""`},
		{`s = 'it\'s'`, `s = "it's"`},
		{`s = "\x01\u0085\u200b\u00e9\n"`, `s = "\x01\u0085\u200bé\n"`},
		{`(a and b) and c`, `(a and b) and c`},
		{`(a or b) or c`, `(a or b) or c`},
		{`a and (b and c)`, `a and (b and c)`},
		{`a or (b and c)`, `a or b and c`},
		{`(a and b) or c`, `a and b or c`},
		{`not (a or b)`, `not (a or b)`},
		{`not (a and b)`, `not (a and b)`},
		{`not (not a)`, `not not a`},
		{`((a))`, `a`},
		{"`in`.x = `true` or `a b`", "`in`.x = `true` or `a b`"},
		{"`a.b` = 1", "a.b = 1"},
		{"`.` = 1", "`.` = 1"},
		{"`a``b` = Nan_x", "`a``b` = Nan_x"},
		{"x = `NaN`", "x = `NaN`"},
		{`x in (1, 0xff, "a")`, `x in (1, 255, "a")`},
		{`n = 0xFFFFFFFFFFFFFFFF`, `n = 18446744073709551615`},
		{`n = 5u`, `n = 5u`},
		{"  a=1\n and\tb  ", `a = 1 and b`},
	}
	for _, tt := range tests {
		e, err := textfilter.Parse(tt.in)
		if err != nil {
			t.Errorf("Parse(%q): %v", tt.in, err)
			continue
		}
		if got := textfilter.Format(e); got != tt.want {
			t.Errorf("Format(Parse(%q)) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// TestFormatBuilt checks expressions built by hand, including ones Parse
// never produces.
func TestFormatBuilt(t *testing.T) {
	roundTrip := []struct {
		e    *pb.Expr
		want string
	}{
		{eq("n", u64(7)), `n = 7u`},
		{eq("n", u64(0)), `n = 0u`},
		{eq("x", f64(3)), `x = 3.0`},
		{eq("x", f64(1e21)), `x = 1e+21`},
		{eq("x", f64(5e-324)), `x = 5e-324`},
		{and(and(flag("a"), flag("b")), or(flag("c"), flag("d"))), `(a and b) and (c or d)`},
		{or(or(flag("a"), flag("b")), and(flag("c"), flag("d"))), `(a or b) or c and d`},
		{not(and(flag("a"), not(or(flag("b"), flag("c"))))), `not (a and not (b or c))`},
		{eq("and.or", enum("not")), "`and`.`or` = `not`"},
		{eq("a..b", i64(1)), "`a..b` = 1"},
		{eq("é", enum("ü")), "`é` = `ü`"},
		{eq("x", str("\x00\u2028\U000E0001")), "x = \"\\x00\\u2028\U000E0001\""},
		{eq("x", str("\uFFFD")), "x = \"\uFFFD\""},
		{eq("x", enum("1st")), "x = `1st`"},
		{eq("x", bl(true)), `x`},
		{cmp("x", pb.Op_OP_NE, bl(true)), `x != true`},
	}
	for _, tt := range roundTrip {
		got := textfilter.Format(tt.e)
		if got != tt.want {
			t.Errorf("Format(%s) = %q, want %q", show(tt.e), got, tt.want)
		}
		back, err := textfilter.Parse(got)
		if err != nil {
			t.Errorf("Parse(%q): %v", got, err)
			continue
		}
		if !proto.Equal(back, tt.e) {
			t.Errorf("Parse(%q) =\n%s\nwant\n%s", got, show(back), show(tt.e))
		}
	}

	// Malformed expressions format to text that Parse rejects.
	malformed := []*pb.Expr{
		nil,
		{},
		and(),
		or(),
		eq("", i64(1)),
		eq("x", nil),
		eq("x", &pb.Value{}),
		eq("x", enum("")),
		eq("x", str("\xff")),
		cmp("x", pb.Op_OP_UNSPECIFIED, i64(1)),
		cmp("x", pb.Op(99), i64(1)),
		in("x"),
		not(nil),
		and(flag("a"), &pb.Expr{}),
	}
	for _, e := range malformed {
		text := textfilter.Format(e)
		if _, err := textfilter.Parse(text); err == nil {
			t.Errorf("Format(%s) = %q, which Parse accepts", show(e), text)
		}
	}

	// A one-element list cannot be written; it formats as its element.
	if got := textfilter.Format(and(eq("a", i64(1)))); got != `a = 1` {
		t.Errorf("Format(and[a = 1]) = %q", got)
	}
}

func TestErrors(t *testing.T) {
	tests := []struct {
		in  string
		col int
		msg string
	}{
		{``, 1, "empty expression"},
		{"  \t ", 1, "empty expression"},
		{`age >= )`, 8, `expected value after ">=", found ")"`},
		{`age >= 30 and (name prefix "An" or email contains )`, 51, `expected value after "contains", found ")"`},
		{`a = `, 5, `expected value after "=", found end of input`},
		{`a == == 1`, 6, `expected value after "==", found "=="`},
		{`a = and`, 5, `expected value after "=", found "and"`},
		{`a prefix`, 9, `expected value after "prefix", found end of input`},

		// Strings.
		{`name = "abc`, 8, "unterminated string"},
		{`name = 'abc"`, 8, "unterminated string"},
		{"name = \"ab\nc\"", 8, "unterminated string"},
		{`name = "abc\"`, 8, "unterminated string"},
		{`x = b"ab`, 5, "unterminated bytes literal"},
		{`s = "a\qb"`, 7, `invalid escape "\q"`},
		{`s = "a\é"`, 7, `invalid escape "\é"`},
		{`s = "\x4"`, 6, `\x must be followed by two hex digits`},
		{`s = "\xg0"`, 6, `\x must be followed by two hex digits`},
		{`s = "\u12"`, 6, `\u must be followed by four hex digits`},
		{`s = "\ud800"`, 6, `surrogate`},
		{`s = "\xff"`, 5, "not valid UTF-8"},
		{`s = "\xc3"`, 5, "not valid UTF-8"},

		// Numbers.
		{`n = 18446744073709551616`, 5, "integer out of range"},
		{`n = -9223372036854775809`, 5, "integer out of range"},
		{`n = 0x10000000000000000`, 5, "integer out of range"},
		{`n = -1u`, 5, "unsigned integer cannot be negative"},
		{`x = 1e400`, 5, "float out of range"},
		{`x = -1e400`, 5, "float out of range"},
		{`x = 1.`, 5, `invalid number "1."`},
		{`x = 12abc`, 5, `invalid number "12abc"`},
		{`x = 0x`, 5, `invalid number "0x"`},
		{`x = 0xg`, 5, `invalid number "0xg"`},
		{`x = 1.2.3`, 5, `invalid number "1.2.3"`},
		{`x = 1e`, 5, `invalid number "1e"`},
		{`x = 1.5u`, 5, `invalid number "1.5u"`},
		{`a=1and b`, 3, `invalid number "1and"`},
		{`x = - 1`, 5, `unexpected character "-"`},
		{`x = -infinity`, 5, `unexpected character "-"`},
		{`x = .5`, 5, `expected value after "=", found "."`},

		// Structure.
		{`a = 1 b`, 7, `expected "and", "or" or end of input, found "b"`},
		{`a = 1 = 2`, 7, `expected "and", "or" or end of input, found "="`},
		{`a b`, 3, `found "b"`},
		{`a = 1)`, 6, `unmatched ")"`},
		{`(a = 1`, 7, `expected ")" to close "(" at column 1, found end of input`},
		{`x and (a = 1 b)`, 14, `expected ")" to close "(" at column 7, found "b"`},
		{`()`, 2, `expected field name, "not" or "(", found ")"`},
		{`not`, 4, `expected field name, "not" or "(", found end of input`},
		{`a and`, 6, `expected field name, "not" or "(", found end of input`},
		{`a = 1 and or b`, 11, `found "or"`},
		{`and = 1`, 1, "expected field name, \"not\" or \"(\", found \"and\"; write `and` to use a keyword as a name"},
		{`x.IN = 1`, 3, "found \"IN\"; write `IN` to use"},
		{`true`, 1, `found "true"`},
		{`"a" = 1`, 1, `expected field name, "not" or "(", found string "a"`},
		{`5 = 1`, 1, `found "5"`},
		{`a. = 1`, 4, `expected field name after ".", found "="`},
		{`a.`, 3, `expected field name after ".", found end of input`},
		{`a = b.c`, 6, `found "."`},
		{`a ! 1`, 3, `unexpected character '!'`},
		{`a = 1 && b`, 7, `unexpected character '&'`},
		{`é = 1`, 1, `unexpected character 'é'`},
		{`a = "éé" $`, 10, `unexpected character '$'`},
		{"a = 1 \xff", 7, "invalid UTF-8 in input"},
		{"a = \"\xff\"", 6, "invalid UTF-8 in input"},
		{"`x", 1, "unterminated quoted name"},
		{"`x\n` = 1", 1, "unterminated quoted name"},
		{"`` = 1", 1, "empty quoted name"},
		{`a = "` + strings.Repeat("x", 50) + `" b`, 58, `found "b"`},
		{`"` + strings.Repeat("x", 50) + `"`, 1, `found string "` + strings.Repeat("x", 31) + "…"},

		// In lists.
		{`id in ()`, 8, `empty list after "in"`},
		{`id IN ( )`, 9, `empty list after "IN"`},
		{`id in (1,)`, 10, `expected value after ",", found ")"`},
		{`id in (,1)`, 8, `expected value after "(", found ","`},
		{`id in (1 2)`, 10, `expected "," or ")" in list, found "2"`},
		{`id in (1, 2`, 12, `expected "," or ")" in list, found end of input`},
		{`id in 1`, 7, `expected "(" after "in", found "1"`},
		{`id in`, 6, `expected "(" after "in", found end of input`},

		// Nesting.
		{nest("(", "a", ")", 101), 101, "nested too deeply (limit 100)"},
		{nest("(", "", "", 100000), 101, "nested too deeply"},
		{nest("not ", "a", "", 101), 401, "nested too deeply"},
		{nest("not (", "a", ")", 51), 251, "nested too deeply"},

		// Columns count runes within the line.
		{"a = 1 and\nb = )", 5, `expected value after "=", found ")"`},
		{"x = \"日本\" and y = 1 2", 20, `found "2"`},
	}
	for _, tt := range tests {
		e, err := textfilter.Parse(tt.in)
		if err == nil {
			t.Errorf("Parse(%q) = %s, want error", tt.in, show(e))
			continue
		}
		if e != nil {
			t.Errorf("Parse(%q) returned an expression with its error", tt.in)
		}
		var se *textfilter.SyntaxError
		if !errors.As(err, &se) {
			t.Errorf("Parse(%q) error %T is not *SyntaxError", tt.in, err)
			continue
		}
		if se.Column != tt.col || !strings.Contains(se.Msg, tt.msg) {
			t.Errorf("Parse(%q) = column %d %q, want column %d containing %q", truncate(tt.in), se.Column, se.Msg, tt.col, tt.msg)
		}
		if se.Input != tt.in {
			t.Errorf("Parse(%q).Input = %q", truncate(tt.in), se.Input)
		}
		if se.Offset < 0 || se.Offset > len(tt.in) {
			t.Errorf("Parse(%q).Offset = %d out of range", truncate(tt.in), se.Offset)
		}
	}
}

func truncate(s string) string {
	if len(s) > 60 {
		return s[:60] + "..."
	}
	return s
}

func TestSyntaxErrorText(t *testing.T) {
	_, err := textfilter.Parse(`age >= )`)
	if got, want := err.Error(), `column 8: expected value after ">=", found ")"`; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
	se := syntaxErr(t, err)
	if se.Offset != 7 {
		t.Errorf("Offset = %d, want 7", se.Offset)
	}
	want := "age >= )\n" +
		"       ^\n" +
		`expected value after ">=", found ")"`
	if got := se.Pretty(); got != want {
		t.Errorf("Pretty() =\n%s\nwant\n%s", got, want)
	}

	// Tabs are copied into the caret line; columns count runes.
	_, err = textfilter.Parse("x = \"é\"\t)")
	want = "x = \"é\"\t)\n" +
		"       \t^\n" +
		`unmatched ")"`
	if got := syntaxErr(t, err).Pretty(); got != want {
		t.Errorf("Pretty() =\n%q\nwant\n%q", got, want)
	}

	// Multi-line input: the line number appears in Error, and Pretty shows
	// only the line with the error.
	_, err = textfilter.Parse("a = 1 and\r\nb = )\nor c")
	if got, want := err.Error(), `line 2, column 5: expected value after "=", found ")"`; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
	want = "b = )\n" +
		"    ^\n" +
		`expected value after "=", found ")"`
	if got := syntaxErr(t, err).Pretty(); got != want {
		t.Errorf("Pretty() =\n%q\nwant\n%q", got, want)
	}

	// Error at the end of the input.
	_, err = textfilter.Parse(`(a`)
	want = "(a\n" +
		"  ^\n" +
		`expected ")" to close "(" at column 1, found end of input`
	if got := syntaxErr(t, err).Pretty(); got != want {
		t.Errorf("Pretty() =\n%q\nwant\n%q", got, want)
	}

	// Invalid UTF-8 and control characters are not echoed raw.
	_, err = textfilter.Parse("a = \x01 \xff")
	pretty := syntaxErr(t, err).Pretty()
	if !utf8.ValidString(pretty) || strings.ContainsRune(pretty, 1) {
		t.Errorf("Pretty() = %q echoes bad bytes", pretty)
	}

	// A hand-made SyntaxError with odd fields does not panic.
	for _, se := range []*textfilter.SyntaxError{
		{},
		{Input: "abc", Offset: 99, Column: 99, Msg: "m"},
		{Input: "abc", Offset: -5, Column: -5, Msg: "m"},
		{Input: "a\nb", Offset: 2, Column: 1, Msg: "m"},
	} {
		_ = se.Error()
		_ = se.Pretty()
	}
}

// TestParseNoAliasing checks that a parsed expression does not share memory
// with later parses (the bytes value in particular).
func TestParseNoAliasing(t *testing.T) {
	a, err := textfilter.Parse(`x = b"abc"`)
	if err != nil {
		t.Fatal(err)
	}
	a.GetCmp().GetValue().GetBytes()[0] = 'z'
	b, err := textfilter.Parse(`x = b"abc"`)
	if err != nil {
		t.Fatal(err)
	}
	if got := string(b.GetCmp().GetValue().GetBytes()); got != "abc" {
		t.Errorf("second parse saw %q", got)
	}
}

func FuzzParse(f *testing.F) {
	for _, tt := range validTests {
		f.Add(tt.in)
	}
	f.Fuzz(func(t *testing.T, s string) {
		e, err := textfilter.Parse(s)
		if err != nil {
			if e != nil {
				t.Fatalf("Parse(%q) returned both an expression and an error", s)
			}
			var se *textfilter.SyntaxError
			if !errors.As(err, &se) {
				t.Fatalf("Parse(%q) error %T is not *SyntaxError", s, err)
			}
			if se.Input != s || se.Offset < 0 || se.Offset > len(s) || se.Column < 1 || se.Msg == "" {
				t.Fatalf("Parse(%q): bad error %#v", s, se)
			}
			_ = se.Error()
			if p := se.Pretty(); !utf8.ValidString(p) {
				t.Fatalf("Parse(%q): Pretty() is not valid UTF-8: %q", s, p)
			}
			return
		}
		if e == nil {
			t.Fatalf("Parse(%q) returned nil, nil", s)
		}
		text := textfilter.Format(e)
		back, err := textfilter.Parse(text)
		if err != nil {
			t.Fatalf("Parse(%q) ok, but Parse(Format) = Parse(%q): %v", s, text, err)
		}
		if !proto.Equal(back, e) {
			t.Fatalf("Parse(%q) round trip through %q:\n%s\nwant\n%s", s, text, show(back), show(e))
		}
		if again := textfilter.Format(back); again != text {
			t.Fatalf("Format not stable for %q: %q then %q", s, text, again)
		}
		for _, field := range fieldsOf(e, nil) {
			if col := textfilter.FieldColumn(s, field); col < 1 {
				t.Fatalf("FieldColumn(%q, %q) = %d for a field the filter compares", s, field, col)
			}
		}
	})
}

// fieldsOf appends the field paths compared in e.
func fieldsOf(e *pb.Expr, out []string) []string {
	switch x := e.GetExpr().(type) {
	case *pb.Expr_Cmp:
		out = append(out, x.Cmp.GetField())
	case *pb.Expr_And:
		for _, y := range x.And.GetExprs() {
			out = fieldsOf(y, out)
		}
	case *pb.Expr_Or:
		for _, y := range x.Or.GetExprs() {
			out = fieldsOf(y, out)
		}
	case *pb.Expr_Not:
		out = fieldsOf(x.Not, out)
	}
	return out
}

// syntaxErr returns err as a *textfilter.SyntaxError or fails the test.
func syntaxErr(t *testing.T, err error) *textfilter.SyntaxError {
	t.Helper()
	var se *textfilter.SyntaxError
	if !errors.As(err, &se) {
		t.Fatalf("error %v (%T) is not a *textfilter.SyntaxError", err, err)
	}
	return se
}

func TestFieldColumn(t *testing.T) {
	cases := []struct {
		src, field string
		want       int
	}{
		{`agee > 3`, "agee", 1},
		{`id >= 1 and (agee > 3 or agee < 1)`, "agee", 14},
		{`a.b.c = 1`, "a.b.c", 1},
		{`x = 1 and ` + "`a b`" + ` = 2`, "a b", 11},
		{"id = 1 and\n  name = 2", "name", 3},
		{`name0 = "éé" and name = 1`, "name", 18},
		{`id = 1`, "name", 0},
		{`id >= `, "id", 0},
		{``, "id", 0},
		{"name = \"\xff\"", "name", 0},
	}
	for _, c := range cases {
		if got := textfilter.FieldColumn(c.src, c.field); got != c.want {
			t.Errorf("FieldColumn(%q, %q) = %d, want %d", c.src, c.field, got, c.want)
		}
	}
}
