package model_test

import (
	"bytes"
	"fmt"
	"math"
	"math/rand/v2"
	"sort"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/dynamicpb"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/protobase/protobase/client"
	pb "github.com/protobase/protobase/gen/protobase/v1"
	"github.com/protobase/protobase/internal/orderedcode"
	"github.com/protobase/protobase/server/servertest"
	"github.com/protobase/protobase/tests/robustness/harness"
)

// The model test runs random queries over random records of random schemas
// through every read path (Search, Scan at several parallelisms, Query
// pages) and compares each answer with a brute-force evaluation of the same
// expression over the decoded records. A planner range that is too narrow
// loses matches and fails it; a wrong order or limit fails it too.

// modelField is one scalar field of the generated type.
type modelField struct {
	name     string
	typ      string // proto type
	repeated bool
}

var modelScalars = []string{"int32", "int64", "uint64", "sint32", "double", "string", "bool", "bytes", "Color"}

func genSchema(rng *rand.Rand) (src string, fields []modelField, pk []string, indexes [][]string) {
	n := 4 + rng.IntN(4)
	used := map[string]bool{}
	for i := 0; i < n; i++ {
		typ := modelScalars[rng.IntN(len(modelScalars))]
		f := modelField{name: fmt.Sprintf("f%d_%s", i, strings.ToLower(typ)), typ: typ}
		if typ != "bytes" && rng.IntN(6) == 0 {
			f.repeated = true
		}
		fields = append(fields, f)
	}
	keyable := func() []string {
		var out []string
		for _, f := range fields {
			if !f.repeated && f.typ != "double" && f.typ != "bool" {
				out = append(out, f.name)
			}
		}
		return out
	}
	cands := keyable()
	if len(cands) == 0 {
		fields = append(fields, modelField{name: "fk_int64", typ: "int64"})
		cands = []string{"fk_int64"}
	}
	// Primary key: one or two fields; "id" makes it unique.
	pk = []string{"id"}
	if rng.IntN(2) == 0 {
		pk = []string{cands[rng.IntN(len(cands))], "id"}
	}
	used["id"] = true
	for i := 0; i < 1+rng.IntN(3); i++ {
		ix := []string{cands[rng.IntN(len(cands))]}
		if rng.IntN(3) == 0 {
			if f := cands[rng.IntN(len(cands))]; f != ix[0] {
				ix = append(ix, f)
			}
		}
		key := strings.Join(ix, ",")
		if used[key] {
			continue
		}
		used[key] = true
		indexes = append(indexes, ix)
	}
	var b strings.Builder
	b.WriteString("syntax = \"proto3\";\npackage model;\nimport \"protobase/v1/options.proto\";\n")
	b.WriteString("enum Color { COLOR_UNSPECIFIED = 0; RED = 1; GREEN = 2; BLUE = 3; }\n")
	b.WriteString("message Nested { int32 n = 1; string s = 2; }\n")
	b.WriteString("message Rec {\n  option (protobase.v1.record) = { primary_key: [")
	for i, p := range pk {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%q", p)
	}
	b.WriteString("]")
	for _, ix := range indexes {
		b.WriteString(" index: { fields: [")
		for i, f := range ix {
			if i > 0 {
				b.WriteString(", ")
			}
			fmt.Fprintf(&b, "%q", f)
		}
		b.WriteString("] }")
	}
	b.WriteString(" };\n  int64 id = 1;\n  Nested nested = 2;\n  repeated Nested items = 3;\n")
	for i, f := range fields {
		rep := ""
		if f.repeated {
			rep = "repeated "
		}
		fmt.Fprintf(&b, "  %s%s %s = %d;\n", rep, f.typ, f.name, 10+i)
	}
	b.WriteString("}\n")
	return b.String(), fields, pk, indexes
}

// Small domains make matches, ties and prefixes common.
var (
	modelStrings = []string{"", "a", "ab", "abc", "b", "ba", "An", "Ann", "Anna", "x\x00y", "é"}
	modelInts    = []int64{math.MinInt32, -100, -1, 0, 1, 2, 3, 42, 100, math.MaxInt32}
	modelDoubles = []float64{math.Inf(-1), -2.5, math.Copysign(0, -1), 0, 0.5, 1, 2.5, math.Inf(1), math.NaN()}
)

func genValue(rng *rand.Rand, fd protoreflect.FieldDescriptor) protoreflect.Value {
	switch fd.Kind() {
	case protoreflect.Int32Kind, protoreflect.Sint32Kind:
		return protoreflect.ValueOfInt32(int32(modelInts[rng.IntN(len(modelInts))]))
	case protoreflect.Int64Kind:
		return protoreflect.ValueOfInt64(modelInts[rng.IntN(len(modelInts))] * int64(1+rng.IntN(2)))
	case protoreflect.Uint64Kind:
		return protoreflect.ValueOfUint64(uint64(rng.IntN(6)) * uint64(1+rng.IntN(3)))
	case protoreflect.DoubleKind:
		return protoreflect.ValueOfFloat64(modelDoubles[rng.IntN(len(modelDoubles))])
	case protoreflect.StringKind:
		return protoreflect.ValueOfString(modelStrings[rng.IntN(len(modelStrings))])
	case protoreflect.BytesKind:
		return protoreflect.ValueOfBytes([]byte(modelStrings[rng.IntN(len(modelStrings))]))
	case protoreflect.BoolKind:
		return protoreflect.ValueOfBool(rng.IntN(2) == 0)
	case protoreflect.EnumKind:
		return protoreflect.ValueOfEnum(protoreflect.EnumNumber(rng.IntN(4)))
	}
	panic(fd.Kind())
}

func genRecord(rng *rand.Rand, md protoreflect.MessageDescriptor, id int64) *dynamicpb.Message {
	m := dynamicpb.NewMessage(md)
	fs := md.Fields()
	for i := 0; i < fs.Len(); i++ {
		fd := fs.Get(i)
		switch {
		case fd.Name() == "id":
			m.Set(fd, protoreflect.ValueOfInt64(id))
		case fd.Kind() == protoreflect.MessageKind:
			if rng.IntN(3) == 0 {
				continue
			}
			mk := func() protoreflect.Value {
				n := dynamicpb.NewMessage(fd.Message())
				n.Set(fd.Message().Fields().ByName("n"), protoreflect.ValueOfInt32(int32(rng.IntN(5))))
				n.Set(fd.Message().Fields().ByName("s"), protoreflect.ValueOfString(modelStrings[rng.IntN(len(modelStrings))]))
				return protoreflect.ValueOfMessage(n)
			}
			if fd.IsList() {
				l := m.Mutable(fd).List()
				for j := rng.IntN(3); j > 0; j-- {
					l.Append(mk())
				}
			} else {
				m.Set(fd, mk())
			}
		case fd.IsList():
			l := m.Mutable(fd).List()
			for j := rng.IntN(4); j > 0; j-- {
				l.Append(genValue(rng, fd))
			}
		default:
			if rng.IntN(5) > 0 { // sometimes absent: default value
				m.Set(fd, genValue(rng, fd))
			}
		}
	}
	return m
}

// genExpr builds a random expression; paths include nested and repeated ones.
func genExpr(rng *rand.Rand, md protoreflect.MessageDescriptor, depth int) *pb.Expr {
	if depth > 0 && rng.IntN(3) == 0 {
		switch rng.IntN(3) {
		case 0:
			var l []*pb.Expr
			for i := rng.IntN(3) + 1; i > 0; i-- {
				l = append(l, genExpr(rng, md, depth-1))
			}
			return &pb.Expr{Expr: &pb.Expr_And{And: &pb.ExprList{Exprs: l}}}
		case 1:
			var l []*pb.Expr
			for i := rng.IntN(3) + 1; i > 0; i-- {
				l = append(l, genExpr(rng, md, depth-1))
			}
			return &pb.Expr{Expr: &pb.Expr_Or{Or: &pb.ExprList{Exprs: l}}}
		default:
			return &pb.Expr{Expr: &pb.Expr_Not{Not: genExpr(rng, md, depth-1)}}
		}
	}
	// A comparison on a random scalar path.
	var paths []string
	var fds []protoreflect.FieldDescriptor
	fs := md.Fields()
	for i := 0; i < fs.Len(); i++ {
		fd := fs.Get(i)
		if fd.Kind() == protoreflect.MessageKind {
			for _, sub := range []string{"n", "s"} {
				paths = append(paths, string(fd.Name())+"."+sub)
				fds = append(fds, fd.Message().Fields().ByName(protoreflect.Name(sub)))
			}
			continue
		}
		paths = append(paths, string(fd.Name()))
		fds = append(fds, fd)
	}
	k := rng.IntN(len(paths))
	fd := fds[k]
	ops := []pb.Op{pb.Op_OP_EQ, pb.Op_OP_NE, pb.Op_OP_LT, pb.Op_OP_LE, pb.Op_OP_GT, pb.Op_OP_GE, pb.Op_OP_IN}
	if fd.Kind() == protoreflect.StringKind || fd.Kind() == protoreflect.BytesKind {
		ops = append(ops, pb.Op_OP_PREFIX, pb.Op_OP_CONTAINS, pb.Op_OP_EQ, pb.Op_OP_GE)
	}
	if fd.Name() == "id" || paths[k] == "id" {
		ops = append(ops, pb.Op_OP_EQ, pb.Op_OP_IN, pb.Op_OP_LT)
	}
	op := ops[rng.IntN(len(ops))]
	c := &pb.Comparison{Field: paths[k], Op: op}
	val := func() *pb.Value {
		if fd.Name() == "id" {
			return &pb.Value{Kind: &pb.Value_Int{Int: int64(rng.IntN(90))}}
		}
		v := genValue(rng, fd)
		switch fd.Kind() {
		case protoreflect.Int32Kind, protoreflect.Sint32Kind:
			return &pb.Value{Kind: &pb.Value_Int{Int: v.Int()}}
		case protoreflect.Int64Kind:
			return &pb.Value{Kind: &pb.Value_Int{Int: v.Int()}}
		case protoreflect.Uint64Kind:
			return &pb.Value{Kind: &pb.Value_Uint{Uint: v.Uint()}}
		case protoreflect.DoubleKind:
			return &pb.Value{Kind: &pb.Value_Double{Double: v.Float()}}
		case protoreflect.StringKind:
			return &pb.Value{Kind: &pb.Value_String_{String_: v.String()}}
		case protoreflect.BytesKind:
			return &pb.Value{Kind: &pb.Value_Bytes{Bytes: v.Bytes()}}
		case protoreflect.BoolKind:
			return &pb.Value{Kind: &pb.Value_Bool{Bool: v.Bool()}}
		case protoreflect.EnumKind:
			return &pb.Value{Kind: &pb.Value_Enum{Enum: string(fd.Enum().Values().ByNumber(v.Enum()).Name())}}
		}
		panic(fd.Kind())
	}
	if op == pb.Op_OP_IN {
		for i := rng.IntN(4) + 1; i > 0; i-- {
			c.Values = append(c.Values, val())
		}
	} else {
		c.Value = val()
	}
	return &pb.Expr{Expr: &pb.Expr_Cmp{Cmp: c}}
}

// eval is the reference semantics, written over decoded messages.
func eval(e *pb.Expr, m protoreflect.Message) bool {
	if e == nil {
		return true
	}
	switch x := e.Expr.(type) {
	case *pb.Expr_And:
		for _, s := range x.And.Exprs {
			if !eval(s, m) {
				return false
			}
		}
		return true
	case *pb.Expr_Or:
		for _, s := range x.Or.Exprs {
			if eval(s, m) {
				return true
			}
		}
		return false
	case *pb.Expr_Not:
		return !eval(x.Not, m)
	case *pb.Expr_Cmp:
		any := false
		eachValue(m, strings.Split(x.Cmp.Field, "."), func(fd protoreflect.FieldDescriptor, v protoreflect.Value) {
			if !any && cmpMatch(x.Cmp, fd, v) {
				any = true
			}
		})
		return any
	}
	panic("unknown expr")
}

// eachValue visits every value at path: repeated anywhere means any element;
// an absent singular field has its default value.
func eachValue(m protoreflect.Message, path []string, fn func(protoreflect.FieldDescriptor, protoreflect.Value)) {
	fd := m.Descriptor().Fields().ByName(protoreflect.Name(path[0]))
	if len(path) == 1 {
		if fd.IsList() {
			l := m.Get(fd).List()
			for i := 0; i < l.Len(); i++ {
				fn(fd, l.Get(i))
			}
			return
		}
		fn(fd, m.Get(fd))
		return
	}
	if fd.IsList() {
		l := m.Get(fd).List()
		for i := 0; i < l.Len(); i++ {
			eachValue(l.Get(i).Message(), path[1:], fn)
		}
		return
	}
	eachValue(m.Get(fd).Message(), path[1:], fn)
}

func cmpMatch(c *pb.Comparison, fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
	if c.Op == pb.Op_OP_IN {
		for _, w := range c.Values {
			if compare(fd, v, w) == 0 {
				return true
			}
		}
		return false
	}
	switch c.Op {
	case pb.Op_OP_PREFIX:
		return bytes.HasPrefix(rawBytes(fd, v), valueBytes(c.Value))
	case pb.Op_OP_CONTAINS:
		return bytes.Contains(rawBytes(fd, v), valueBytes(c.Value))
	}
	r := compare(fd, v, c.Value)
	if r == 2 { // NaN involved: only NE holds
		return c.Op == pb.Op_OP_NE
	}
	switch c.Op {
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
	panic(c.Op)
}

func rawBytes(fd protoreflect.FieldDescriptor, v protoreflect.Value) []byte {
	if fd.Kind() == protoreflect.StringKind {
		return []byte(v.String())
	}
	return v.Bytes()
}

func valueBytes(w *pb.Value) []byte {
	if s, ok := w.Kind.(*pb.Value_String_); ok {
		return []byte(s.String_)
	}
	return w.GetBytes()
}

// compare returns -1, 0, 1, or 2 when a NaN makes the values unordered.
func compare(fd protoreflect.FieldDescriptor, v protoreflect.Value, w *pb.Value) int {
	switch fd.Kind() {
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Int64Kind:
		return cmp3(v.Int(), w.GetInt())
	case protoreflect.Uint64Kind:
		return cmp3(v.Uint(), w.GetUint())
	case protoreflect.EnumKind:
		n := fd.Enum().Values().ByName(protoreflect.Name(w.GetEnum())).Number()
		return cmp3(v.Enum(), n)
	case protoreflect.DoubleKind:
		a, b := v.Float(), w.GetDouble()
		if math.IsNaN(a) || math.IsNaN(b) {
			return 2
		}
		return cmp3(a, b)
	case protoreflect.BoolKind:
		a, b := v.Bool(), w.GetBool()
		if a == b {
			return 0
		}
		if !a {
			return -1
		}
		return 1
	case protoreflect.StringKind, protoreflect.BytesKind:
		return bytes.Compare(rawBytes(fd, v), valueBytes(w))
	}
	panic(fd.Kind())
}

func cmp3[T int64 | uint64 | float64 | protoreflect.EnumNumber](a, b T) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func TestModelReads(t *testing.T) {
	for _, b := range harness.Backends {
		t.Run(b.Name, func(t *testing.T) {
			schemas, queries := 6, 60
			if testing.Short() || b.Name != "pebble" {
				schemas, queries = 2, 30
			}
			harness.RunSeeds(t, []uint64{20261122}, func(t *testing.T, seed uint64) {
				for s := 0; s < schemas; s++ {
					rng := rand.New(rand.NewPCG(seed, uint64(s)))
					t.Run(fmt.Sprintf("schema%d", s), func(t *testing.T) {
						runModel(t, b, rng, queries)
					})
				}
			})
		})
	}
}

func runModel(t *testing.T, b harness.Backend, rng *rand.Rand, queries int) {
	src, _, pk, _ := genSchema(rng)
	ts := servertest.New(t, b.Config(t))
	ts.MustApply(map[string]string{"model.proto": src})
	md := ts.Desc("model.Rec")

	// Records in shuffled id order, in a few batches, then a flush so that
	// parallel scans have storage files to split at.
	n := 150 + rng.IntN(150)
	ids := rng.Perm(n)
	byID := map[int64]*dynamicpb.Message{}
	var batch []*anypb.Any
	for _, id := range ids {
		m := genRecord(rng, md, int64(id))
		byID[int64(id)] = m
		b, err := proto.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		batch = append(batch, &anypb.Any{TypeUrl: "type.googleapis.com/model.Rec", Value: b})
		if len(batch) == 64 {
			ts.MustWrite(harness.Insert, batch)
			batch = nil
		}
	}
	ts.MustWrite(harness.Insert, batch)
	if err := ts.Flush(); err != nil {
		t.Fatal(err)
	}
	resp, err := ts.C.GetSchema(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	// orderBy maps an Order.index to the fields its key sorts by: the
	// index fields then the primary key ("" is the primary key).
	var indexNames []string
	orderBy := map[string][]string{"": pk}
	for _, rt := range resp.Types {
		for _, ix := range rt.Indexes {
			indexNames = append(indexNames, ix.Name)
			orderBy[ix.Name] = append(append([]string(nil), ix.Fields...), pk...)
		}
	}

	search, err := ts.C.NewSearch(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer search.Close()
	for qi := 0; qi < queries; qi++ {
		q := &pb.Query{Type: "model.Rec", Where: genExpr(rng, md, 3)}
		if rng.IntN(3) == 0 {
			q.Limit = uint64(1 + rng.IntN(20))
		}
		switch rng.IntN(4) {
		case 0:
			q.Order = &pb.Order{Descending: rng.IntN(2) == 0}
		case 1:
			if len(indexNames) > 0 {
				q.Order = &pb.Order{Index: indexNames[rng.IntN(len(indexNames))], Descending: rng.IntN(2) == 0}
			}
		}
		var want []*dynamicpb.Message
		for _, m := range byID {
			if eval(q.Where, m) {
				want = append(want, m)
			}
		}
		label := fmt.Sprintf("query %d %v", qi, q)
		check := func(path string, got []*anypb.Any) {
			t.Helper()
			checkResult(t, label+" via "+path, md, q, orderBy, want, got)
		}

		res, err := search.Query(q)
		if err != nil {
			t.Fatal(err)
		}
		got, err := res.All()
		if err != nil {
			t.Fatalf("%s via search: %v", label, err)
		}
		check("search", got)

		for _, par := range []uint32{1, 4, 16} {
			sc := ts.C.Scan(t.Context(), q, client.ScanOptions{Parallelism: par, BatchSize: uint32(1 + rng.IntN(50))})
			var recs []*anypb.Any
			for sc.Next() {
				recs = append(recs, sc.Record())
			}
			if err := sc.Err(); err != nil {
				t.Fatalf("%s via scan/%d: %v", label, par, err)
			}
			check(fmt.Sprintf("scan/%d", par), recs)
		}

		var paged []*anypb.Any
		err = ts.C.Pages(t.Context(), q, uint32(1+rng.IntN(40)), func(p *client.Page) bool {
			paged = append(paged, p.Records...)
			return true
		})
		if err != nil {
			t.Fatalf("%s via pages: %v", label, err)
		}
		if q.Order != nil || q.Limit == 0 {
			check("pages", paged)
		}
	}
}

// checkResult compares got with the brute-force want: same set (or, with
// a limit, the right number of matches; with an order, exactly the first
// ones), in the requested order.
func checkResult(t *testing.T, label string, md protoreflect.MessageDescriptor, q *pb.Query, orderBy map[string][]string, want []*dynamicpb.Message, got []*anypb.Any) {
	t.Helper()
	ids := make([]int64, len(got))
	gotMsgs := make([]*dynamicpb.Message, len(got))
	for i, a := range got {
		m := dynamicpb.NewMessage(md)
		if err := proto.Unmarshal(a.Value, m); err != nil {
			t.Fatalf("%s: result does not decode: %v", label, err)
		}
		gotMsgs[i] = m
		ids[i] = m.Get(md.Fields().ByName("id")).Int()
	}
	wantIDs := map[int64]bool{}
	for _, m := range want {
		wantIDs[m.Get(md.Fields().ByName("id")).Int()] = true
	}
	seen := map[int64]bool{}
	for _, id := range ids {
		if !wantIDs[id] {
			t.Fatalf("%s: returned id %d, which does not match", label, id)
		}
		if seen[id] {
			t.Fatalf("%s: returned id %d twice", label, id)
		}
		seen[id] = true
	}
	wantN := len(want)
	if q.Limit > 0 && uint64(wantN) > q.Limit {
		wantN = int(q.Limit)
	}
	if len(ids) != wantN {
		missing := []int64{}
		for id := range wantIDs {
			if !seen[id] {
				missing = append(missing, id)
			}
		}
		sort.Slice(missing, func(i, j int) bool { return missing[i] < missing[j] })
		t.Fatalf("%s: %d results, want %d (missing e.g. %v)", label, len(ids), wantN, missing[:min(5, len(missing))])
	}
	if q.Order == nil {
		return
	}
	// The expected order: the key of the ordering path, then the primary key.
	keyOf := func(m *dynamicpb.Message) []byte { return orderKey(m, orderBy[q.Order.Index]) }
	sorted := append([]*dynamicpb.Message(nil), want...)
	sort.SliceStable(sorted, func(i, j int) bool {
		c := bytes.Compare(keyOf(sorted[i]), keyOf(sorted[j]))
		if q.Order.Descending {
			return c > 0
		}
		return c < 0
	})
	for i, m := range gotMsgs {
		if !bytes.Equal(keyOf(m), keyOf(sorted[i])) {
			t.Fatalf("%s: result %d out of order", label, i)
		}
	}
}

// orderKey encodes fields of m with the order-preserving key codec, so that
// byte order is the order the server must return.
func orderKey(m *dynamicpb.Message, fields []string) []byte {
	var k []byte
	for _, f := range fields {
		fd := m.Descriptor().Fields().ByName(protoreflect.Name(f))
		v := m.Get(fd)
		switch fd.Kind() {
		case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Int64Kind:
			k = orderedcode.AppendInt(k, v.Int())
		case protoreflect.EnumKind:
			k = orderedcode.AppendInt(k, int64(v.Enum()))
		case protoreflect.Uint64Kind:
			k = orderedcode.AppendUint(k, v.Uint())
		case protoreflect.StringKind:
			k = orderedcode.AppendString(k, v.String())
		case protoreflect.BytesKind:
			k = orderedcode.AppendBytes(k, v.Bytes())
		default:
			panic(fd.Kind())
		}
	}
	return k
}
