package engine

import (
	"math"
	"slices"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/protobase/protobase/internal/query"
	"github.com/protobase/protobase/internal/record"
	"github.com/protobase/protobase/internal/schema"
)

// keyExtractor reads every key field of one record type — the primary
// key's and each maintained index's — from record bytes in a single walk.
// It is compiled once per type with the catalog and is immutable.
//
// locate walks the record's top-level fields once and notes where the last
// occurrence of each key field lies; an append method then decodes a field
// from that occurrence alone, as record.Path.Get would: for a singular
// top-level scalar the last occurrence wins, an absent one reads as its
// default. Paths the walk cannot serve alike — nested paths and members of
// a oneof, where a later sibling clears the field — keep their own
// record.Path.Get over the whole record, as does every path of a record the
// walk cannot parse, so the error a malformed record gets is the one
// Path.Get gives.
//
// Rejected: a walk per key field (the design before this one): a record
// with a primary key and two indexes was read three times on insert, and
// an update read the old record once more per index.
type keyExtractor struct {
	nums []protowire.Number // the walked top-level fields, one slot each
	wts  []protowire.Type   // the wire type each slot's field must have
	pk   []keyField
	ixs  [][]keyField // parallel to recType.indexes
	// sparse[j] is set for a unique index j with a key field that can be
	// absent: such an index enters no record lacking one (see absent).
	sparse []bool
	// multi[j] is the position of index j's repeated field, -1 when it
	// has none (see appendMulti); names[j] is its name.
	multi []int
	names []string
	// topBytes[j] is the number of index j's repeated field when it is a
	// top-level string or bytes field, which appendMulti walks itself;
	// 0 otherwise.
	topBytes []protowire.Number
}

// keyField is one key component and where to find it.
type keyField struct {
	keyPath
	slot int           // index into nums; -1 reads the path over the whole record
	def  record.Scalar // the value of an absent field
	// pres, set on the fields of unique indexes that can be absent, tells
	// an absent field from one holding its default.
	pres *presence
}

// occurrence is the [start, end) of a walked field's last value in the
// record; start < 0 when the field is absent.
type occurrence struct{ start, end int32 }

func newKeyExtractor(pk []keyPath, indexes []*index) *keyExtractor {
	x := &keyExtractor{}
	x.pk = x.fields(pk)
	x.ixs = make([][]keyField, len(indexes))
	x.sparse = make([]bool, len(indexes))
	x.multi = make([]int, len(indexes))
	x.names = make([]string, len(indexes))
	x.topBytes = make([]protowire.Number, len(indexes))
	for i, ix := range indexes {
		x.ixs[i] = x.fields(ix.paths)
		x.multi[i], x.names[i] = ix.ix.RepeatedField(), ix.ix.Name
		x.topBytes[i] = topBytesField(x.ixs[i], x.multi[i])
		// A repeated field without elements leaves the record out of the
		// index, unique or not: presence plays no part.
		if !ix.ix.Unique || x.multi[i] >= 0 {
			continue
		}
		for k, kf := range ix.ix.Fields {
			if query.CanBeAbsent(kf) {
				x.ixs[i][k].pres = presenceOf(kf)
				x.sparse[i] = true
			}
		}
	}
	return x
}

// topBytesField returns the number of fields[r] when r names a top-level
// repeated string or bytes field, else 0.
func topBytesField(fields []keyField, r int) protowire.Number {
	if r < 0 {
		return 0
	}
	f := &fields[r]
	if nums := f.path.Numbers(); len(nums) == 1 && (f.kind == protoreflect.StringKind || f.kind == protoreflect.BytesKind) {
		return nums[0]
	}
	return 0
}

// fields assigns slots to paths, sharing a slot between paths that read
// the same top-level field.
func (x *keyExtractor) fields(paths []keyPath) []keyField {
	out := make([]keyField, len(paths))
	for i, kp := range paths {
		out[i] = keyField{keyPath: kp, slot: x.slot(kp.path)}
		out[i].def, _, _ = kp.path.Get(nil)
	}
	return out
}

func (x *keyExtractor) slot(p *record.Path) int {
	nums := p.Numbers()
	fd := p.Field()
	if len(nums) != 1 || fd.IsList() || fd.IsMap() {
		return -1
	}
	if od := fd.ContainingOneof(); od != nil && !od.IsSynthetic() {
		return -1
	}
	if _, _, err := p.Get(nil); err != nil {
		return -1 // a path Get refuses keeps its own error
	}
	wt, ok := wireType(fd.Kind())
	if !ok {
		return -1
	}
	for i, n := range x.nums {
		if n == nums[0] {
			return i
		}
	}
	x.nums = append(x.nums, nums[0])
	x.wts = append(x.wts, wt)
	return len(x.nums) - 1
}

// locate walks b once and returns, in occ (reused), where each slot's field
// last occurs. On a record it cannot walk it returns nil: the append
// methods then read every path over the whole record.
func (x *keyExtractor) locate(b []byte, occ []occurrence) []occurrence {
	occ = occ[:0]
	for range x.nums {
		occ = append(occ, occurrence{start: -1})
	}
	for i := 0; i < len(b); {
		num, wt, one := oneByteTag(b[i])
		n := 1
		if !one {
			if num, wt, n = fieldTag(b[i:]); n < 0 {
				return nil
			}
		}
		m := valueLen(num, wt, b[i+n:])
		if m < 0 {
			return nil
		}
		for s, want := range x.nums {
			if want == num {
				if wt != x.wts[s] {
					return nil
				}
				occ[s] = occurrence{start: int32(i + n), end: int32(i + n + m)}
				break
			}
		}
		i += n + m
	}
	return occ
}

// fieldTag reads the field tag at the start of b as record.Path does: its
// number, wire type and length, or n < 0 when it is not a valid tag (a
// number past protowire.MaxValidNumber included). The walks take a
// one-byte tag, the usual case, inline (see oneByteTag) and call it for
// the others.
func fieldTag(b []byte) (num protowire.Number, wt protowire.Type, n int) {
	if num, wt, n = protowire.ConsumeTag(b); num > protowire.MaxValidNumber {
		n = -1
	}
	return num, wt, n
}

// oneByteTag reports whether c is a whole valid tag, and its number and
// wire type. Each walk tests it inline and calls fieldTag only when it is
// not: one helper reading the whole field is past the inliner's budget,
// and its call per field made BenchmarkAppendMulti 5–10 % slower.
func oneByteTag(c byte) (protowire.Number, protowire.Type, bool) {
	return protowire.Number(c >> 3), protowire.Type(c & 7), c < 0x80 && c >= 8
}

// valueLen is the length of the field value at the start of b, or < 0 when
// it does not parse; the common short shapes are taken inline.
func valueLen(num protowire.Number, wt protowire.Type, b []byte) int {
	switch {
	case wt == protowire.VarintType && len(b) > 0 && b[0] < 0x80:
		return 1
	case wt == protowire.BytesType && len(b) > 0 && b[0] < 0x80 && int(b[0]) < len(b):
		return 1 + int(b[0])
	case wt == protowire.Fixed64Type && len(b) >= 8:
		return 8
	case wt == protowire.Fixed32Type && len(b) >= 4:
		return 4
	}
	return protowire.ConsumeFieldValue(num, wt, b)
}

// appendPK appends the primary-key encoding of b; occ is locate's result
// for b. On error it names the field.
func (x *keyExtractor) appendPK(dst, b []byte, occ []occurrence) ([]byte, string, error) {
	return appendFields(dst, b, occ, x.pk)
}

// appendIndex appends the index-key encoding of b for the j-th maintained
// index.
func (x *keyExtractor) appendIndex(dst, b []byte, occ []occurrence, j int) ([]byte, string, error) {
	return appendFields(dst, b, occ, x.ixs[j])
}

// absent reports whether record b lacks a key field of the unique index j
// that can be absent; occ is locate's result for b, or nil to read every
// field over the whole record. Such a record has no entry in the index:
// the rule of unique indexes and absent values (docs/design.md), as SQL
// leaves NULL out of UNIQUE. Any number of records may lack the field.
func (x *keyExtractor) absent(b []byte, occ []occurrence, j int) (bool, error) {
	if !x.sparse[j] {
		return false, nil
	}
	for i := range x.ixs[j] {
		f := &x.ixs[j][i]
		if f.pres == nil {
			continue
		}
		var found bool
		if f.slot >= 0 && occ != nil {
			found = occ[f.slot].start >= 0
		} else {
			var err error
			if _, found, err = f.path.Get(b); err != nil {
				return false, err
			}
		}
		if found {
			continue // a present leaf lies in present messages
		}
		if f.pres.leaf {
			return true, nil
		}
		// A field without presence in a message that is present holds
		// its default; in one that is absent, it is absent.
		ok, err := reached(b, f.pres.parents)
		if err != nil {
			return false, err
		}
		if !ok {
			return true, nil
		}
	}
	return false, nil
}

// presence is what tells that a key field that can be absent is absent.
type presence struct {
	leaf    bool          // the field itself has presence
	parents []parentField // the message fields along its path
}

// parentField is a message field on a key path.
type parentField struct {
	num protowire.Number
	// oneof lists the other members of its oneof: a later one clears it.
	oneof []protowire.Number
}

func presenceOf(kf schema.KeyField) *presence {
	n := len(kf.Fields)
	p := &presence{leaf: kf.Fields[n-1].HasPresence()}
	for _, fd := range kf.Fields[:n-1] {
		pf := parentField{num: fd.Number()}
		if od := fd.ContainingOneof(); od != nil && !od.IsSynthetic() {
			for i := 0; i < od.Fields().Len(); i++ {
				if m := od.Fields().Get(i).Number(); m != pf.num {
					pf.oneof = append(pf.oneof, m)
				}
			}
		}
		p.parents = append(p.parents, pf)
	}
	return p
}

// reached reports whether every message field of parents is present in b,
// the first in b, each next in the merge of the previous one's occurrences
// (a message that occurs several times is their concatenation, and a later
// member of its oneof clears it), as a protobuf decoder would see them.
func reached(b []byte, parents []parentField) (bool, error) {
	segs := [][]byte{b}
	for _, pf := range parents {
		var next [][]byte
		seen := false
		for _, s := range segs {
			for len(s) > 0 {
				num, wt, n := protowire.ConsumeTag(s)
				if n < 0 {
					return false, protowire.ParseError(n)
				}
				s = s[n:]
				m := protowire.ConsumeFieldValue(num, wt, s)
				if m < 0 {
					return false, protowire.ParseError(m)
				}
				switch {
				case num == pf.num && wt == protowire.BytesType:
					v, _ := protowire.ConsumeBytes(s)
					next, seen = append(next, v), true
				case num == pf.num && wt == protowire.StartGroupType:
					next, seen = append(next, s[:m-protowire.SizeTag(num)]), true
				case slices.Contains(pf.oneof, num):
					next, seen = next[:0], false
				}
				s = s[m:]
			}
		}
		if !seen {
			return false, nil
		}
		segs = next
	}
	return true, nil
}

func appendFields(dst, b []byte, occ []occurrence, fields []keyField) ([]byte, string, error) {
	for i := range fields {
		f := &fields[i]
		v, ok := f.def, f.slot >= 0 && occ != nil
		if ok {
			if o := occ[f.slot]; o.start >= 0 {
				v, ok = decodeValue(f.kind, b[o.start:o.end])
			}
		}
		if !ok {
			var err error
			if v, _, err = f.path.Get(b); err != nil {
				return dst, f.path.String(), err
			}
		}
		dst = appendScalar(dst, f.kind, v)
	}
	return dst, "", nil
}

// decodeValue decodes one value of a scalar kind, converting as the Go
// runtime (and record.Path.Get) does: 32-bit kinds truncate, int32 and
// enums sign-extend. It reports false when b does not hold one.
func decodeValue(k protoreflect.Kind, b []byte) (record.Scalar, bool) {
	v := record.Scalar{Kind: k}
	switch k {
	case protoreflect.StringKind, protoreflect.BytesKind:
		x, n := protowire.ConsumeBytes(b)
		v.Bytes = x[:len(x):len(x)]
		return v, n >= 0
	case protoreflect.Fixed32Kind, protoreflect.Sfixed32Kind, protoreflect.FloatKind:
		x, n := protowire.ConsumeFixed32(b)
		switch k {
		case protoreflect.Fixed32Kind:
			v.Uint = uint64(x)
		case protoreflect.Sfixed32Kind:
			v.Int = int64(int32(x))
		default:
			v.Float = float64(math.Float32frombits(x))
		}
		return v, n >= 0
	case protoreflect.Fixed64Kind, protoreflect.Sfixed64Kind, protoreflect.DoubleKind:
		x, n := protowire.ConsumeFixed64(b)
		switch k {
		case protoreflect.Fixed64Kind:
			v.Uint = x
		case protoreflect.Sfixed64Kind:
			v.Int = int64(x)
		default:
			v.Float = math.Float64frombits(x)
		}
		return v, n >= 0
	}
	x, n := protowire.ConsumeVarint(b)
	switch k {
	case protoreflect.Int32Kind, protoreflect.EnumKind:
		v.Int = int64(int32(x))
	case protoreflect.Int64Kind:
		v.Int = int64(x)
	case protoreflect.Sint32Kind:
		v.Int = int64(int32(protowire.DecodeZigZag(x & math.MaxUint32)))
	case protoreflect.Sint64Kind:
		v.Int = protowire.DecodeZigZag(x)
	case protoreflect.Uint32Kind:
		v.Uint = uint64(uint32(x))
	case protoreflect.Uint64Kind:
		v.Uint = x
	case protoreflect.BoolKind:
		v.Bool = x != 0
	default:
		return v, false
	}
	return v, n >= 0
}

// wireType is the wire type of an unpacked value of a scalar kind.
func wireType(k protoreflect.Kind) (protowire.Type, bool) {
	switch k {
	case protoreflect.BoolKind, protoreflect.EnumKind, protoreflect.Int32Kind,
		protoreflect.Int64Kind, protoreflect.Sint32Kind, protoreflect.Sint64Kind,
		protoreflect.Uint32Kind, protoreflect.Uint64Kind:
		return protowire.VarintType, true
	case protoreflect.Fixed32Kind, protoreflect.Sfixed32Kind, protoreflect.FloatKind:
		return protowire.Fixed32Type, true
	case protoreflect.Fixed64Kind, protoreflect.Sfixed64Kind, protoreflect.DoubleKind:
		return protowire.Fixed64Type, true
	case protoreflect.StringKind, protoreflect.BytesKind:
		return protowire.BytesType, true
	}
	return 0, false
}

// skips reports whether ix, a maintained index of t, has no entry for
// record b: a unique index and an absent field (see keyExtractor.absent).
// It reads every field over the whole record, so the builder and the
// checker do not share the writer's walk.
func (t *recType) skips(ix *index, b []byte) (bool, error) {
	for j, x := range t.indexes {
		if x == ix {
			return t.keys.absent(b, nil, j)
		}
	}
	return false, nil
}
