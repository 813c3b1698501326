package model_test

import (
	"math"
	"slices"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/anypb"

	pb "github.com/protobase/protobase/gen/protobase/v1"
)

// Batches of the version model: plain batches of one operation, patches,
// batches whose records each name their operation, and pure checks (no
// records), each with conditions; now and then a patch that names a bad
// field.

// The kinds of batch, weighted by repetition.
const (
	vmPlain = iota
	vmPatchBatch
	vmOpsBatch
	vmCheck
)

var vmKinds = []int{vmPlain, vmPlain, vmPlain, vmPatchBatch, vmPatchBatch, vmOpsBatch, vmOpsBatch, vmCheck}

// vmRecOps weighs the operations of a batch with per-record operations.
var vmRecOps = []pb.WriteOp{
	pb.WriteOp_WRITE_OP_INSERT, pb.WriteOp_WRITE_OP_UPSERT, pb.WriteOp_WRITE_OP_UPDATE,
	pb.WriteOp_WRITE_OP_REMOVE, pb.WriteOp_WRITE_OP_PATCH, pb.WriteOp_WRITE_OP_PATCH,
}

// batch makes a batch of kind against m, with its conditions.
func (g *vmGen) batch(m vmModel, kind int) *vmBatch {
	b := &vmBatch{}
	switch kind {
	case vmPlain:
		b.op = pick(g.rng, wmOps...)
		for range 1 + g.rng.IntN(5) {
			b.recs = append(b.recs, g.record(m, pick(g.rng, vmTypes...), b.op))
		}
		if g.rng.IntN(25) == 0 {
			// One record of a type the schema lacks.
			b.recs[g.rng.IntN(len(b.recs))] = &vmRec{any: &anypb.Any{TypeUrl: "type.googleapis.com/vm.Nope", Value: []byte{8, 1}}}
		}
	case vmPatchBatch:
		b.op = pb.WriteOp_WRITE_OP_PATCH
		t := pick(g.rng, vmTypes...)
		for range 1 + g.rng.IntN(4) {
			b.recs = append(b.recs, g.record(m, t, b.op))
		}
		g.patch(b, t)
		g.extreme(b)
	case vmOpsBatch:
		// The batch's op is ignored when each record names its own.
		b.op = pick(g.rng, pb.WriteOp_WRITE_OP_UNSPECIFIED, pb.WriteOp_WRITE_OP_INSERT, pb.WriteOp_WRITE_OP_PATCH)
		pt := pick(g.rng, vmTypes...) // the type of the patched records
		patched := false
		for range 2 + g.rng.IntN(4) {
			op := pick(g.rng, vmRecOps...)
			t := pick(g.rng, vmTypes...)
			if op == pb.WriteOp_WRITE_OP_PATCH {
				t, patched = pt, true
			}
			b.ops = append(b.ops, op)
			b.recs = append(b.recs, g.record(m, t, op))
		}
		if patched {
			g.patch(b, pt)
			g.extreme(b)
		}
	case vmCheck:
		b.op = pick(g.rng, wmOps...)
	}
	if kind == vmPlain && b.op != pb.WriteOp_WRITE_OP_REMOVE && g.rng.IntN(40) == 0 {
		b.fields = []string{"note"} // a patch's fields on another operation
		b.invalid = &vmFail{code: codes.InvalidArgument, record: -1, cond: -1}
	}
	if b.invalid == nil {
		g.conds(m, b)
	}
	return b
}

// record makes a record of t for op: mostly of a key the model holds, so
// updates, removes and patches mostly find theirs, and mostly of a free
// one for an insert.
func (g *vmGen) record(m vmModel, t *vmType, op pb.WriteOp) *vmRec {
	k := g.rng.IntN(t.keys)
	switch held := m.held(t); {
	case op == pb.WriteOp_WRITE_OP_INSERT && g.rng.IntN(8) > 0:
		for j := 0; j < 4 && slices.Contains(held, k); j++ {
			k = g.rng.IntN(t.keys)
		}
	case len(held) > 0 && g.rng.IntN(10) > 0:
		k = pick(g.rng, held...)
	}
	keyOnly := op == pb.WriteOp_WRITE_OP_REMOVE && g.rng.IntN(2) == 0
	return vmNewRec(g.rng, t, g.md(t), k, keyOnly)
}

// vmOverlap reports whether two field paths name the same field or one
// lies within the other.
func vmOverlap(a, b string) bool {
	return a == b || strings.HasPrefix(a, b+".") || strings.HasPrefix(b, a+".")
}

// patch gives b the fields and add of a patch of records of t: one to
// four paths that do not overlap, or one time in twenty a bad patch.
func (g *vmGen) patch(b *vmBatch, t *vmType) {
	nf, na := g.rng.IntN(3), g.rng.IntN(3)
	if nf+na == 0 {
		nf = 1
	}
	free := func(p string) bool {
		for _, q := range append(slices.Clone(b.fields), b.add...) {
			if vmOverlap(p, q) {
				return false
			}
		}
		return true
	}
	for _, p := range g.shuffled(t.setPaths) {
		if len(b.fields) < nf && free(p) {
			b.fields = append(b.fields, p)
		}
	}
	for _, p := range g.shuffled(t.addPaths) {
		if len(b.add) < na && free(p) {
			b.add = append(b.add, p)
		}
	}
	if g.rng.IntN(20) == 0 {
		g.badPatch(b, t)
	}
}

// extreme makes, one time in four, a patched record of b add the largest
// or smallest value of one add field's type: with a stored value of the
// same sign, the sum overflows.
func (g *vmGen) extreme(b *vmBatch) {
	if len(b.add) == 0 || b.invalid != nil || g.rng.IntN(4) > 0 {
		return
	}
	var patched []int
	for i := range b.recs {
		if b.opOf(i) == pb.WriteOp_WRITE_OP_PATCH {
			patched = append(patched, i)
		}
	}
	r := b.recs[pick(g.rng, patched...)]
	path := pick(g.rng, b.add...)
	var v protoreflect.Value
	switch vmField(r.msg.Descriptor(), path).Kind() {
	case protoreflect.Int32Kind, protoreflect.Sint32Kind:
		v = protoreflect.ValueOfInt32(pick(g.rng, int32(math.MaxInt32), math.MinInt32))
	case protoreflect.Int64Kind, protoreflect.Sint64Kind:
		v = protoreflect.ValueOfInt64(pick(g.rng, int64(math.MaxInt64), math.MinInt64))
	case protoreflect.Uint32Kind:
		v = protoreflect.ValueOfUint32(math.MaxUint32)
	case protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		v = protoreflect.ValueOfUint64(math.MaxUint64)
	default:
		return // a double does not overflow
	}
	vmSetPath(r.msg, path, v)
	raw, err := proto.MarshalOptions{Deterministic: true}.Marshal(r.msg)
	if err != nil {
		panic(err)
	}
	r.raw, r.any.Value = raw, raw
}

func (g *vmGen) shuffled(s []string) []string {
	out := slices.Clone(s)
	g.rng.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
	return out
}

// vmBadPatch is a patch the server refuses, and the field it blames.
type vmBadPatch struct {
	fields, add []string
	blame       string
}

// badPatch spoils b's patch: INVALID_ARGUMENT naming the field to blame.
func (g *vmGen) badPatch(b *vmBatch, t *vmType) {
	nonNumeric := map[string]string{"vm.Account": "team", "vm.Member": "note"}[t.name]
	both := t.addPaths[0] // also in setPaths
	cases := []vmBadPatch{
		{[]string{"nope"}, nil, "nope"},
		{nil, []string{"nope"}, "nope"},
		{[]string{nonNumeric + ".x"}, nil, nonNumeric + ".x"},
		{nil, []string{nonNumeric}, nonNumeric},
		{[]string{both}, []string{both}, both},
		{[]string{t.setPaths[0], t.setPaths[0]}, nil, t.setPaths[0]},
		{[]string{t.pkPaths[0]}, nil, t.pkPaths[0]},
		{nil, []string{"id"}, "id"},
		{nil, nil, ""},
	}
	if t.name == "vm.Account" {
		cases = append(cases,
			vmBadPatch{[]string{"tags.x"}, nil, "tags.x"},
			vmBadPatch{[]string{"profile.nope"}, nil, "profile.nope"},
			vmBadPatch{nil, []string{"profile"}, "profile"},
			vmBadPatch{nil, []string{"tags"}, "tags"},
			vmBadPatch{[]string{"profile", "profile.city"}, nil, "profile.city"},
			vmBadPatch{[]string{"profile.level"}, []string{"profile"}, "profile"},
		)
	}
	c := cases[g.rng.IntN(len(cases))]
	b.fields, b.add = c.fields, c.add
	b.invalid = &vmFail{code: codes.InvalidArgument, record: -1, cond: -1, field: c.blame, checkField: c.blame != ""}
}
