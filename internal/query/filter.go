package query

import (
	"bytes"
	"slices"
	"strconv"
	"strings"

	"google.golang.org/protobuf/reflect/protoreflect"

	pb "github.com/protobase/protobase/gen/protobase/v1"
	"github.com/protobase/protobase/internal/record"
)

// Filter is a compiled predicate over raw record bytes. It is immutable and
// safe for concurrent use.
type Filter struct {
	root *node
}

// Match evaluates the predicate on the wire bytes of one record. A field
// that is absent reads as its default value; a comparison on a path through
// a repeated field holds when it holds for any element. Comparisons on
// singular paths do not allocate. An error means the record bytes are
// malformed.
func (f *Filter) Match(rec []byte) (bool, error) {
	if f == nil || f.root == nil {
		return true, nil
	}
	return f.root.eval(rec)
}

// Fields returns the field paths the predicate reads, as the query spelt
// them, each once.
func (f *Filter) Fields() []string {
	if f == nil || f.root == nil {
		return nil
	}
	var out []string
	var walk func(n *node)
	walk = func(n *node) {
		if n.c != nil && !slices.Contains(out, n.c.field) {
			out = append(out, n.c.field)
		}
		for _, k := range n.kids {
			walk(k)
		}
	}
	walk(f.root)
	return out
}

func (n *node) eval(rec []byte) (bool, error) {
	switch n.op {
	case nCmp:
		return n.c.match(rec)
	case nAnd:
		for _, k := range n.kids {
			if ok, err := k.eval(rec); err != nil || !ok {
				return false, err
			}
		}
		return true, nil
	case nOr:
		for _, k := range n.kids {
			if ok, err := k.eval(rec); err != nil || ok {
				return ok, err
			}
		}
		return false, nil
	case nNot:
		ok, err := n.kids[0].eval(rec)
		if err != nil {
			return false, err
		}
		return !ok, nil
	}
	return false, nil
}

func (c *cmpNode) match(rec []byte) (bool, error) {
	if !c.repeated {
		v, _, err := c.path.Get(rec)
		if err != nil {
			return false, err
		}
		return c.test(&v), nil
	}
	hit := false
	err := c.path.Each(rec, func(v record.Scalar) bool {
		if c.test(&v) {
			hit = true
			return false
		}
		return true
	})
	if hit {
		return true, nil
	}
	return false, err
}

// test compares one field value with the operand(s).
func (c *cmpNode) test(v *record.Scalar) bool {
	switch c.cls {
	case clsInt:
		if c.op == pb.Op_OP_IN {
			_, ok := slices.BinarySearch(c.ints, v.Int)
			return ok
		}
		return order(c.op, compareOrdered(v.Int, c.v.i))
	case clsUint:
		if c.op == pb.Op_OP_IN {
			_, ok := slices.BinarySearch(c.uints, v.Uint)
			return ok
		}
		return order(c.op, compareOrdered(v.Uint, c.v.u))
	case clsFloat32, clsFloat64:
		x := v.Float
		switch c.op {
		case pb.Op_OP_EQ:
			return x == c.v.f
		case pb.Op_OP_NE:
			return x != c.v.f
		case pb.Op_OP_LT:
			return x < c.v.f
		case pb.Op_OP_LE:
			return x <= c.v.f
		case pb.Op_OP_GT:
			return x > c.v.f
		case pb.Op_OP_GE:
			return x >= c.v.f
		case pb.Op_OP_IN:
			if x != x {
				return false
			}
			_, ok := slices.BinarySearch(c.floats, x)
			return ok
		}
	case clsBool:
		if c.op == pb.Op_OP_IN {
			if v.Bool {
				return c.bools&2 != 0
			}
			return c.bools&1 != 0
		}
		return order(c.op, compareBool(v.Bool, c.v.b))
	case clsBytes:
		switch c.op {
		case pb.Op_OP_IN:
			_, ok := c.strs[string(v.Bytes)]
			return ok
		case pb.Op_OP_PREFIX:
			return bytes.HasPrefix(v.Bytes, c.v.s)
		case pb.Op_OP_CONTAINS:
			return bytes.Contains(v.Bytes, c.v.s)
		}
		return order(c.op, bytes.Compare(v.Bytes, c.v.s))
	}
	return false
}

func compareOrdered[T int64 | uint64](a, b T) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func compareBool(a, b bool) int {
	switch {
	case a == b:
		return 0
	case a:
		return 1
	}
	return -1
}

// order applies an ordering operator to a three-way comparison result.
func order(op pb.Op, r int) bool {
	switch op {
	case pb.Op_OP_EQ:
		return r == 0
	case pb.Op_OP_NE:
		return r != 0
	case pb.Op_OP_LT:
		return r < 0
	case pb.Op_OP_LE:
		return r <= 0
	case pb.Op_OP_GT:
		return r > 0
	case pb.Op_OP_GE:
		return r >= 0
	}
	return false
}

// String renders the predicate, e.g. `age >= 30 AND name PREFIX "An"`.
// Long IN lists are abbreviated.
func (f *Filter) String() string {
	if f == nil || f.root == nil {
		return ""
	}
	var b strings.Builder
	f.root.format(&b, true)
	return b.String()
}

// format writes n. Compound operands of AND, OR and NOT are parenthesized,
// so the text shows the tree as given.
func (n *node) format(b *strings.Builder, top bool) {
	paren := !top && (n.op == nAnd || n.op == nOr) && len(n.kids) > 0
	if paren {
		b.WriteByte('(')
	}
	switch n.op {
	case nCmp:
		n.c.format(b)
	case nAnd, nOr:
		sep, empty := " AND ", "true"
		if n.op == nOr {
			sep, empty = " OR ", "false"
		}
		if len(n.kids) == 0 {
			b.WriteString(empty)
		}
		for i, k := range n.kids {
			if i > 0 {
				b.WriteString(sep)
			}
			k.format(b, false)
		}
	case nNot:
		b.WriteString("NOT ")
		n.kids[0].format(b, false)
	}
	if paren {
		b.WriteByte(')')
	}
}

// maxInShown is how many IN operands String shows.
const maxInShown = 16

func (c *cmpNode) format(b *strings.Builder) {
	b.WriteString(c.field)
	b.WriteByte(' ')
	b.WriteString(opName(c.op))
	b.WriteByte(' ')
	if c.op != pb.Op_OP_IN {
		c.formatOperand(b, c.v)
		return
	}
	b.WriteByte('(')
	for i, o := range c.in {
		if i > 0 {
			b.WriteString(", ")
		}
		if i == maxInShown {
			b.WriteString("... " + strconv.Itoa(len(c.in)-i) + " more")
			break
		}
		c.formatOperand(b, o)
	}
	b.WriteByte(')')
}

func (c *cmpNode) formatOperand(b *strings.Builder, o operand) {
	switch c.cls {
	case clsInt:
		if c.kind == protoreflect.EnumKind {
			if int64(int32(o.i)) == o.i {
				if ev := c.fd.Enum().Values().ByNumber(protoreflect.EnumNumber(o.i)); ev != nil {
					b.WriteString(string(ev.Name()))
					return
				}
			}
		}
		b.WriteString(strconv.FormatInt(o.i, 10))
	case clsUint:
		b.WriteString(strconv.FormatUint(o.u, 10))
	case clsFloat32:
		if float64(float32(o.f)) == o.f {
			b.WriteString(strconv.FormatFloat(o.f, 'g', -1, 32))
		} else {
			b.WriteString(strconv.FormatFloat(o.f, 'g', -1, 64))
		}
	case clsFloat64:
		b.WriteString(strconv.FormatFloat(o.f, 'g', -1, 64))
	case clsBool:
		b.WriteString(strconv.FormatBool(o.b))
	case clsBytes:
		if c.kind == protoreflect.BytesKind {
			b.WriteByte('b')
		}
		b.WriteString(strconv.Quote(string(o.s)))
	}
}
