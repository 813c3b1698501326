package schema

import (
	"fmt"
	"strconv"

	"google.golang.org/protobuf/reflect/protoreflect"
)

// meaningChanges compares how stored bytes of a field decode under its old
// and new declaration (same number, same type): its default value
// (explicit, or an enum's first value), whether it has presence, the oneof
// it belongs to and whether its enum is closed. Each difference is a
// change; collect makes it breaking when the field is part of a stored key
// (a primary key or a kept index), because the keys already stored were
// computed under the old meaning and would no longer match the records
// (reads by index and by scan would disagree, a record could not be
// removed, a second record with the same key could be inserted).
func meaningChanges(om protoreflect.MessageDescriptor, of, nf protoreflect.FieldDescriptor) []string {
	name := fmt.Sprintf("field %s (%d)", nf.Name(), nf.Number())
	var diffs []string
	if o, n := defaultText(of), defaultText(nf); o != n {
		diffs = append(diffs, fmt.Sprintf("%s default changed from %s to %s", name, o, n))
	}
	if o, n := of.HasPresence(), nf.HasPresence(); o != n {
		diffs = append(diffs, fmt.Sprintf("%s presence changed from %s to %s", name, presence(o), presence(n)))
	}
	oo, no := realOneof(of), realOneof(nf)
	switch {
	case oo == nil && no != nil:
		diffs = append(diffs, fmt.Sprintf("%s moved into oneof %s", name, no.Name()))
	case oo != nil && no == nil:
		diffs = append(diffs, fmt.Sprintf("%s moved out of oneof %s", name, oo.Name()))
	case oo != nil && no != nil && !sameMembers(om, oo, no):
		diffs = append(diffs, fmt.Sprintf("%s is in oneof %s, whose fields changed", name, no.Name()))
	}
	if oe, ne := fieldEnum(of), fieldEnum(nf); oe != nil && ne != nil && oe.IsClosed() != ne.IsClosed() {
		diffs = append(diffs, fmt.Sprintf("%s enum %s changed from %s to %s", name, ne.FullName(), closedness(oe.IsClosed()), closedness(ne.IsClosed())))
	}
	return diffs
}

// enumChanges lists the changes of an enum type used by a field: values
// added, removed or renamed, and a different first value. The first value
// is the default of the fields without an explicit default; meaningChanges
// reports the effect on each field.
func enumChanges(oe, ne protoreflect.EnumDescriptor) []string {
	var out []string
	prefix := fmt.Sprintf("enum %s: ", oe.FullName())
	ovs, nvs := oe.Values(), ne.Values()
	if ovs.Len() > 0 && nvs.Len() > 0 && ovs.Get(0).Number() != nvs.Get(0).Number() {
		out = append(out, fmt.Sprintf("%sfirst value (the default) changed from %s to %s", prefix, ovs.Get(0).Name(), nvs.Get(0).Name()))
	}
	for i := 0; i < ovs.Len(); i++ {
		ov := ovs.Get(i)
		switch nv := nvs.ByNumber(ov.Number()); {
		case nv == nil:
			out = append(out, fmt.Sprintf("%svalue %s (%d) removed", prefix, ov.Name(), ov.Number()))
		case nv.Name() != ov.Name() && nvs.ByName(ov.Name()) == nil:
			out = append(out, fmt.Sprintf("%svalue %s (%d) renamed to %s", prefix, ov.Name(), ov.Number(), nv.Name()))
		}
	}
	for i := 0; i < nvs.Len(); i++ {
		if nv := nvs.Get(i); ovs.ByNumber(nv.Number()) == nil {
			out = append(out, fmt.Sprintf("%svalue %s (%d) added", prefix, nv.Name(), nv.Number()))
		}
	}
	return out
}

// defaultText is the value a field decodes to when absent, as written in
// .proto source.
func defaultText(f protoreflect.FieldDescriptor) string {
	if f.Cardinality() == protoreflect.Repeated || f.Message() != nil {
		return ""
	}
	if ev := f.DefaultEnumValue(); ev != nil {
		return string(ev.Name())
	}
	v := f.Default()
	switch f.Kind() {
	case protoreflect.StringKind:
		return strconv.Quote(v.String())
	case protoreflect.BytesKind:
		return strconv.Quote(string(v.Bytes()))
	case protoreflect.EnumKind:
		if ev := f.Enum().Values().ByNumber(v.Enum()); ev != nil {
			return string(ev.Name())
		}
		return strconv.Itoa(int(v.Enum()))
	}
	return fmt.Sprint(v.Interface())
}

// realOneof is the oneof a field belongs to, ignoring the synthetic oneof of
// a proto3 optional field (its presence is compared on its own).
func realOneof(f protoreflect.FieldDescriptor) protoreflect.OneofDescriptor {
	if o := f.ContainingOneof(); o != nil && !o.IsSynthetic() {
		return o
	}
	return nil
}

// sameMembers reports whether the old oneof oo of message om and the new
// oneof no hold the same fields of om: a field joining or leaving a oneof
// changes what its other fields decode to (the last one on the wire wins).
// A field new to the message may join: no stored record holds it.
func sameMembers(om protoreflect.MessageDescriptor, oo, no protoreflect.OneofDescriptor) bool {
	for i := 0; i < oo.Fields().Len(); i++ {
		if no.Fields().ByNumber(oo.Fields().Get(i).Number()) == nil {
			return false
		}
	}
	for i := 0; i < no.Fields().Len(); i++ {
		n := no.Fields().Get(i).Number()
		if om.Fields().ByNumber(n) != nil && oo.Fields().ByNumber(n) == nil {
			return false
		}
	}
	return true
}

func fieldEnum(f protoreflect.FieldDescriptor) protoreflect.EnumDescriptor {
	if f.IsMap() {
		f = f.MapValue()
	}
	return f.Enum()
}

func presence(has bool) string {
	if has {
		return "explicit"
	}
	return "implicit"
}

func closedness(closed bool) string {
	if closed {
		return "closed"
	}
	return "open"
}
