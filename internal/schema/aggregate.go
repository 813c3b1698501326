package schema

import (
	"fmt"

	"google.golang.org/protobuf/reflect/protoreflect"

	protobasev1 "github.com/protobase/protobase/gen/protobase/v1"
)

// resolveAggregate validates one aggregate index of the record type md
// (named typ); names holds the index names taken so far. It returns nil
// after reporting what is wrong.
//
// Group fields follow the rules of key fields without repeated ones: an
// aggregation groups by singular scalars, strings, bytes and enums. Sum
// fields are integers or floats, as sum() takes.
func resolveAggregate(md protoreflect.MessageDescriptor, typ protoreflect.FullName, ao *protobasev1.AggregateIndexOptions,
	names map[string]bool, report func(string, ...any)) *Index {
	name := ao.GetName()
	switch {
	case name == "":
		report("aggregate index: name is required")
		return nil
	case !validIndexName(name):
		report("aggregate index %q: name must be letters, digits and underscores, not starting with a digit", name)
		return nil
	case names[name]:
		report("index name %q used twice", name)
		return nil
	}
	names[name] = true
	bad := false
	fail := func(format string, args ...any) {
		bad = true
		report("aggregate index %q: "+format, append([]any{name}, args...)...)
	}
	groups := resolveKey(md, ao.GetGroupBy(), true, func(p string, err error) {
		fail("group_by field %q: %v", p, err)
	}, func(p string) {
		fail("group_by field %q listed twice", p)
	})
	for _, kf := range groups {
		if kf.Repeated {
			fail("group_by field %q is repeated; a record belongs to one group", kf.Path)
		}
	}
	var sums []KeyField
	seen := map[string]bool{}
	for _, p := range ao.GetSum() {
		kf, err := resolvePath(md, p, true)
		switch {
		case err != nil:
			fail("sum field %q: %v", p, err)
			continue
		case kf.Repeated:
			fail("sum field %q is repeated; sum takes one value per record", p)
			continue
		case seen[p]:
			fail("sum field %q listed twice", p)
			continue
		case !summable(kf.Kind):
			fail("sum field %q is a %v; sum takes integers and floats", p, kf.Kind)
			continue
		}
		seen[p] = true
		sums = append(sums, kf)
	}
	if bad {
		return nil
	}
	return &Index{Type: typ, Name: name, Fields: groups, Aggregate: true, Sums: sums}
}

// summable reports whether sum() adds fields of kind k.
func summable(k protoreflect.Kind) bool {
	return k != protoreflect.EnumKind && k != protoreflect.BoolKind && integerKind(k) ||
		k == protoreflect.FloatKind || k == protoreflect.DoubleKind
}

// describeSums is ix's summed field paths, nil for other indexes.
func describeSums(ix *Index) []string {
	if len(ix.Sums) == 0 {
		return nil
	}
	return keyPaths(ix.Sums)
}

// sameSums reports whether two indexes sum the same fields, by number.
func sameSums(a, b *Index) bool {
	return a.Aggregate == b.Aggregate && fmt.Sprint(keyNumbers(a.Sums)) == fmt.Sprint(keyNumbers(b.Sums))
}
