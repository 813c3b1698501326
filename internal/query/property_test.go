package query

import (
	"bytes"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/dynamicpb"

	pb "github.com/protobase/protobase/gen/protobase/v1"
	"github.com/protobase/protobase/internal/orderedcode"
)

// Value pools: small, so that records share values and queries hit them.
var (
	strPool   = []any{"", "a", "ab", "a\x00b", "b", "é"}
	namePool  = []any{"", "A", "An", "Ann", "Anna", "Bob", "an", "A\x00"}
	cityPool  = []any{"", "Paris", "Par", "Rome"}
	zipPool   = []any{"", "1", "12"}
	mailPool  = []any{"", "a@b", "c@d", "a@"}
	int64Pool = []any{int64(math.MinInt64), int64(-1), int64(0), int64(1), int64(2), int64(7), int64(math.MaxInt64)}
	int32Pool = []any{int64(-5), int64(0), int64(1), int64(30), int64(31), int64(math.MaxInt32), int64(math.MinInt32)}
	enumPool  = []any{int64(0), int64(1), int64(2), int64(-3), int64(7)}
	u32Pool   = []any{uint64(0), uint64(1), uint64(30), uint64(math.MaxUint32)}
	u64Pool   = []any{uint64(0), uint64(1), uint64(1 << 63), uint64(math.MaxUint64)}
	f64Pool   = []any{math.NaN(), negZero, 0.0, 1.5, -1.5, math.Inf(1), math.Inf(-1), 30.0}
	f32Pool   = []any{float64(float32(0.1)), negZero, math.NaN(), 1.5, math.Inf(1), math.Inf(-1), math.MaxFloat32, -math.MaxFloat32, 0.0}
	boolPool  = []any{false, true}
	blobPool  = []any{[]byte(nil), []byte{0}, []byte{0, 0}, []byte{0xff}, []byte("ab"), []byte{0, 0xff}}
)

// queryExtra are operands queries use beyond the record pools: out of the
// field's range, rounding, prefixes.
var queryExtra = map[string][]any{
	"age":   {int64(1 << 40), int64(-1 << 40), int64(29)},
	"level": {uint64(1 << 40), uint64(29)},
	"ratio": {1e300, -1e300, 0.1, 0.25},
	"score": {1e300, 1.4},
	"id":    {int64(3)},
	"name":  {"Am", "Ao", "A\x00\x00"},
}

type genField struct {
	path     string
	repeated bool
	pool     []any
}

var genFields = []genField{
	{"tenant", false, strPool},
	{"id", false, int64Pool},
	{"name", false, namePool},
	{"age", false, int32Pool},
	{"score", false, f64Pool},
	{"active", false, boolPool},
	{"status", false, enumPool},
	{"level", false, u32Pool},
	{"blob", false, blobPool},
	{"ratio", false, f32Pool},
	{"address.city", false, cityPool},
	{"address.zip", false, zipPool},
	{"email", false, mailPool},
	{"delta", false, int64Pool},
	{"big", false, u64Pool},
	{"tags", true, namePool},
	{"items.sku", true, namePool},
	{"items.qty", true, int32Pool},
	{"nums", true, int64Pool},
	{"address.tags", true, cityPool},
	{"counts.key", true, namePool},
	{"counts.value", true, int64Pool},
}

func pick[T any](r *rand.Rand, s []T) T { return s[r.IntN(len(s))] }

// toValue converts a pool value to a protoreflect value of field fd.
func toValue(fd protoreflect.FieldDescriptor, v any) protoreflect.Value {
	switch fd.Kind() {
	case protoreflect.EnumKind:
		return protoreflect.ValueOfEnum(protoreflect.EnumNumber(v.(int64)))
	case protoreflect.Int32Kind:
		return protoreflect.ValueOfInt32(int32(v.(int64)))
	case protoreflect.Int64Kind, protoreflect.Sint64Kind:
		return protoreflect.ValueOfInt64(v.(int64))
	case protoreflect.Uint32Kind:
		return protoreflect.ValueOfUint32(uint32(v.(uint64)))
	case protoreflect.Uint64Kind:
		return protoreflect.ValueOfUint64(v.(uint64))
	case protoreflect.FloatKind:
		return protoreflect.ValueOfFloat32(float32(v.(float64)))
	case protoreflect.DoubleKind:
		return protoreflect.ValueOfFloat64(v.(float64))
	case protoreflect.BoolKind:
		return protoreflect.ValueOfBool(v.(bool))
	case protoreflect.StringKind:
		return protoreflect.ValueOfString(v.(string))
	case protoreflect.BytesKind:
		return protoreflect.ValueOfBytes(v.([]byte))
	}
	panic(fd.Kind().String())
}

func field(md protoreflect.MessageDescriptor, name string) protoreflect.FieldDescriptor {
	return md.Fields().ByName(protoreflect.Name(name))
}

// randomUser builds a random shop.User.
func randomUser(r *rand.Rand, t *Target) *dynamicpb.Message {
	m := newUser(t)
	md := m.Descriptor()
	for _, g := range genFields {
		if g.repeated || r.IntN(10) < 3 {
			continue
		}
		parts := strings.Split(g.path, ".")
		cur := protoreflect.Message(m)
		for _, p := range parts[:len(parts)-1] {
			cur = cur.Mutable(field(cur.Descriptor(), p)).Message()
		}
		fd := field(cur.Descriptor(), parts[len(parts)-1])
		cur.Set(fd, toValue(fd, pick(r, g.pool)))
	}
	for range r.IntN(4) {
		l := m.Mutable(field(md, "tags")).List()
		l.Append(protoreflect.ValueOfString(pick(r, namePool).(string)))
	}
	for range r.IntN(4) {
		l := m.Mutable(field(md, "nums")).List()
		l.Append(protoreflect.ValueOfInt64(pick(r, int64Pool).(int64)))
	}
	for range r.IntN(3) {
		l := m.Mutable(field(md, "items")).List()
		it := l.NewElement()
		if r.IntN(2) == 0 {
			it.Message().Set(field(it.Message().Descriptor(), "sku"), protoreflect.ValueOfString(pick(r, namePool).(string)))
		}
		if r.IntN(2) == 0 {
			it.Message().Set(field(it.Message().Descriptor(), "qty"), protoreflect.ValueOfInt32(int32(pick(r, int32Pool).(int64))))
		}
		l.Append(it)
	}
	if r.IntN(2) == 0 {
		a := m.Mutable(field(md, "address")).Message()
		for range r.IntN(3) {
			l := a.Mutable(field(a.Descriptor(), "tags")).List()
			l.Append(protoreflect.ValueOfString(pick(r, cityPool).(string)))
		}
	}
	for range r.IntN(3) {
		mp := m.Mutable(field(md, "counts")).Map()
		mp.Set(protoreflect.ValueOfString(pick(r, namePool).(string)).MapKey(), protoreflect.ValueOfInt64(pick(r, int64Pool).(int64)))
	}
	return m
}

// leafField resolves a dotted path to its last field descriptor.
func leafField(md protoreflect.MessageDescriptor, path string) protoreflect.FieldDescriptor {
	var fd protoreflect.FieldDescriptor
	for _, p := range strings.Split(path, ".") {
		fd = field(md, p)
		md = fd.Message()
	}
	return fd
}

// randomIntOperand types a signed (or enum) operand as an int, an enum
// name or a uint.
func randomIntOperand(r *rand.Rand, fd protoreflect.FieldDescriptor, x int64) *pb.Value {
	if fd.Kind() == protoreflect.EnumKind && r.IntN(3) == 0 {
		if ev := fd.Enum().Values().ByNumber(protoreflect.EnumNumber(x)); ev != nil {
			return venum(string(ev.Name()))
		}
	}
	if x >= 0 && r.IntN(5) == 0 {
		return vu(uint64(x))
	}
	return vi(x)
}

// randomOperand draws an operand for field g, typed in one of the ways the
// field accepts.
func randomOperand(r *rand.Rand, fd protoreflect.FieldDescriptor, g genField, prefixOp bool) *pb.Value {
	pool := g.pool
	if extra := queryExtra[g.path]; extra != nil && r.IntN(2) == 0 {
		pool = extra
	}
	v := pick(r, pool)
	switch x := v.(type) {
	case int64:
		return randomIntOperand(r, fd, x)
	case uint64:
		if x <= math.MaxInt64 && r.IntN(4) == 0 {
			return vi(int64(x))
		}
		return vu(x)
	case float64:
		if x == math.Trunc(x) && math.Abs(x) < 1<<50 && r.IntN(4) == 0 {
			return vi(int64(x))
		}
		return vd(x)
	case bool:
		return vb(x)
	case string:
		if prefixOp && len(x) > 0 && r.IntN(2) == 0 {
			x = x[:r.IntN(len(x)+1)]
		}
		return vs(x)
	case []byte:
		if prefixOp && len(x) > 0 && r.IntN(2) == 0 {
			x = x[:r.IntN(len(x)+1)]
		}
		if r.IntN(4) == 0 {
			return vs(string(x))
		}
		return vby(x)
	}
	panic(fmt.Sprintf("%T", v))
}

var (
	scalarOps = []pb.Op{pb.Op_OP_EQ, pb.Op_OP_NE, pb.Op_OP_LT, pb.Op_OP_LE, pb.Op_OP_GT, pb.Op_OP_GE, pb.Op_OP_IN}
	bytesOps  = append(scalarOps[:len(scalarOps):len(scalarOps)], pb.Op_OP_PREFIX, pb.Op_OP_CONTAINS)
	rangeOps  = []pb.Op{pb.Op_OP_EQ, pb.Op_OP_EQ, pb.Op_OP_IN, pb.Op_OP_LT, pb.Op_OP_LE, pb.Op_OP_GT, pb.Op_OP_GE, pb.Op_OP_PREFIX}
)

func randomCmp(r *rand.Rand, md protoreflect.MessageDescriptor, keyish bool) *pb.Expr {
	g := pick(r, genFields)
	if keyish {
		for g.repeated {
			g = pick(r, genFields)
		}
		return fieldCmp(r, md, g, rangeOps)
	}
	fd := leafField(md, g.path)
	if fd.Kind() == protoreflect.StringKind || fd.Kind() == protoreflect.BytesKind {
		return fieldCmp(r, md, g, bytesOps)
	}
	return fieldCmp(r, md, g, scalarOps)
}

func genByPath(path string) genField {
	for _, g := range genFields {
		if g.path == path {
			return g
		}
	}
	panic(path)
}

// fieldCmp compares field g with one of ops (PREFIX and CONTAINS become
// EQ on fields other than strings and bytes).
func fieldCmp(r *rand.Rand, md protoreflect.MessageDescriptor, g genField, ops []pb.Op) *pb.Expr {
	fd := leafField(md, g.path)
	isBytes := fd.Kind() == protoreflect.StringKind || fd.Kind() == protoreflect.BytesKind
	op := pick(r, ops)
	if (op == pb.Op_OP_PREFIX || op == pb.Op_OP_CONTAINS) && !isBytes {
		op = pb.Op_OP_EQ
	}
	c := &pb.Comparison{Field: g.path, Op: op}
	if op == pb.Op_OP_IN {
		for range 1 + r.IntN(4) {
			c.Values = append(c.Values, randomOperand(r, fd, g, false))
		}
	} else {
		c.Value = randomOperand(r, fd, g, op == pb.Op_OP_PREFIX)
	}
	return &pb.Expr{Expr: &pb.Expr_Cmp{Cmp: c}}
}

func randomExpr(r *rand.Rand, md protoreflect.MessageDescriptor, depth int) *pb.Expr {
	if depth >= 3 || r.IntN(10) < 5 {
		return randomCmp(r, md, r.IntN(2) == 0)
	}
	switch n := r.IntN(10); {
	case n < 2:
		return not(randomExpr(r, md, depth+1))
	case n < 6:
		var es []*pb.Expr
		for range r.IntN(4) {
			es = append(es, randomExpr(r, md, depth+1))
		}
		return and(es...)
	default:
		var es []*pb.Expr
		for range r.IntN(4) {
			es = append(es, randomExpr(r, md, depth+1))
		}
		return or(es...)
	}
}

// randomQuery draws a query: often a conjunction of key-friendly
// comparisons (the case planning serves), sometimes a top-level OR of
// them, sometimes any expression.
func randomQuery(r *rand.Rand, t *Target) *pb.Query {
	md := t.Type.Desc
	q := &pb.Query{}
	switch n := r.IntN(20); {
	case n < 5:
		q.Where = randomCmp(r, md, r.IntN(6) > 0)
	case n < 9:
		// Several comparisons of one field: the constraint algebra.
		g := pick(r, genFields)
		for g.repeated {
			g = pick(r, genFields)
		}
		var es []*pb.Expr
		for range 2 + r.IntN(2) {
			es = append(es, fieldCmp(r, md, g, rangeOps))
		}
		switch r.IntN(4) {
		case 0, 1:
			q.Where = and(es...)
		case 2:
			q.Where = or(es...)
		default:
			q.Where = or(append([]*pb.Expr{and(es[0], es[1])}, es[2:]...)...)
		}
	case n < 12:
		// Composite keys: equalities on the first field, anything on the
		// second.
		pair := pick(r, [][2]string{{"tenant", "id"}, {"age", "name"}, {"status", "level"}, {"active", "blob"}})
		g1, g2 := genByPath(pair[0]), genByPath(pair[1])
		es := []*pb.Expr{fieldCmp(r, md, g1, []pb.Op{pb.Op_OP_EQ, pb.Op_OP_EQ, pb.Op_OP_IN}), fieldCmp(r, md, g2, rangeOps)}
		if r.IntN(3) == 0 {
			es = append(es, fieldCmp(r, md, g1, rangeOps))
		}
		if r.IntN(3) == 0 {
			es = append(es, randomCmp(r, md, false))
		}
		r.Shuffle(len(es), func(i, j int) { es[i], es[j] = es[j], es[i] })
		q.Where = and(es...)
	case n < 15:
		var es []*pb.Expr
		for range 1 + r.IntN(3) {
			es = append(es, randomCmp(r, md, r.IntN(5) > 0))
		}
		q.Where = and(es...)
	case n < 17:
		var bs []*pb.Expr
		for range 1 + r.IntN(3) {
			var es []*pb.Expr
			for range 1 + r.IntN(2) {
				es = append(es, randomCmp(r, md, true))
			}
			bs = append(bs, and(es...))
		}
		q.Where = or(bs...)
	case n < 19:
		q.Where = randomExpr(r, md, 0)
	}
	switch n := r.IntN(10); {
	case n < 2:
		q.Order = &pb.Order{Descending: r.IntN(2) == 0}
	case n < 4:
		q.Order = &pb.Order{Index: pick(r, t.Indexes).Name, Descending: r.IntN(2) == 0}
	}
	return q
}

// Reference semantics, over decoded messages.

func refEval(e *pb.Expr, m protoreflect.Message) bool {
	switch x := e.GetExpr().(type) {
	case *pb.Expr_Cmp:
		return refCmp(x.Cmp, m)
	case *pb.Expr_And:
		for _, k := range x.And.GetExprs() {
			if !refEval(k, m) {
				return false
			}
		}
		return true
	case *pb.Expr_Or:
		for _, k := range x.Or.GetExprs() {
			if refEval(k, m) {
				return true
			}
		}
		return false
	case *pb.Expr_Not:
		return !refEval(x.Not, m)
	}
	panic("bad expr")
}

// refValues lists the values a path denotes: every element of repeated
// fields along it, the default of absent singular fields.
func refValues(m protoreflect.Message, parts []string) []protoreflect.Value {
	fd := field(m.Descriptor(), parts[0])
	switch {
	case fd.IsMap():
		var out []protoreflect.Value
		m.Get(fd).Map().Range(func(k protoreflect.MapKey, v protoreflect.Value) bool {
			if parts[1] == "key" {
				out = append(out, k.Value())
			} else {
				out = append(out, v)
			}
			return true
		})
		return out
	case len(parts) == 1 && fd.IsList():
		l := m.Get(fd).List()
		out := make([]protoreflect.Value, l.Len())
		for i := range out {
			out[i] = l.Get(i)
		}
		return out
	case len(parts) == 1:
		return []protoreflect.Value{m.Get(fd)}
	case fd.IsList():
		var out []protoreflect.Value
		l := m.Get(fd).List()
		for i := 0; i < l.Len(); i++ {
			out = append(out, refValues(l.Get(i).Message(), parts[1:])...)
		}
		return out
	}
	return refValues(m.Get(fd).Message(), parts[1:])
}

func refCmp(c *pb.Comparison, m protoreflect.Message) bool {
	fd := leafField(m.Descriptor(), c.Field)
	for _, v := range refValues(m, strings.Split(c.Field, ".")) {
		if c.Op == pb.Op_OP_IN {
			for _, o := range c.Values {
				if refTest(fd, pb.Op_OP_EQ, v, o) {
					return true
				}
			}
			continue
		}
		if refTest(fd, c.Op, v, c.Value) {
			return true
		}
	}
	return false
}

func refTest(fd protoreflect.FieldDescriptor, op pb.Op, v protoreflect.Value, o *pb.Value) bool {
	var c int
	switch fd.Kind() {
	case protoreflect.EnumKind, protoreflect.Int32Kind, protoreflect.Int64Kind, protoreflect.Sint64Kind:
		c = refCompareInt(fd, v, o)
	case protoreflect.Uint32Kind, protoreflect.Uint64Kind:
		x := v.Uint()
		y := o.GetUint()
		if k, ok := o.Kind.(*pb.Value_Int); ok {
			y = uint64(k.Int)
		}
		c = refSign(x < y, x > y)
	case protoreflect.FloatKind, protoreflect.DoubleKind:
		return refTestFloat(fd, op, v, o)
	case protoreflect.BoolKind:
		x, y := v.Bool(), o.GetBool()
		c = refSign(!x && y, x && !y)
	case protoreflect.StringKind, protoreflect.BytesKind:
		var x, y []byte
		if fd.Kind() == protoreflect.StringKind {
			x = []byte(v.String())
		} else {
			x = v.Bytes()
		}
		if k, ok := o.Kind.(*pb.Value_String_); ok {
			y = []byte(k.String_)
		} else {
			y = o.GetBytes()
		}
		switch op {
		case pb.Op_OP_PREFIX:
			return bytes.HasPrefix(x, y)
		case pb.Op_OP_CONTAINS:
			return bytes.Contains(x, y)
		}
		c = bytes.Compare(x, y)
	default:
		panic(fd.Kind().String())
	}
	return refOrder(op, c)
}

func refSign(less, greater bool) int {
	switch {
	case less:
		return -1
	case greater:
		return 1
	}
	return 0
}

// refOrder is the outcome of an ordering operator on a comparison result.
func refOrder(op pb.Op, c int) bool {
	switch op {
	case pb.Op_OP_EQ:
		return c == 0
	case pb.Op_OP_NE:
		return c != 0
	case pb.Op_OP_LT:
		return c < 0
	case pb.Op_OP_LE:
		return c <= 0
	case pb.Op_OP_GT:
		return c > 0
	case pb.Op_OP_GE:
		return c >= 0
	}
	panic(op)
}

func refCompareInt(fd protoreflect.FieldDescriptor, v protoreflect.Value, o *pb.Value) int {
	var x int64
	if fd.Kind() == protoreflect.EnumKind {
		x = int64(v.Enum())
	} else {
		x = v.Int()
	}
	var y int64
	switch k := o.Kind.(type) {
	case *pb.Value_Int:
		y = k.Int
	case *pb.Value_Uint:
		y = int64(k.Uint)
	case *pb.Value_Enum:
		y = int64(fd.Enum().Values().ByName(protoreflect.Name(k.Enum)).Number())
	}
	return refSign(x < y, x > y)
}

// refTestFloat compares floats with Go's operators: NaN is neither equal
// to, below nor above anything.
func refTestFloat(fd protoreflect.FieldDescriptor, op pb.Op, v protoreflect.Value, o *pb.Value) bool {
	x := v.Float()
	var y float64
	switch k := o.Kind.(type) {
	case *pb.Value_Double:
		y = k.Double
	case *pb.Value_Int:
		y = float64(k.Int)
	case *pb.Value_Uint:
		y = float64(k.Uint)
	}
	if fd.Kind() == protoreflect.FloatKind && math.Abs(y) <= math.MaxFloat32 {
		y = float64(float32(y))
	}
	switch op {
	case pb.Op_OP_EQ:
		return x == y
	case pb.Op_OP_NE:
		return x != y
	case pb.Op_OP_LT:
		return x < y
	case pb.Op_OP_LE:
		return x <= y
	case pb.Op_OP_GT:
		return x > y
	case pb.Op_OP_GE:
		return x >= y
	}
	panic(op)
}

// TestProperty checks random queries on random records against the
// reference semantics: the full filter agrees with it, and reading the
// plan's ranges and applying its residual filter returns exactly the
// matching records (so a range that is too narrow, or a residual filter
// that drops too much, fails).
func TestProperty(t *testing.T) {
	user, _ := targets(t)
	r := rand.New(rand.NewPCG(1, 2))
	type rec struct {
		m *dynamicpb.Message
		b []byte
	}
	recs := make([]rec, 400)
	for i := range recs {
		m := randomUser(r, user)
		recs[i] = rec{m, marshal(t, m)}
	}
	cases := 1000
	if n := os.Getenv("QUERY_CASES"); n != "" {
		cases, _ = strconv.Atoi(n)
	}
	if testing.Short() {
		cases = 150
	}
	stats := map[string]int{}
	matched := 0
	for i := range cases {
		q := randomQuery(r, user)
		lim := Limits{}
		switch r.IntN(6) {
		case 0:
			lim.MaxRanges = 1
		case 1:
			lim.MaxRanges = 3
		}
		p, err := Compile(q, user, lim)
		if err != nil {
			t.Fatalf("case %d: Compile(%s): %v", i, prototext.Format(q), err)
		}
		stats[p.Access.String()]++
		if p.Filter == nil && q.Where != nil {
			stats["exact"]++
		}
		checkRanges(t, p, user)
		if o := q.GetOrder(); o != nil {
			if p.Reverse != o.Descending {
				t.Fatalf("case %d: reverse %v for %v", i, p.Reverse, o)
			}
			if o.Index == "" && p.Access == AccessIndexRange || o.Index != "" && (p.Index == nil || p.Index.Name != o.Index) {
				t.Fatalf("case %d: plan %s for order %v", i, p.Explain().Text, o)
			}
		}
		if p.Access == AccessPKPoint {
			for _, rg := range p.Ranges {
				if !bytes.Equal(rg.End, orderedcode.PrefixEnd(rg.Start)) {
					t.Fatalf("case %d: point range [% x, % x)", i, rg.Start, rg.End)
				}
			}
		}
		pkPrefix := (&Plan{typeID: user.Type.ID}).RecordKey(nil, nil)
		for j, rc := range recs {
			want := q.Where == nil || refEval(q.Where, rc.m)
			full, err := p.fullFilter.Match(rc.b)
			if err != nil {
				t.Fatal(err)
			}
			fail := func(format string, args ...any) {
				t.Helper()
				t.Fatalf("case %d, record %d: %s\nquery: %s\nplan: %s\nrecord: %s", i, j, fmt.Sprintf(format, args...),
					prototext.Format(q), p.Explain().Text, prototext.Format(rc.m))
			}
			if full != want {
				fail("Match = %v, reference %v", full, want)
			}
			key, val := keyOf(user, p.Index, rc.m)
			inRange := inRanges(p.Ranges, key)
			if want && !inRange {
				fail("matching record's key % x is outside the plan's ranges", key)
			}
			res, err := p.Filter.Match(rc.b)
			if err != nil {
				t.Fatal(err)
			}
			if got := inRange && res; got != want {
				fail("plan returns %v (in range %v, residual %v), reference %v", got, inRange, res, want)
			}
			if want {
				matched++
			}
			if p.Access == AccessIndexRange {
				pk, err := p.PKFromIndexEntry(key, val)
				if err != nil {
					fail("PKFromIndexEntry: %v", err)
				}
				pkKey, _ := keyOf(user, nil, rc.m)
				if got := p.RecordKey(nil, pk); !bytes.Equal(got, pkKey) || !bytes.HasPrefix(got, pkPrefix) {
					fail("record key % x from index entry, want % x", got, pkKey)
				}
			}
		}
	}
	t.Logf("%d cases × %d records, %d matches; plans %v", cases, len(recs), matched, stats)
}
