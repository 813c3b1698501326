package schema

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/descriptorpb"

	protobasev1 "github.com/protobase/protobase/gen/protobase/v1"
)

// optionTypes resolves the (protobase.v1.record) extension when options are
// re-read from their wire form.
var optionTypes = sync.OnceValue(func() *protoregistry.Types {
	t := new(protoregistry.Types)
	if err := t.RegisterExtension(protobasev1.E_Record); err != nil {
		panic(err) // a fresh registry cannot conflict
	}
	return t
})

// recordOptions returns the record option of a message, or nil when it has
// none. protocompile keeps interpreted options as descriptorpb messages whose
// custom options may be unknown fields or dynamic extensions; going through
// the wire form with a resolver that knows the extension reads both.
func recordOptions(md protoreflect.MessageDescriptor) (*protobasev1.RecordOptions, error) {
	opts, ok := md.Options().(*descriptorpb.MessageOptions)
	if !ok || opts == nil {
		return nil, nil
	}
	b, err := proto.MarshalOptions{AllowPartial: true}.Marshal(opts)
	if err != nil {
		return nil, err
	}
	out := new(descriptorpb.MessageOptions)
	if err := (proto.UnmarshalOptions{Resolver: optionTypes(), AllowPartial: true}).Unmarshal(b, out); err != nil {
		return nil, err
	}
	if !proto.HasExtension(out, protobasev1.E_Record) {
		return nil, nil
	}
	ro, _ := proto.GetExtension(out, protobasev1.E_Record).(*protobasev1.RecordOptions)
	if ro == nil {
		ro = new(protobasev1.RecordOptions)
	}
	return ro, nil
}

// findRecordTypes finds and validates the record types of the user files,
// reporting every problem to errs.
func findRecordTypes(files []protoreflect.FileDescriptor, errs *errorList) map[protoreflect.FullName]*RecordType {
	types := map[protoreflect.FullName]*RecordType{}
	var visit func(msgs protoreflect.MessageDescriptors)
	visit = func(msgs protoreflect.MessageDescriptors) {
		for i := 0; i < msgs.Len(); i++ {
			md := msgs.Get(i)
			if md.IsMapEntry() {
				continue
			}
			visit(md.Messages())
			ro, err := recordOptions(md)
			if err != nil {
				reportAt(errs, md, fmt.Sprintf("type %s: record option: %v", md.FullName(), err))
				continue
			}
			if ro == nil {
				continue
			}
			if t := newRecordType(md, ro, errs); t != nil {
				types[t.Name] = t
			}
		}
	}
	memo := map[string]bool{}
	for _, f := range files {
		// Only a file that can see protobase/v1/options.proto can use the
		// record option; another extension with the same number is not it.
		if importsOptions(f, memo) {
			visit(f.Messages())
		}
	}
	return types
}

// importsOptions reports whether fd imports OptionsPath, directly or not.
// memo holds the answer for every file already visited, so that a long
// import chain is walked once, not once per file (linked files have no
// import cycles).
func importsOptions(fd protoreflect.FileDescriptor, memo map[string]bool) bool {
	if fd.Path() == OptionsPath {
		return true
	}
	if v, ok := memo[fd.Path()]; ok {
		return v
	}
	memo[fd.Path()] = false
	imps := fd.Imports()
	for i := 0; i < imps.Len(); i++ {
		if imp := imps.Get(i).FileDescriptor; imp != nil && importsOptions(imp, memo) {
			memo[fd.Path()] = true
			return true
		}
	}
	return false
}

// newRecordType validates the record option of md; it returns nil after
// reporting the problems when the option is invalid.
func newRecordType(md protoreflect.MessageDescriptor, ro *protobasev1.RecordOptions, errs *errorList) *RecordType {
	name := md.FullName()
	bad := false
	report := func(format string, args ...any) {
		bad = true
		reportAt(errs, md, fmt.Sprintf("type %s: ", name)+fmt.Sprintf(format, args...))
	}
	t := &RecordType{Name: name, Desc: md}

	if len(ro.GetPrimaryKey()) == 0 {
		report("primary_key is required")
	}
	t.PrimaryKey = resolveKey(md, ro.GetPrimaryKey(), false, func(p string, err error) {
		report("primary_key %q: %v", p, err)
	}, func(p string) {
		report("primary_key: field %q listed twice", p)
	})

	names := map[string]bool{}
	for i, io := range ro.GetIndex() {
		label := io.GetName()
		if label == "" {
			label = defaultIndexName(io.GetFields())
		}
		if len(io.GetFields()) == 0 {
			report("index %d (%q): no fields", i+1, io.GetName())
			continue
		}
		if io.GetName() != "" && !validIndexName(io.GetName()) {
			report("index %q: name must be letters, digits and underscores, not starting with a digit", io.GetName())
			continue
		}
		if names[label] {
			report("index name %q used twice", label)
			continue
		}
		names[label] = true
		before := bad
		fields := resolveKey(md, io.GetFields(), true, func(p string, err error) {
			report("index %q: field %q: %v", label, p, err)
		}, func(p string) {
			report("index %q: field %q listed twice", label, p)
		})
		if bad != before {
			continue
		}
		if rep := repeatedPaths(fields); len(rep) > 1 {
			report("index %q: fields %s are all repeated; an index may name at most one repeated field (its entries are one per element)",
				label, strings.Join(rep, ", "))
			continue
		}
		if len(t.PrimaryKey) > 0 && slices.Equal(keyPaths(fields), keyPaths(t.PrimaryKey)) {
			report("index %q: same fields as the primary key", label)
			continue
		}
		t.Indexes = append(t.Indexes, &Index{
			Type:   name,
			Name:   label,
			Fields: fields,
			Unique: io.GetUnique(),
		})
	}
	for _, ao := range ro.GetAggregate() {
		if ix := resolveAggregate(md, name, ao, names, report); ix != nil {
			t.Indexes = append(t.Indexes, ix)
		}
	}
	if to := ro.GetTtl(); to != nil {
		if t.TTL = resolveTTL(md, to, report); t.TTL != nil {
			t.Indexes = append(t.Indexes, expiryIndex(md, t.TTL))
		}
	}
	if bad {
		return nil
	}
	return t
}

// repeatedPaths lists the quoted paths of the repeated fields among fields.
func repeatedPaths(fields []KeyField) []string {
	var out []string
	for _, kf := range fields {
		if kf.Repeated {
			out = append(out, strconv.Quote(kf.Path))
		}
	}
	return out
}

// resolveKey resolves the paths of one key, reporting unresolvable paths
// and duplicates. With lists, the last field of a path may be a repeated
// scalar (index keys); a primary key names singular fields only.
func resolveKey(md protoreflect.MessageDescriptor, paths []string, lists bool, fail func(string, error), dup func(string)) []KeyField {
	var out []KeyField
	seen := map[string]bool{}
	for _, p := range paths {
		kf, err := resolvePath(md, p, lists)
		if err != nil {
			fail(p, err)
			continue
		}
		if seen[p] {
			dup(p)
			continue
		}
		seen[p] = true
		out = append(out, kf)
	}
	return out
}

// resolvePath resolves a dotted field path: singular message fields, then a
// field of a keyable kind, singular, or repeated when lists is set.
func resolvePath(md protoreflect.MessageDescriptor, path string, lists bool) (KeyField, error) {
	if path == "" {
		return KeyField{}, fmt.Errorf("empty field path")
	}
	if n := strings.Count(path, ".") + 1; n > MaxKeyPathDepth {
		return KeyField{}, fmt.Errorf("schema limit %s exceeded: the path names %d nested fields, more than %d",
			LimitKeyPathDepth, n, MaxKeyPathDepth)
	}
	parts := strings.Split(path, ".")
	kf := KeyField{Path: path}
	cur := md
	for i, part := range parts {
		f := cur.Fields().ByName(protoreflect.Name(part))
		if f == nil {
			if cur == md {
				return KeyField{}, fmt.Errorf("no field %q", part)
			}
			return KeyField{}, fmt.Errorf("no field %q in message %s", part, cur.FullName())
		}
		kf.Fields = append(kf.Fields, f)
		last := i == len(parts)-1
		switch {
		case f.IsMap():
			return KeyField{}, fmt.Errorf("field %q is a map; key paths name singular fields only", part)
		case f.IsList() && lists && last && keyable(f.Kind()):
			kf.Repeated = true
		case f.IsList() && lists && last:
			return KeyField{}, fmt.Errorf("field %q is a repeated message (%s); an index may name a repeated scalar, string, bytes or enum field only",
				part, f.Message().FullName())
		case f.IsList() && lists:
			return KeyField{}, fmt.Errorf("field %q is repeated; only the last field of an index path may be repeated", part)
		case f.IsList():
			return KeyField{}, fmt.Errorf("field %q is repeated; a primary key names singular fields only", part)
		case !last && f.Message() == nil:
			return KeyField{}, fmt.Errorf("field %q is a %s, not a message: it has no field %q", part, f.Kind(), parts[i+1])
		case !last:
			cur = f.Message()
		case !keyable(f.Kind()):
			return KeyField{}, fmt.Errorf("field %q is a message (%s); a key field must be a scalar, string, bytes or enum (name one of its fields: %q)",
				part, f.Message().FullName(), path+".<field>")
		}
		kf.Kind = f.Kind()
	}
	return kf, nil
}

// keyable reports whether a field of kind k can be part of a key.
func keyable(k protoreflect.Kind) bool {
	switch k {
	case protoreflect.BoolKind, protoreflect.EnumKind,
		protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind,
		protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind,
		protoreflect.Uint32Kind, protoreflect.Fixed32Kind,
		protoreflect.Uint64Kind, protoreflect.Fixed64Kind,
		protoreflect.FloatKind, protoreflect.DoubleKind,
		protoreflect.StringKind, protoreflect.BytesKind:
		return true
	}
	return false
}

// defaultIndexName is the name of an index declared without one: its field
// paths joined by "_", dots replaced by "_".
func defaultIndexName(fields []string) string {
	return strings.ReplaceAll(strings.Join(fields, "_"), ".", "_")
}

func validIndexName(s string) bool {
	for i, r := range s {
		switch {
		case r == '_', r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z':
		case r >= '0' && r <= '9' && i > 0:
		default:
			return false
		}
	}
	return s != ""
}

func keyPaths(k []KeyField) []string {
	out := make([]string, len(k))
	for i, f := range k {
		out[i] = f.Path
	}
	return out
}

// reportAt reports msg at the position of d's name in its file.
func reportAt(errs *errorList, d protoreflect.Descriptor, msg string) {
	file, line, col := position(d)
	errs.add(file, line, col, msg)
}

// position returns the 1-based position of the name of d, or of d itself,
// from the source info of its file (line 0 when unknown).
func position(d protoreflect.Descriptor) (file string, line, col int) {
	fd := d.ParentFile()
	if fd == nil {
		return "", 0, 0
	}
	locs := fd.SourceLocations()
	loc := locs.ByDescriptor(d)
	if p := descPath(d); p != nil {
		if l := locs.ByPath(append(p, 1)); l.Path != nil { // field 1 is the name
			loc = l
		}
	}
	if loc.Path == nil {
		return fd.Path(), 0, 0
	}
	return fd.Path(), loc.StartLine + 1, loc.StartColumn + 1
}

// descPath is the source path of a message (FileDescriptorProto field 4 is
// message_type, DescriptorProto field 3 is nested_type).
func descPath(d protoreflect.Descriptor) protoreflect.SourcePath {
	if _, ok := d.(protoreflect.MessageDescriptor); !ok {
		return nil
	}
	switch p := d.Parent().(type) {
	case protoreflect.FileDescriptor:
		return protoreflect.SourcePath{4, int32(d.Index())}
	case protoreflect.MessageDescriptor:
		if pp := descPath(p); pp != nil {
			return append(pp, 3, int32(d.Index()))
		}
	}
	return nil
}
