package model_test

import (
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"slices"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/dynamicpb"
	"google.golang.org/protobuf/types/known/anypb"

	pb "github.com/protobase/protobase/gen/protobase/v1"
)

// The version model (TestVersionModel) holds what the server should hold
// as decoded records with their versions, and applies batches of every
// operation, patches with fields and add, per-record operations and
// conditions to it. A record written whole is compared byte for byte; a
// patched one by its decoded contents, as the server re-encodes only the
// fields it replaces. This file is the model; vbatch_test.go makes
// batches, vcond_test.go makes and evaluates conditions, and
// versions_test.go drives the server.

const versionModelProto = `syntax = "proto3";
package vm;
import "protobase/v1/options.proto";

message Profile {
  string city = 1;
  sint32 level = 2;
}

message Account {
  option (protobase.v1.record) = {
    primary_key: "id"
    index: { fields: "email" unique: true }
    index: { fields: "team" }
    index: { fields: "profile.city" }
  };
  int64 id = 1;
  optional string email = 2;
  string team = 3;
  int32 score = 4;
  int64 balance = 5;
  uint32 visits = 6;
  Profile profile = 7;
  repeated string tags = 8;
  double rating = 9;
  sint64 delta = 10;
  fixed64 hits = 11;
}

message Member {
  option (protobase.v1.record) = {
    primary_key: ["org", "id"]
    index: { fields: ["org", "handle"] unique: true }
    index: { fields: ["level", "org"] }
  };
  string org = 1;
  int64 id = 2;
  optional string handle = 3;
  int32 level = 4;
  string note = 5;
}
`

// vmType is one record type of the version model.
type vmType struct {
	name     string
	keys     int    // primary keys are numbered 0..keys-1
	pkFields string // as a WriteError names them
	pkPaths  []string
	// fill sets the fields of a record with key number k: the key alone
	// when keyOnly.
	fill func(rng *rand.Rand, m protoreflect.Message, k int, keyOnly bool)
	// order is a string whose order is the records' primary-key order.
	order func(m protoreflect.Message) string
	// uniq is the value of the record in each unique index (vmAbsent:
	// no entry), and uniqFields the fields a WriteError names for it.
	uniq       func(m protoreflect.Message) []string
	uniqFields []string
	// setPaths may be named in a patch's fields (a repeated field is
	// replaced whole), addPaths in its add. Paths that overlap (profile,
	// profile.city) never share a valid patch.
	setPaths, addPaths []string
	filters            []vmFilter
}

func (t *vmType) url() string { return "type.googleapis.com/" + t.name }

const vmAbsent = "\x00absent"

// vmSmall returns a small integer most of the time, and one within a few
// of lo or hi one time in n: sums near the limits of a field's type
// overflow.
func vmSmall(rng *rand.Rand, lo, hi int64, n int) int64 {
	switch rng.IntN(2 * n) {
	case 0:
		return lo + rng.Int64N(3)
	case 1:
		return hi - rng.Int64N(3)
	}
	return rng.Int64N(6) - 2
}

func vmSet(m protoreflect.Message, name string, v protoreflect.Value) {
	m.Set(m.Descriptor().Fields().ByName(protoreflect.Name(name)), v)
}

var vmTypes = []*vmType{
	{
		name: "vm.Account", keys: 16, pkFields: "id", pkPaths: []string{"id"}, uniqFields: []string{"email"},
		fill: func(rng *rand.Rand, m protoreflect.Message, k int, keyOnly bool) {
			vmSet(m, "id", protoreflect.ValueOfInt64(int64(k-2))) // negative ids too
			if keyOnly {
				return
			}
			if e := optionalValue(rng, "%d@x", 30); e != vmAbsent {
				vmSet(m, "email", protoreflect.ValueOfString(e))
			}
			vmSet(m, "team", protoreflect.ValueOfString(pick(rng, "", "red", "blue")))
			vmSet(m, "score", protoreflect.ValueOfInt32(int32(vmSmall(rng, math.MinInt32, math.MaxInt32, 5))))
			vmSet(m, "balance", protoreflect.ValueOfInt64(vmSmall(rng, math.MinInt64, math.MaxInt64, 8)))
			visits := uint32(rng.IntN(6))
			if rng.IntN(6) == 0 {
				visits = math.MaxUint32 - rng.Uint32N(3)
			}
			vmSet(m, "visits", protoreflect.ValueOfUint32(visits))
			if rng.IntN(3) > 0 {
				pf := m.Mutable(m.Descriptor().Fields().ByName("profile")).Message()
				vmSet(pf, "city", protoreflect.ValueOfString(pick(rng, "", "oslo", "rome")))
				vmSet(pf, "level", protoreflect.ValueOfInt32(int32(rng.IntN(4)-1)))
			}
			tags := m.Mutable(m.Descriptor().Fields().ByName("tags")).List()
			for range rng.IntN(3) {
				tags.Append(protoreflect.ValueOfString(pick(rng, "a", "b", "")))
			}
			vmSet(m, "rating", protoreflect.ValueOfFloat64(float64(rng.IntN(9)-4)/2))
			vmSet(m, "delta", protoreflect.ValueOfInt64(vmSmall(rng, math.MinInt64, math.MaxInt64, 8)))
			hits := uint64(rng.IntN(6))
			if rng.IntN(8) == 0 {
				hits = math.MaxUint64 - rng.Uint64N(3)
			}
			vmSet(m, "hits", protoreflect.ValueOfUint64(hits))
		},
		order: func(m protoreflect.Message) string { return vmOrderInt(vmGet(m, "id").Int()) },
		uniq: func(m protoreflect.Message) []string {
			if !vmHas(m, "email") {
				return []string{vmAbsent}
			}
			return []string{vmGet(m, "email").String()}
		},
		setPaths: []string{"email", "team", "score", "balance", "profile", "profile.city", "profile.level", "rating", "hits", "tags"},
		addPaths: []string{"score", "balance", "visits", "profile.level", "rating", "delta", "hits"},
		filters:  vmAccountFilters,
	},
	{
		name: "vm.Member", keys: 12, pkFields: "org,id", pkPaths: []string{"org", "id"}, uniqFields: []string{"org,handle"},
		fill: func(rng *rand.Rand, m protoreflect.Message, k int, keyOnly bool) {
			vmSet(m, "org", protoreflect.ValueOfString([]string{"o1", "o2", ""}[k%3]))
			vmSet(m, "id", protoreflect.ValueOfInt64(int64(k/3)))
			if keyOnly {
				return
			}
			if h := optionalValue(rng, "h%d", 10); h != vmAbsent {
				vmSet(m, "handle", protoreflect.ValueOfString(h))
			}
			vmSet(m, "level", protoreflect.ValueOfInt32(int32(vmSmall(rng, math.MinInt32, math.MaxInt32, 5))))
			vmSet(m, "note", protoreflect.ValueOfString(pick(rng, "", "n", strings.Repeat("z", rng.IntN(30)))))
		},
		order: func(m protoreflect.Message) string {
			return vmGet(m, "org").String() + "\x00" + vmOrderInt(vmGet(m, "id").Int())
		},
		uniq: func(m protoreflect.Message) []string {
			if !vmHas(m, "handle") {
				return []string{vmAbsent}
			}
			return []string{fmt.Sprintf("%q/%q", vmGet(m, "org").String(), vmGet(m, "handle").String())}
		},
		setPaths: []string{"handle", "level", "note"},
		addPaths: []string{"level"},
		filters:  vmMemberFilters,
	},
}

// vmOrderInt is a string whose order is that of the int64 v.
func vmOrderInt(v int64) string { return fmt.Sprintf("%016x", uint64(v)^(1<<63)) }

// vmField returns the descriptor of the field at path in md, or nil.
func vmField(md protoreflect.MessageDescriptor, path string) protoreflect.FieldDescriptor {
	var fd protoreflect.FieldDescriptor
	for _, p := range strings.Split(path, ".") {
		if md == nil {
			return nil
		}
		if fd = md.Fields().ByName(protoreflect.Name(p)); fd == nil {
			return nil
		}
		md = fd.Message()
	}
	return fd
}

// vmGet is the value at path in m, the default when absent.
func vmGet(m protoreflect.Message, path string) protoreflect.Value {
	parts := strings.Split(path, ".")
	for _, p := range parts[:len(parts)-1] {
		m = m.Get(m.Descriptor().Fields().ByName(protoreflect.Name(p))).Message()
	}
	return m.Get(m.Descriptor().Fields().ByName(protoreflect.Name(parts[len(parts)-1])))
}

// vmHas reports whether the field at path is present in m.
func vmHas(m protoreflect.Message, path string) bool {
	parts := strings.Split(path, ".")
	for _, p := range parts[:len(parts)-1] {
		fd := m.Descriptor().Fields().ByName(protoreflect.Name(p))
		if !m.Has(fd) {
			return false
		}
		m = m.Get(fd).Message()
	}
	return m.Has(m.Descriptor().Fields().ByName(protoreflect.Name(parts[len(parts)-1])))
}

// vmRec is a record as sent, or as the model holds it.
type vmRec struct {
	t   *vmType // nil: a record of an unknown type
	pk  int
	msg *dynamicpb.Message
	// raw is the record's exact bytes: those sent, while the record is as
	// written whole; nil once patched (then msg is compared, decoded).
	raw []byte
	ver uint64
	any *anypb.Any
}

func vmKey(t *vmType, pk int) string { return fmt.Sprintf("%s|%d", t.name, pk) }

func (r *vmRec) key() string { return vmKey(r.t, r.pk) }

// vmModel is the reference: the records that exist, by type and key.
type vmModel map[string]*vmRec

// vmFail is one way a batch may fail. A batch that could fail in several
// ways (a condition and a record both fail, say) lists them all: which
// one the server reports is its choice.
type vmFail struct {
	code   codes.Code
	record int    // -1: not checked
	field  string // checked when checkField
	url    string // "" not checked
	cond   int    // the condition named, -1 for none
	// version found, checked for ABORTED.
	version    uint64
	checkField bool
}

func (f vmFail) String() string {
	return fmt.Sprintf("%v record %d field %q url %s condition %d version %d", f.code, f.record, f.field, f.url, f.cond, f.version)
}

// vmBatch is one batch as generated: what is sent, and what the model
// needs to evaluate it.
type vmBatch struct {
	op          pb.WriteOp
	ops         []pb.WriteOp // parallel to recs, or nil
	recs        []*vmRec
	fields, add []string
	conds       []*vmCond
	// invalid, when set, is why the batch is INVALID_ARGUMENT before
	// anything is read: its patch names a bad field, or a condition is
	// malformed.
	invalid *vmFail
}

func (b *vmBatch) opOf(i int) pb.WriteOp {
	if len(b.ops) > 0 {
		return b.ops[i]
	}
	return b.op
}

func (b *vmBatch) anys() []*anypb.Any {
	out := make([]*anypb.Any, len(b.recs))
	for i, r := range b.recs {
		out[i] = r.any
	}
	return out
}

func (b *vmBatch) conditions() []*pb.Condition {
	var out []*pb.Condition
	for _, c := range b.conds {
		out = append(out, c.pb)
	}
	return out
}

func (b *vmBatch) String() string {
	var s strings.Builder
	fmt.Fprintf(&s, "%v", b.op)
	if len(b.ops) > 0 {
		fmt.Fprintf(&s, " ops %v", b.ops)
	}
	if len(b.fields)+len(b.add) > 0 {
		fmt.Fprintf(&s, " fields %q add %q", b.fields, b.add)
	}
	fmt.Fprintf(&s, ", %d records", len(b.recs))
	for _, r := range b.recs {
		if r.t != nil {
			fmt.Fprintf(&s, " %s#%d", r.t.name, r.pk)
		}
	}
	for i, c := range b.conds {
		fmt.Fprintf(&s, "; condition %d: %s", i, c.desc)
	}
	return s.String()
}

// evaluate returns how b fails against m (every way it may), or nil and
// the model after b, whose written records are not yet versioned (commit
// sets their version).
func (m vmModel) evaluate(b *vmBatch) ([]vmFail, vmModel, []string) {
	var fails []vmFail
	if b.invalid != nil {
		fails = append(fails, *b.invalid)
	}
	for i, r := range b.recs {
		if r.t == nil {
			fails = append(fails, vmFail{code: codes.InvalidArgument, record: i, url: r.any.TypeUrl, cond: -1})
			break
		}
	}
	if len(fails) > 0 {
		return fails, nil, nil
	}
	for i, c := range b.conds {
		if f := c.check(m, i); f != nil {
			fails = append(fails, *f)
		}
	}
	next, written, recFails := m.applyRecords(b)
	fails = append(fails, recFails...)
	if len(fails) > 0 {
		return fails, nil, nil
	}
	return nil, next, written
}

// applyRecords applies b's records one by one, each seeing those before
// it, to a copy of m, and returns it with the keys written (removed ones
// included), or how the first record to fail fails (a patch overflowing
// in several fields may name any of them).
func (m vmModel) applyRecords(b *vmBatch) (vmModel, []string, []vmFail) {
	next := maps.Clone(m)
	var written []string
	for i, r := range b.recs {
		op := b.opOf(i)
		old, found := next[r.key()]
		recFail := func(code codes.Code, fields ...string) []vmFail {
			var out []vmFail
			for _, f := range fields {
				out = append(out, vmFail{code: code, record: i, field: f, url: r.any.TypeUrl, cond: -1, checkField: true})
			}
			return out
		}
		switch {
		case op == pb.WriteOp_WRITE_OP_INSERT && found:
			return nil, nil, recFail(codes.AlreadyExists, r.t.pkFields)
		case op != pb.WriteOp_WRITE_OP_INSERT && op != pb.WriteOp_WRITE_OP_UPSERT && !found:
			return nil, nil, recFail(codes.NotFound, r.t.pkFields)
		}
		written = append(written, r.key())
		if op == pb.WriteOp_WRITE_OP_REMOVE {
			delete(next, r.key())
			continue
		}
		nr := &vmRec{t: r.t, pk: r.pk, msg: r.msg, raw: r.any.Value}
		if op == pb.WriteOp_WRITE_OP_PATCH {
			msg, over := vmPatch(old.msg, r.msg, b.fields, b.add)
			if len(over) > 0 {
				return nil, nil, recFail(codes.OutOfRange, over...)
			}
			nr.msg, nr.raw = msg, nil
		}
		uniq := r.t.uniq(nr.msg)
		for j, fields := range r.t.uniqFields {
			for k, other := range next {
				if other.t == r.t && k != r.key() && uniq[j] != vmAbsent && other.t.uniq(other.msg)[j] == uniq[j] {
					return nil, nil, recFail(codes.AlreadyExists, fields)
				}
			}
		}
		next[r.key()] = nr
	}
	return next, written, nil
}

// commit makes next, the model after a batch that committed at version
// ver, the model: each record the batch wrote takes ver.
func (m vmModel) commit(next vmModel, written []string, ver uint64) {
	for _, k := range written {
		if r, ok := next[k]; ok {
			r.ver = ver
		}
	}
	clear(m)
	maps.Copy(m, next)
}

// vmPatch returns stored with the patch applied: each path of fields
// takes rec's value (cleared when rec lacks it), and each path of add has
// rec's value added to stored's (absent counts as 0). On an overflow it
// returns the paths that overflow.
func vmPatch(stored, rec *dynamicpb.Message, fields, add []string) (*dynamicpb.Message, []string) {
	out := proto.Clone(stored).(*dynamicpb.Message)
	for _, path := range fields {
		if !vmHas(rec, path) {
			vmClear(out, path)
			continue
		}
		v := vmGet(rec, path)
		switch fd := vmField(rec.Descriptor(), path); {
		case fd.IsList():
			vmClear(out, path)
			l := out.Mutable(fd).List() // top-level: no list lies within a message here
			for i := range v.List().Len() {
				l.Append(v.List().Get(i))
			}
			continue
		case fd.Kind() == protoreflect.MessageKind:
			v = protoreflect.ValueOfMessage(proto.Clone(v.Message().Interface()).ProtoReflect())
		}
		vmSetPath(out, path, v)
	}
	var over []string
	for _, path := range add {
		fd := vmField(rec.Descriptor(), path)
		sum, ok := vmAdd(fd.Kind(), vmGet(out, path), vmGet(rec, path))
		if !ok {
			over = append(over, path)
		}
		vmSetPath(out, path, sum)
	}
	if len(over) > 0 {
		return nil, over
	}
	return out, nil
}

// vmClear clears the field at path of m, if the messages on the way are
// there.
func vmClear(m protoreflect.Message, path string) {
	parts := strings.Split(path, ".")
	for _, p := range parts[:len(parts)-1] {
		fd := m.Descriptor().Fields().ByName(protoreflect.Name(p))
		if !m.Has(fd) {
			return
		}
		m = m.Mutable(fd).Message()
	}
	m.Clear(m.Descriptor().Fields().ByName(protoreflect.Name(parts[len(parts)-1])))
}

// vmSetPath sets the field at path of m, making the messages on the way.
func vmSetPath(m protoreflect.Message, path string, v protoreflect.Value) {
	parts := strings.Split(path, ".")
	for _, p := range parts[:len(parts)-1] {
		m = m.Mutable(m.Descriptor().Fields().ByName(protoreflect.Name(p))).Message()
	}
	vmSet(m, parts[len(parts)-1], v)
}

// vmAdd adds two values of a numeric field of kind k, or reports that the
// sum does not fit the field's type.
func vmAdd(k protoreflect.Kind, a, b protoreflect.Value) (protoreflect.Value, bool) {
	switch k {
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind:
		s := a.Int() + b.Int()
		return protoreflect.ValueOfInt32(int32(s)), s >= math.MinInt32 && s <= math.MaxInt32
	case protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind:
		s := a.Int() + b.Int()
		return protoreflect.ValueOfInt64(s), (s > a.Int()) == (b.Int() > 0) || b.Int() == 0
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind:
		s := a.Uint() + b.Uint()
		return protoreflect.ValueOfUint32(uint32(s)), s <= math.MaxUint32
	case protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		s := a.Uint() + b.Uint()
		return protoreflect.ValueOfUint64(s), s >= a.Uint()
	case protoreflect.DoubleKind:
		return protoreflect.ValueOfFloat64(a.Float() + b.Float()), true
	case protoreflect.FloatKind:
		return protoreflect.ValueOfFloat32(float32(a.Float() + b.Float())), true
	}
	panic(fmt.Sprintf("add on a %v field", k))
}

// vmCanonical is the deterministic encoding of m with empty sub-messages
// left out: how a patched record is compared. Whether clearing the last
// field of a sub-message leaves it present and empty is the server's
// choice; no read tells the two apart except by presence.
func vmCanonical(m proto.Message) []byte {
	c := proto.Clone(m)
	vmStripEmpty(c.ProtoReflect())
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(c)
	if err != nil {
		panic(err)
	}
	return b
}

func vmStripEmpty(m protoreflect.Message) {
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		if fd.Kind() == protoreflect.MessageKind && !fd.IsList() && !fd.IsMap() {
			vmStripEmpty(v.Message())
			if proto.Size(v.Message().Interface()) == 0 {
				m.Clear(fd)
			}
		}
		return true
	})
}

// vmNewRec makes a record of t with key number k (only the key when
// keyOnly), encoded deterministically.
func vmNewRec(rng *rand.Rand, t *vmType, md protoreflect.MessageDescriptor, k int, keyOnly bool) *vmRec {
	msg := dynamicpb.NewMessage(md)
	t.fill(rng, msg, k, keyOnly)
	raw, err := proto.MarshalOptions{Deterministic: true}.Marshal(msg)
	if err != nil {
		panic(err)
	}
	return &vmRec{t: t, pk: k, msg: msg, raw: raw, any: &anypb.Any{TypeUrl: t.url(), Value: raw}}
}

// vmHeld returns the keys of t the model holds, in order.
func (m vmModel) held(t *vmType) []int {
	var out []int
	for _, r := range m {
		if r.t == t {
			out = append(out, r.pk)
		}
	}
	slices.Sort(out) // map order is random; the seed must decide
	return out
}

// sorted returns the records of t in primary-key order.
func (m vmModel) sorted(t *vmType) []*vmRec {
	var out []*vmRec
	for _, r := range m {
		if r.t == t {
			out = append(out, r)
		}
	}
	slices.SortFunc(out, func(a, b *vmRec) int { return strings.Compare(t.order(a.msg), t.order(b.msg)) })
	return out
}
