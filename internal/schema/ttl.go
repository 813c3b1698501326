package schema

import (
	"strings"

	"google.golang.org/protobuf/reflect/protoreflect"

	protobasev1 "github.com/protobase/protobase/gen/protobase/v1"
)

// timestampName is the message an expiry field may hold besides an integer.
const timestampName protoreflect.FullName = "google.protobuf.Timestamp"

// TTL is the expiry of a record type: the field holding when a record
// expires. It is immutable.
type TTL struct {
	// Field is the expiry field, a singular field of the record message.
	Field protoreflect.FieldDescriptor
	// Unit is the unit of an integer field; UNSPECIFIED for a Timestamp.
	Unit protobasev1.TTLUnit
}

// Timestamp reports whether the expiry field is a google.protobuf.Timestamp.
func (t *TTL) Timestamp() bool { return t.Field.Message() != nil }

// resolveTTL validates the ttl option of md; report names what is wrong.
// The field is a top-level field so that reading it from stored bytes is one
// field lookup (two for a Timestamp's seconds and nanos).
func resolveTTL(md protoreflect.MessageDescriptor, to *protobasev1.TTLOptions, report func(string, ...any)) *TTL {
	name := to.GetField()
	if name == "" {
		report("ttl: field is required")
		return nil
	}
	if strings.Contains(name, ".") {
		report("ttl: field %q: must be a field of %s itself, not a path", name, md.FullName())
		return nil
	}
	fd := md.Fields().ByName(protoreflect.Name(name))
	if fd == nil {
		report("ttl: field %q: message %s has no such field", name, md.FullName())
		return nil
	}
	if fd.Cardinality() == protoreflect.Repeated {
		report("ttl: field %q is repeated; an expiry is one time", name)
		return nil
	}
	unit := to.GetUnit()
	if _, ok := protobasev1.TTLUnit_name[int32(unit)]; !ok {
		report("ttl: field %q: unknown unit %d", name, unit)
		return nil
	}
	if m := fd.Message(); m != nil {
		if m.FullName() != timestampName {
			report("ttl: field %q is a %s; it must be a %s or an integer", name, m.FullName(), timestampName)
			return nil
		}
		if unit != protobasev1.TTLUnit_TTL_UNIT_UNSPECIFIED {
			report("ttl: field %q is a %s, which carries its own unit; remove unit %s", name, timestampName, unit)
			return nil
		}
		return &TTL{Field: fd}
	}
	if !integerKind(fd.Kind()) {
		report("ttl: field %q is a %v; it must be a %s or an integer", name, fd.Kind(), timestampName)
		return nil
	}
	if unit == protobasev1.TTLUnit_TTL_UNIT_UNSPECIFIED {
		report("ttl: field %q is an integer: unit is required (TTL_UNIT_SECONDS or TTL_UNIT_MILLISECONDS)", name)
		return nil
	}
	return &TTL{Field: fd, Unit: unit}
}

func integerKind(k protoreflect.Kind) bool {
	switch k {
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind,
		protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind,
		protoreflect.Uint32Kind, protoreflect.Fixed32Kind,
		protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		return true
	}
	return false
}

// expiryIndex is the index a ttl option keeps: its entries are ordered by
// expiry (a Timestamp's seconds, then nanos; an integer field's raw value,
// the unit applied when it is read), so the reaper finds the expired
// records as one range.
func expiryIndex(md protoreflect.MessageDescriptor, ttl *TTL) *Index {
	name := string(ttl.Field.Name())
	paths := []string{name}
	if ttl.Timestamp() {
		paths = []string{name + ".seconds", name + ".nanos"}
	}
	fields := resolveKey(md, paths, false, func(string, error) {}, func(string) {})
	return &Index{Type: md.FullName(), Name: ExpiryIndexName, Fields: fields, Expiry: true}
}
