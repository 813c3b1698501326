package schema

import (
	"fmt"

	"google.golang.org/protobuf/reflect/protoreflect"
)

// typeCmp is the comparison of the old and new versions of one message or
// enum type. It does not depend on the record type that reaches it, so a
// plan builds it once: a chain of n message types, each using the one
// before, costs n comparisons, not n²/2.
type typeCmp struct {
	// prefix qualifies the changes when the type is reached from another
	// ("message shop.Address: "); enum changes carry their own.
	prefix  string
	changes []fieldChange
	// nested are the types the fields hold, compared.
	nested []*typeCmp

	// reach memoizes every type reachable from this one, itself included,
	// that has changes, in the order they are reported.
	reach   []*typeCmp
	reached bool
}

// fieldChange is a change of a type. A change of what a field's stored
// bytes decode to (meaning) is breaking only for a key field of the record
// type that reaches it; others are breaking or not for every record type.
type fieldChange struct {
	change
	meaning bool
	field   fieldID
}

// compareMessage returns the comparison of two messages of the same full
// name.
func (p *planner) compareMessage(om, nm protoreflect.MessageDescriptor) *typeCmp {
	if c, ok := p.cmps[om.FullName()]; ok {
		return c
	}
	c := &typeCmp{prefix: fmt.Sprintf("message %s: ", om.FullName())}
	p.cmps[om.FullName()] = c // before recursing: message types may be recursive
	if om.ParentFile().Path() == nm.ParentFile().Path() && p.unchanged(nm.ParentFile()) {
		return c // the same source: nothing reachable changed
	}
	add := func(breaking bool, text, hint string) {
		c.changes = append(c.changes, fieldChange{change: change{text, breaking, hint}})
	}
	for _, of := range sortedFields(om) {
		nf := nm.Fields().ByNumber(of.Number())
		if nf == nil {
			if moved := nm.Fields().ByName(of.Name()); moved != nil {
				add(true, fmt.Sprintf("field %s: number changed from %d to %d", of.Name(), of.Number(), moved.Number()), "")
				continue
			}
			if nm.ReservedRanges().Has(of.Number()) {
				add(false, fmt.Sprintf("field %s (%d) removed (number reserved)", of.Name(), of.Number()), "")
				continue
			}
			add(true, fmt.Sprintf("field %s (%d) removed", of.Name(), of.Number()),
				fmt.Sprintf(" (to remove a field of stored records, reserve its number: \"reserved %d;\")", of.Number()))
			continue
		}
		if ot, nt := fieldType(of), fieldType(nf); ot != nt {
			add(true, fmt.Sprintf("field %s (%d) changed from %s to %s", of.Name(), of.Number(), ot, nt), "")
			continue
		}
		if of.Name() != nf.Name() {
			add(false, fmt.Sprintf("field %s (%d) renamed to %s", of.Name(), of.Number(), nf.Name()), "")
		}
		for _, text := range meaningChanges(om, of, nf) {
			c.changes = append(c.changes, fieldChange{change: change{text: text}, meaning: true, field: idOf(of)})
		}
		// Same type name: compare the types themselves.
		if om, nm := fieldMessage(of), fieldMessage(nf); om != nil && nm != nil {
			c.nested = append(c.nested, p.compareMessage(om, nm))
		}
		if oe, ne := fieldEnum(of), fieldEnum(nf); oe != nil && ne != nil {
			c.nested = append(c.nested, p.compareEnum(oe, ne))
		}
	}
	for _, nf := range sortedFields(nm) {
		if om.Fields().ByNumber(nf.Number()) != nil {
			continue
		}
		if of := om.Fields().ByName(nf.Name()); of != nil && nm.Fields().ByNumber(of.Number()) == nil {
			continue // reported as a number change
		}
		add(false, fmt.Sprintf("field %s (%d) added", nf.Name(), nf.Number()), "")
	}
	return c
}

// compareEnum returns the comparison of two enums of the same full name.
func (p *planner) compareEnum(oe, ne protoreflect.EnumDescriptor) *typeCmp {
	if c, ok := p.cmps[oe.FullName()]; ok {
		return c
	}
	c := &typeCmp{}
	p.cmps[oe.FullName()] = c
	if oe.ParentFile().Path() == ne.ParentFile().Path() && p.unchanged(ne.ParentFile()) {
		return c
	}
	for _, text := range enumChanges(oe, ne) {
		c.changes = append(c.changes, fieldChange{change: change{text: text}})
	}
	return c
}

// reachable returns c.reach, computing it once. onPath holds the types
// being visited: a type met again on the path is left to its first visit,
// and the lists computed meanwhile are incomplete and not memoized (only
// recursive message types have such cycles).
func (c *typeCmp) reachable(onPath map[*typeCmp]bool) (out []*typeCmp, complete bool) {
	if c.reached {
		return c.reach, true
	}
	if onPath[c] {
		return nil, false
	}
	onPath[c] = true
	defer delete(onPath, c)
	complete = true
	if len(c.changes) > 0 {
		out = append(out, c)
	}
	seen := map[*typeCmp]bool{c: true}
	for _, n := range c.nested {
		sub, ok := n.reachable(onPath)
		complete = complete && ok
		for _, s := range sub {
			if !seen[s] {
				seen[s] = true
				out = append(out, s)
			}
		}
	}
	if complete {
		c.reach, c.reached = out, true
	}
	return out, complete
}

// collect adds to d the changes of a record type's message and of every
// type it reaches. A change of meaning is breaking when its field is one of
// d's key fields.
func (p *planner) collect(d *differ, om, nm protoreflect.MessageDescriptor) {
	root := p.compareMessage(om, nm)
	list, _ := root.reachable(map[*typeCmp]bool{})
	for _, c := range list {
		prefix := c.prefix
		if c == root {
			prefix = ""
		}
		for _, fc := range c.changes {
			if !fc.meaning {
				d.addHint(fc.breaking, prefix+fc.text, fc.hint)
				continue
			}
			if use, key := d.keyFields[fc.field]; key {
				d.addHint(true, prefix+fc.text, fmt.Sprintf(" (the field is in the %s: the keys already stored would no longer match the records; add a new field instead)", use))
			} else {
				d.add(false, prefix+fc.text)
			}
		}
	}
}
