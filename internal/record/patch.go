package record

import (
	"fmt"
	"slices"
	"strings"
	"sync"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// A patch changes some fields of a stored record and keeps everything else
// it holds, unknown fields included, without decoding it. It names field
// paths, dotted through singular message fields: each path in fields takes
// the value the patch's record holds there (a field the record lacks is
// cleared; a repeated or map field is replaced whole), each path in add
// has the record's value added to the stored one (an absent value, on
// either side, counts as 0).
//
// Apply works on the wire bytes. At each message level it walks the stored
// bytes and the record's once to find the occurrences of the named fields,
// copies the stored bytes without the occurrences it replaces, and appends
// the new ones:
//
//   - a field in fields: the record's occurrences, verbatim;
//   - a field in add: the sum, encoded as proto.Marshal would;
//   - a message field a longer path goes through: the stored occurrences
//     merged (concatenated, which is what a decoder does with them) and
//     then the record's, patched by the level below and re-encoded with
//     their new length.
//
// The result decodes to what the same patch does on decoded messages
// (the fuzz test's oracle): a set field takes the record's value or is
// cleared; a message a path goes through is created when the record holds
// it, patched in place when only the stored record does, and left absent
// when neither does; an add whose field neither side holds writes nothing.
// Members of one oneof are decided together: the member the record holds,
// when the patch names it, wins and every stored member is cut; otherwise a
// named member the stored record holds is cleared (fields), kept (add) or
// patched in place (a longer path); a oneof whose live members are not
// named is left as it is.
//
// Rejected: decoding the stored record with dynamicpb, applying the patch
// with protoreflect and marshalling it again costs a full decode and encode
// per patched record, allocates per field, and drops nothing but re-orders
// everything; the wire patch copies the untouched bytes as they are.

// Patch is a compiled patch of one record type. It is immutable and safe
// for concurrent use.
type Patch struct {
	root *patchNode
	// entries and groups count the per-Apply state slots of every node.
	entries, groups int
	pool            sync.Pool // *patchState
}

// patchOp is what a patch does to one field at one message level.
type patchOp uint8

const (
	patchSet   patchOp = iota + 1 // take the record's occurrences
	patchAdd                      // add the record's value to the stored one
	patchInner                    // patch inside the message (a longer path)
)

// patchEntry is one field a patch names at one message level.
type patchEntry struct {
	step
	path     string // the patch's path up to this field, for errors
	op       patchOp
	group    int  // index into patchNode.groups; -1 outside a oneof
	presence bool // the field tracks presence (an explicit zero is a value)
	required bool
	child    *patchNode // patchInner
	state    int        // index into patchState.entries
}

// patchGroup is a oneof with named members at one message level.
type patchGroup struct {
	od    protoreflect.OneofDescriptor
	state int // index into patchState.groups
}

// patchNode is one message level of a patch: the fields it names there
// (by field number) and the oneofs they belong to.
type patchNode struct {
	entries []patchEntry
	groups  []patchGroup
	dense   []patchSlot // by field number, up to denseLimit
	sparse  map[protowire.Number]patchSlot
}

// patchSlot says what a field number is to a node: a named entry and/or a
// member of a oneof with named members, each as index+1 (0 for none).
type patchSlot struct{ entry, group int16 }

// PatchError is a patch that cannot be compiled, or that cannot apply to a
// stored record: Field is the patch's path to blame.
type PatchError struct {
	Field  string
	Reason string
	// Overflow reports an add whose sum does not fit the field's type.
	Overflow bool
}

func (e *PatchError) Error() string {
	if e.Field == "" {
		return "record: patch: " + e.Reason
	}
	return "record: patch: field " + e.Field + ": " + e.Reason
}

// maxPatchFields bounds the paths of one patch: a slot index is an int16.
const maxPatchFields = 4096

// CompilePatch compiles a patch of t's records: fields are the paths a
// patched record sets, add the numeric fields whose values it adds, key the
// primary key's paths, which no patch may change. A patch naming no field,
// a path that is not a field or goes through a repeated or map field, add
// on a field that is not a singular number, a path named twice, in both
// lists or inside another one, and a path holding a key field are refused
// with a *PatchError naming the path.
func (t *Type) CompilePatch(fields, add, key []string) (*Patch, error) {
	if len(fields)+len(add) == 0 {
		return nil, &PatchError{Reason: "the patch names no field: give fields to set or add"}
	}
	if len(fields)+len(add) > maxPatchFields {
		return nil, &PatchError{Reason: fmt.Sprintf("the patch names %d fields, more than %d", len(fields)+len(add), maxPatchFields)}
	}
	c := patchCompiler{t: t, root: &patchNode{}, key: key, seen: make(map[string]patchOp, len(fields)+len(add))}
	for _, f := range fields {
		if err := c.add(f, patchSet); err != nil {
			return nil, err
		}
	}
	for _, f := range add {
		if err := c.add(f, patchAdd); err != nil {
			return nil, err
		}
	}
	p := &Patch{root: c.root}
	p.root.finish(&p.entries, &p.groups)
	p.pool.New = func() any {
		return &patchState{entries: make([]entryState, p.entries), groups: make([]groupState, p.groups)}
	}
	return p, nil
}

type patchCompiler struct {
	t    *Type
	root *patchNode
	key  []string
	seen map[string]patchOp
}

// add compiles one path and enters it into the tree.
func (c *patchCompiler) add(path string, op patchOp) error {
	if prev, ok := c.seen[path]; ok {
		if prev != op {
			return &PatchError{Field: path, Reason: "named in both fields and add"}
		}
		return &PatchError{Field: path, Reason: "named twice"}
	}
	c.seen[path] = op
	fds, err := c.resolve(path, op)
	if err != nil {
		return err
	}
	for _, k := range c.key {
		if k == path || strings.HasPrefix(k, path+".") {
			return &PatchError{Field: path, Reason: "holds the primary key (" + k + "): a patch cannot change a record's key"}
		}
	}
	n := c.root
	for i, fd := range fds {
		last := i == len(fds)-1
		at := -1
		for j := range n.entries {
			if n.entries[j].num == fd.Number() {
				at = j
			}
		}
		prefix := strings.Join(strings.Split(path, ".")[:i+1], ".")
		switch {
		case at >= 0 && last:
			return &PatchError{Field: path, Reason: "holds fields the patch also names"}
		case at >= 0 && n.entries[at].op != patchInner:
			return &PatchError{Field: path, Reason: "inside " + prefix + ", which the patch also names"}
		case at < 0 && last:
			n.entries = append(n.entries, newEntry(fd, prefix, op))
			return nil
		case at < 0:
			e := newEntry(fd, prefix, patchInner)
			e.child = &patchNode{}
			n.entries = append(n.entries, e)
			at = len(n.entries) - 1
		}
		n = n.entries[at].child
	}
	return nil
}

// resolve returns the fields along path, checking that it goes through
// singular message fields and, for add, ends at a singular number.
func (c *patchCompiler) resolve(path string, op patchOp) ([]protoreflect.FieldDescriptor, error) {
	names := strings.Split(path, ".")
	fds := make([]protoreflect.FieldDescriptor, 0, len(names))
	md := c.t.md
	for i, name := range names {
		if name == "" {
			return nil, &PatchError{Field: path, Reason: "empty path segment"}
		}
		if md == nil {
			prev := fds[i-1]
			return nil, &PatchError{Field: path, Reason: fmt.Sprintf("field %q is a %v, not a message: it has no field %q", prev.Name(), prev.Kind(), name)}
		}
		fd := md.Fields().ByName(protoreflect.Name(name))
		if fd == nil {
			return nil, &PatchError{Field: path, Reason: fmt.Sprintf("message %s has no field %q", md.FullName(), name)}
		}
		if i < len(names)-1 && (fd.IsList() || fd.IsMap()) {
			what := "repeated"
			if fd.IsMap() {
				what = "a map"
			}
			return nil, &PatchError{Field: path, Reason: fmt.Sprintf("field %q is %s: a patch path goes through singular message fields only", name, what)}
		}
		fds = append(fds, fd)
		md = fd.Message()
	}
	if last := fds[len(fds)-1]; op == patchAdd {
		switch {
		case last.IsList() || last.IsMap():
			return nil, &PatchError{Field: path, Reason: "add takes a singular numeric field; this one is repeated"}
		case !numericKind(last.Kind()):
			return nil, &PatchError{Field: path, Reason: fmt.Sprintf("add takes a numeric field; this one is a %v", last.Kind())}
		}
	}
	return fds, nil
}

func newEntry(fd protoreflect.FieldDescriptor, path string, op patchOp) patchEntry {
	e := patchEntry{
		step:     step{num: fd.Number(), name: string(fd.Name()), fd: fd, kind: fd.Kind(), repeated: fd.IsList()},
		path:     path,
		op:       op,
		group:    -1,
		presence: fd.HasPresence(),
		required: fd.Cardinality() == protoreflect.Required,
	}
	e.class, e.wt = classOf(e.kind)
	return e
}

// numericKind reports whether add takes fields of kind k.
func numericKind(k protoreflect.Kind) bool {
	switch k {
	case protoreflect.Int32Kind, protoreflect.Int64Kind, protoreflect.Uint32Kind, protoreflect.Uint64Kind,
		protoreflect.Sint32Kind, protoreflect.Sint64Kind, protoreflect.Fixed32Kind, protoreflect.Fixed64Kind,
		protoreflect.Sfixed32Kind, protoreflect.Sfixed64Kind, protoreflect.FloatKind, protoreflect.DoubleKind:
		return true
	}
	return false
}

// finish orders the node's entries by number, finds their oneofs, builds
// the number tables and hands out state slots, for the node and the nodes
// below it.
func (n *patchNode) finish(entries, groups *int) {
	slices.SortFunc(n.entries, func(a, b patchEntry) int { return int(a.num) - int(b.num) })
	for i := range n.entries {
		e := &n.entries[i]
		e.state = *entries
		*entries++
		od := e.fd.ContainingOneof()
		if od == nil || od.IsSynthetic() {
			continue
		}
		e.group = slices.IndexFunc(n.groups, func(g patchGroup) bool { return g.od == od })
		if e.group < 0 {
			e.group = len(n.groups)
			n.groups = append(n.groups, patchGroup{od: od, state: *groups})
			*groups++
		}
	}
	for g := range n.groups {
		fs := n.groups[g].od.Fields()
		for i := 0; i < fs.Len(); i++ {
			sl := n.slot(fs.Get(i).Number())
			sl.group = int16(g + 1)
			n.setSlot(fs.Get(i).Number(), sl)
		}
	}
	for i := range n.entries {
		sl := n.slot(n.entries[i].num)
		sl.entry = int16(i + 1)
		n.setSlot(n.entries[i].num, sl)
		if c := n.entries[i].child; c != nil {
			c.finish(entries, groups)
		}
	}
}

// slot returns what field number num is to the node.
func (n *patchNode) slot(num protowire.Number) patchSlot {
	if int(num) < len(n.dense) {
		return n.dense[num]
	}
	return n.sparse[num]
}

func (n *patchNode) setSlot(num protowire.Number, sl patchSlot) {
	if num > denseLimit {
		if n.sparse == nil {
			n.sparse = make(map[protowire.Number]patchSlot)
		}
		n.sparse[num] = sl
		return
	}
	if int(num) >= len(n.dense) {
		n.dense = append(n.dense, make([]patchSlot, int(num)+1-len(n.dense))...)
	}
	n.dense[num] = sl
}
