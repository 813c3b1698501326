// Package record owns the wire-level view of stored records: it checks that
// record bytes are a well-formed encoding of a run-time message type and reads
// individual fields out of them, without ever decoding a whole message.
//
// Records are kept exactly as clients sent them, so everything here works on
// raw protobuf wire bytes via protowire. Message types come from .proto source
// compiled at run time, so there are no generated Go types to lean on; instead
// Compile turns a protoreflect.MessageDescriptor into lookup tables that the
// hot paths (Validate, Path.Get) walk without allocating.
package record

import (
	"errors"
	"fmt"
	"strconv"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// MaxDepth bounds message nesting (sub-messages, groups and map entries) that
// Validate accepts. It is far below the Go runtime's limit on purpose: the
// validator recurses on the goroutine stack, and records that nest deeper are
// not something a database schema should produce.
const MaxDepth = 64

// Type is the compiled form of one message type and everything reachable from
// it. It is immutable after Compile and safe for concurrent use.
type Type struct {
	md   protoreflect.MessageDescriptor
	root *msgInfo
}

// Descriptor returns the descriptor the Type was compiled from.
func (t *Type) Descriptor() protoreflect.MessageDescriptor { return t.md }

// wireClass groups field kinds by how their values are laid out on the wire;
// validation only cares about the layout, not the exact kind.
type wireClass uint8

const (
	classVarint wireClass = iota
	classFixed32
	classFixed64
	classString
	classBytes
	classMessage
	classGroup
)

// fieldInfo is the validation view of one declared field.
type fieldInfo struct {
	num    protowire.Number
	name   string
	class  wireClass
	wt     protowire.Type // wire type of one unpacked value
	packed bool           // repeated scalar that may also arrive packed
	// reqBit is the index of the field in its message's required set, or -1.
	reqBit int
	msg    *msgInfo // for classMessage and classGroup
}

// msgInfo is the validation view of one message type. Field lookup by number
// is an array index for the common small numbers, so the hot loop neither
// hashes nor allocates; only numbers beyond denseLimit fall back to a map.
type msgInfo struct {
	md     protoreflect.MessageDescriptor
	fields []fieldInfo
	dense  []slot // indexed by field number
	sparse map[protowire.Number]slot
	// required lists the fields that must be present, indexed by reqBit.
	required []*fieldInfo
}

// slot is the part of a fieldInfo the validation loop needs for every tag,
// packed into 8 bytes so that checking a scalar touches one small table entry
// instead of the full fieldInfo.
type slot struct {
	idx    int32 // index+1 into msgInfo.fields; 0 means undeclared
	wt     protowire.Type
	class  wireClass
	packed bool
	req    bool
}

// denseLimit caps the direct-index table so a message with a single huge
// field number does not cost megabytes.
const denseLimit = 1024

func (m *msgInfo) lookup(num protowire.Number) *fieldInfo {
	var s slot
	if uint64(num) < uint64(len(m.dense)) {
		s = m.dense[num]
	} else {
		s = m.sparse[num]
	}
	if s.idx == 0 {
		return nil
	}
	return &m.fields[s.idx-1]
}

// Compile builds validation tables for md and every message type reachable
// from it. Recursive types share one table per message, so compilation
// terminates and the tables form a graph rather than a tree.
func Compile(md protoreflect.MessageDescriptor) (*Type, error) {
	if md == nil {
		return nil, errors.New("record: nil message descriptor")
	}
	c := compiler{seen: make(map[protoreflect.FullName]*msgInfo)}
	root := c.message(md)
	c.finishMapEntries()
	for _, m := range c.seen {
		m.buildSlots()
	}
	return &Type{md: md, root: root}, nil
}

type compiler struct {
	seen map[protoreflect.FullName]*msgInfo
}

func (c *compiler) message(md protoreflect.MessageDescriptor) *msgInfo {
	if m, ok := c.seen[md.FullName()]; ok {
		return m
	}
	// Register before descending so that a recursive reference finds this
	// (still incomplete) table instead of recursing forever.
	m := &msgInfo{md: md}
	c.seen[md.FullName()] = m

	fds := md.Fields()
	m.fields = make([]fieldInfo, fds.Len())
	for i := range m.fields {
		fd := fds.Get(i)
		f := &m.fields[i]
		f.num = fd.Number()
		f.name = string(fd.Name())
		f.reqBit = -1
		f.class, f.wt = classOf(fd.Kind())
		if f.class == classMessage || f.class == classGroup {
			f.msg = c.message(fd.Message())
		}
		if fd.IsList() && f.class <= classFixed64 {
			f.packed = true
		}
		if fd.Cardinality() == protoreflect.Required {
			f.reqBit = len(m.required)
			m.required = append(m.required, f)
		}
	}
	return m
}

// buildSlots fills the number-indexed tables once every field's flags are
// final.
func (m *msgInfo) buildSlots() {
	maxDense := protowire.Number(0)
	for i := range m.fields {
		if num := m.fields[i].num; num <= denseLimit && num > maxDense {
			maxDense = num
		}
	}
	m.dense = make([]slot, maxDense+1)
	for i := range m.fields {
		f := &m.fields[i]
		s := slot{idx: int32(i + 1), wt: f.wt, class: f.class, packed: f.packed, req: f.reqBit >= 0}
		if f.num <= denseLimit {
			m.dense[f.num] = s
			continue
		}
		if m.sparse == nil {
			m.sparse = make(map[protowire.Number]slot)
		}
		m.sparse[f.num] = s
	}
}

// finishMapEntries runs after the whole graph is compiled: whether a map value
// message has required fields is only known once that message's table is
// complete, which may be later than the entry's own compilation for recursive
// types.
func (c *compiler) finishMapEntries() {
	for _, m := range c.seen {
		if !m.md.IsMapEntry() {
			continue
		}
		var v *fieldInfo
		for i := range m.fields {
			if m.fields[i].num == 2 {
				v = &m.fields[i]
			}
		}
		if v == nil || v.msg == nil || len(v.msg.required) == 0 || v.reqBit >= 0 {
			continue
		}
		// The Go runtime materialises an absent map value as an empty message
		// and then finds its required fields unset, so an entry without a value
		// is only well-formed if the value type has no required fields.
		v.reqBit = len(m.required)
		m.required = append(m.required, v)
	}
}

func classOf(k protoreflect.Kind) (wireClass, protowire.Type) {
	switch k {
	case protoreflect.Fixed32Kind, protoreflect.Sfixed32Kind, protoreflect.FloatKind:
		return classFixed32, protowire.Fixed32Type
	case protoreflect.Fixed64Kind, protoreflect.Sfixed64Kind, protoreflect.DoubleKind:
		return classFixed64, protowire.Fixed64Type
	case protoreflect.StringKind:
		return classString, protowire.BytesType
	case protoreflect.BytesKind:
		return classBytes, protowire.BytesType
	case protoreflect.MessageKind:
		return classMessage, protowire.BytesType
	case protoreflect.GroupKind:
		return classGroup, protowire.StartGroupType
	default: // bool, enum and all varint integer kinds
		return classVarint, protowire.VarintType
	}
}

// Error describes why record bytes were rejected or could not be read.
//
// Number is the field number of the offending tag, or 0 when the tag itself
// could not be read. Field is the dotted path of declared field names leading
// to that tag; for an undeclared number it names only the enclosing fields
// ("" at top level). Offset is the byte offset in the top-level record where
// the problem was detected.
type Error struct {
	Field  string
	Number protowire.Number
	Offset int
	Reason string
}

func (e *Error) Error() string {
	s := "record: "
	if e.Field != "" {
		s += "field " + e.Field + ": "
	}
	return s + e.Reason + " at offset " + strconv.Itoa(e.Offset)
}

// within prefixes the field path with the name of the field whose value the
// error was found in; errors are built innermost first as recursion unwinds.
func (e *Error) within(name string) *Error {
	if e.Field == "" {
		e.Field = name
	} else {
		e.Field = name + "." + e.Field
	}
	return e
}

func wireTypeName(t protowire.Type) string {
	switch t {
	case protowire.VarintType:
		return "varint"
	case protowire.Fixed32Type:
		return "fixed32"
	case protowire.Fixed64Type:
		return "fixed64"
	case protowire.BytesType:
		return "bytes"
	case protowire.StartGroupType:
		return "start-group"
	case protowire.EndGroupType:
		return "end-group"
	}
	return strconv.Itoa(int(t))
}

func wireTypeMismatch(got, want protowire.Type) string {
	return fmt.Sprintf("wire type %s, want %s", wireTypeName(got), wireTypeName(want))
}
