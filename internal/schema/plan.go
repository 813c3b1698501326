package schema

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"

	"google.golang.org/protobuf/reflect/protoreflect"

	protobasev1 "github.com/protobase/protobase/gen/protobase/v1"
)

// Counts returns the number of stored records of an existing record type.
// Plan calls it only for types it drops or whose change depends on whether
// data exists.
type Counts func(t *RecordType) (uint64, error)

// PlanRequest is an ApplySchema request: every file of the new schema, and
// the names of the record types and indexes that may be dropped.
type PlanRequest struct {
	Files     map[string]string
	AllowDrop []string
}

// Reasons of a PlanError.
const (
	// ReasonDropNotAllowed: a record type or an index would be dropped
	// without being named in allow_drop.
	ReasonDropNotAllowed = "DROP_NOT_ALLOWED"
	// ReasonIncompatible: a change is not allowed because records exist
	// (possibly along with drops that were not allowed).
	ReasonIncompatible = "INCOMPATIBLE_CHANGE"
)

// PlanError refuses a schema transition; it maps to FAILED_PRECONDITION.
// Each problem names the type and the field or index; Types holds the
// record type of each, so that a key limited to some types is told only
// of theirs.
type PlanError struct {
	Reason   string
	Problems []string
	Types    []string
}

func (e *PlanError) Error() string { return strings.Join(e.Problems, "\n") }

// Result is a planned schema transition.
type Result struct {
	// Plan is the ApplySchema response plan.
	Plan *protobasev1.SchemaPlan
	// State is the new state: Version is the old one + 1 when Changed, and
	// State is the old state itself otherwise.
	State   *State
	Changed bool
	// DroppedTypes are the old types to delete with their records (by ID).
	DroppedTypes []*RecordType
	// DroppedIndexes are the old indexes whose entries must be deleted (by
	// ID), including the indexes of DroppedTypes and indexes replaced by a
	// redefinition.
	DroppedIndexes []*Index
	// BuildIndexes are the new indexes of types holding records: State has
	// them BUILDING; the engine indexes the existing records, then records
	// the outcome with WithIndexState (READY or FAILED).
	BuildIndexes []*Index
}

// Plan compiles the files of req and computes the transition from old (nil
// means Empty). Errors are a *CompileError for bad sources, a *PlanError for
// a refused transition, or an error from counts or ctx. A nil counts means
// no type holds records.
//
// The rules:
//   - The request is the whole schema: files not in it are removed, and a
//     record type that disappears (its message or its record option is
//     removed) is dropped, which is allowed only when its full name is in
//     AllowDrop; so is an index a kept type no longer declares, named as
//     "TYPE.INDEX" (see IndexFullName). Names in AllowDrop that are not
//     dropped are ignored. The indexes of a dropped type are listed as
//     dropped too.
//   - When a type holds records, for it and for every message type it uses
//     (recursively, compared by full name) a field's number, kind,
//     message/enum type and cardinality are immutable, a field may be
//     removed only if its number is reserved, and the primary key is fixed.
//     Neither may change how stored bytes decode for a field of the primary
//     key or of a kept index: its default (explicit, or an enum's first
//     value), its presence, its oneof and its enum's openness are fixed.
//     Adding fields and renaming them is allowed. Without records anything
//     goes. Every change, allowed or not, is listed in types_changed.
//   - Indexes are matched by name; a different definition under the same
//     name is a drop and an add, and so is an index that FAILED (applying
//     again retries it). An added index is READY on a new or empty type and
//     BUILDING (build_required) on a type holding records.
//   - A ttl option keeps the expiry index (ExpiryIndexName), planned as
//     an index: added (built when the type holds records) with the option,
//     rebuilt when the option names another field, kept when only the unit
//     changes (its entries hold the field's raw value), and dropped
//     without allow_drop when the option goes.
//   - New types and indexes get fresh ids; kept ones keep theirs.
func Plan(ctx context.Context, old *State, req PlanRequest, counts Counts) (*Result, error) {
	c, err := Compile(ctx, req.Files)
	if err != nil {
		return nil, err
	}
	return PlanCompiled(old, c, req.AllowDrop, counts)
}

// PlanCompiled is Plan on files already compiled, for a caller that plans
// the same files again (after the records counted have changed).
func PlanCompiled(old *State, c *Compiled, allowDrop []string, counts Counts) (*Result, error) {
	if old == nil {
		old = Empty()
	}
	p := &planner{
		old:    old,
		c:      c,
		counts: counts,
		memo:   map[protoreflect.FullName]uint64{},
		res: &Result{
			Plan: &protobasev1.SchemaPlan{},
		},
		types:     map[protoreflect.FullName]*RecordType{},
		byID:      map[uint32]*RecordType{},
		nextType:  old.NextTypeID,
		nextIndex: old.NextIndexID,
		allowDrop: map[protoreflect.FullName]bool{},
		clean:     map[string]bool{},
		cmps:      map[protoreflect.FullName]*typeCmp{},
	}
	for _, n := range allowDrop {
		p.allowDrop[protoreflect.FullName(n)] = true
	}
	if err := p.run(); err != nil {
		return nil, err
	}
	if len(p.problems) > 0 {
		reason := ReasonDropNotAllowed
		if p.incompatible {
			reason = ReasonIncompatible
		}
		return nil, &PlanError{Reason: reason, Problems: p.problems, Types: p.problemTypes}
	}
	res := p.res
	pl := res.Plan
	res.Changed = len(pl.FilesAdded)+len(pl.FilesChanged)+len(pl.FilesRemoved)+
		len(pl.TypesDropped)+len(pl.IndexesAdded)+len(pl.IndexesDropped) > 0
	if !res.Changed {
		res.State = old
		res.Plan = &protobasev1.SchemaPlan{}
		res.DroppedTypes, res.DroppedIndexes, res.BuildIndexes = nil, nil, nil
		return res, nil
	}
	res.State = &State{
		Version:     old.Version + 1,
		Compiled:    c,
		Types:       p.types,
		ByID:        p.byID,
		NextTypeID:  p.nextType,
		NextIndexID: p.nextIndex,
	}
	return res, nil
}

type planner struct {
	old    *State
	c      *Compiled
	counts Counts
	memo   map[protoreflect.FullName]uint64
	res    *Result

	types               map[protoreflect.FullName]*RecordType
	byID                map[uint32]*RecordType
	nextType, nextIndex uint32
	allowDrop           map[protoreflect.FullName]bool

	problems     []string
	problemTypes []string // the record type of each problem
	incompatible bool

	// clean memoizes unchanged: whether a file and all it imports are the
	// same source in both states.
	clean map[string]bool
	// cmps holds the comparison of each message and enum type reached, by
	// old full name, shared by every record type that reaches it.
	cmps map[protoreflect.FullName]*typeCmp
}

// unchanged reports whether fd, a file of the new state, and every file it
// imports, directly or not, have the same source in the old state: then
// the types declared in fd are the same as before, and comparing them (and
// what they use) is skipped. Without this, a chain of n files, each type
// using the one before, would be compared in time quadratic in n.
func (p *planner) unchanged(fd protoreflect.FileDescriptor) bool {
	path := fd.Path()
	src, user := p.c.Files[path]
	if !user {
		return true // built in: the same in every state
	}
	if v, ok := p.clean[path]; ok {
		return v
	}
	if old, ok := p.old.Compiled.Files[path]; !ok || old != src {
		p.clean[path] = false
		return false
	}
	p.clean[path] = false // linked files have no import cycles
	imps := fd.Imports()
	for i := 0; i < imps.Len(); i++ {
		if imp := imps.Get(i).FileDescriptor; imp != nil && !p.unchanged(imp) {
			return false
		}
	}
	p.clean[path] = true
	return true
}

// count returns the number of records of an old type, asking once.
func (p *planner) count(t *RecordType) (uint64, error) {
	if p.counts == nil {
		return 0, nil
	}
	if n, ok := p.memo[t.Name]; ok {
		return n, nil
	}
	n, err := p.counts(t)
	if err != nil {
		return 0, fmt.Errorf("count records of %s: %w", t.Name, err)
	}
	p.memo[t.Name] = n
	return n, nil
}

func (p *planner) run() error {
	pl := p.res.Plan
	oldFiles := p.old.Compiled.Files
	for _, name := range sortedKeys(p.c.Files) {
		src, ok := oldFiles[name]
		switch {
		case !ok:
			pl.FilesAdded = append(pl.FilesAdded, name)
		case src != p.c.Files[name]:
			pl.FilesChanged = append(pl.FilesChanged, name)
		}
	}
	for _, name := range sortedKeys(oldFiles) {
		if _, ok := p.c.Files[name]; !ok {
			pl.FilesRemoved = append(pl.FilesRemoved, name)
		}
	}

	for _, ot := range p.old.sortedTypes() {
		if _, ok := p.c.Types[ot.Name]; ok {
			continue
		}
		n, err := p.count(ot)
		if err != nil {
			return err
		}
		if !p.allowDrop[ot.Name] {
			p.problem(ot.Name, fmt.Sprintf(
				"type %s: would be dropped with its %d records (its message or record option is gone); name it in allow_drop to delete it", ot.Name, n))
			continue
		}
		pl.TypesDropped = append(pl.TypesDropped, &protobasev1.TypeDrop{Type: string(ot.Name), Records: n})
		p.res.DroppedTypes = append(p.res.DroppedTypes, ot)
		for _, oix := range ot.Indexes {
			p.dropIndex(oix)
		}
	}

	names := make([]protoreflect.FullName, 0, len(p.c.Types))
	for name := range p.c.Types {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		nt := p.c.Types[name]
		if ot, ok := p.old.Types[name]; ok {
			if err := p.keep(ot, nt); err != nil {
				return err
			}
			continue
		}
		t := *nt
		t.ID = p.nextType
		p.nextType++
		t.Indexes = make([]*Index, len(nt.Indexes))
		for i, nix := range nt.Indexes {
			t.Indexes[i] = p.addIndex(nix, false)
		}
		pl.TypesAdded = append(pl.TypesAdded, string(name))
		p.types[name], p.byID[t.ID] = &t, &t
	}
	return nil
}

// addIndex gives a new index an id and its initial state, and lists it.
func (p *planner) addIndex(nix *Index, build bool) *Index {
	ix := *nix
	ix.ID = p.nextIndex
	p.nextIndex++
	ix.State, ix.Error = protobasev1.IndexState_INDEX_STATE_READY, ""
	if build {
		ix.State = protobasev1.IndexState_INDEX_STATE_BUILDING
		p.res.BuildIndexes = append(p.res.BuildIndexes, &ix)
	}
	p.res.Plan.IndexesAdded = append(p.res.Plan.IndexesAdded, indexChange(&ix, build))
	return &ix
}

func (p *planner) dropIndex(oix *Index) {
	p.res.DroppedIndexes = append(p.res.DroppedIndexes, oix)
	p.res.Plan.IndexesDropped = append(p.res.Plan.IndexesDropped, indexChange(oix, false))
}

func indexChange(ix *Index, build bool) *protobasev1.IndexChange {
	return &protobasev1.IndexChange{
		Type:          string(ix.Type),
		Index:         ix.Name,
		Fields:        keyPaths(ix.Fields),
		Unique:        ix.Unique,
		BuildRequired: build,
		Aggregate:     ix.Aggregate,
		Sum:           describeSums(ix),
	}
}

// keep plans a type present in both states.
func (p *planner) keep(ot, nt *RecordType) error {
	d := differ{keyFields: keyFieldsOf(ot, nt)}
	p.collect(&d, ot.Desc, nt.Desc)
	if op, np := keyPaths(ot.PrimaryKey), keyPaths(nt.PrimaryKey); !slices.Equal(op, np) {
		// Renaming a key field leaves the stored keys as they are.
		same := slices.Equal(keyNumbers(ot.PrimaryKey), keyNumbers(nt.PrimaryKey))
		verb := map[bool]string{true: "renamed", false: "changed"}[same]
		d.add(!same, fmt.Sprintf("primary key %s from [%s] to [%s]", verb, strings.Join(op, ", "), strings.Join(np, ", ")))
	}

	// Counting the records costs a scan, so it is done only when the
	// answer matters: an index must be built, or a breaking change refused
	// unless the type is empty.
	oldByName := map[string]*Index{}
	for _, oix := range ot.Indexes {
		oldByName[oix.Name] = oix
	}
	var n uint64
	if buildsIndex(oldByName, nt.Indexes) || d.breaking {
		var err error
		if n, err = p.count(ot); err != nil {
			return err
		}
	}
	if n > 0 {
		p.refuseBreaking(ot, &d, n)
	}

	t := *nt
	t.ID = ot.ID
	t.Indexes = p.planIndexes(&d, ot, nt, oldByName, n > 0)
	if ot.TTL != nil && nt.TTL != nil && ot.TTL.Unit != nt.TTL.Unit {
		d.add(false, fmt.Sprintf("ttl unit changed from %s to %s; records expired under %[1]s are deleted first", ot.TTL.Unit, nt.TTL.Unit))
	}
	if len(d.changes) > 0 {
		tc := &protobasev1.TypeChange{Type: string(ot.Name)}
		for _, c := range d.changes {
			tc.Changes = append(tc.Changes, c.text)
		}
		p.res.Plan.TypesChanged = append(p.res.Plan.TypesChanged, tc)
	}
	p.types[t.Name], p.byID[t.ID] = &t, &t
	return nil
}

// buildsIndex reports whether any of the new indexes cannot reuse the old
// index of its name (see reusable) and so must be built.
func buildsIndex(oldByName map[string]*Index, news []*Index) bool {
	for _, nix := range news {
		if oix, ok := oldByName[nix.Name]; !ok || !reusable(oix, nix) {
			return true
		}
	}
	return false
}

// reusable reports whether the entries of the old index oix serve the new
// index nix as they are: same entries, and not a failed build, which is
// retried.
func reusable(oix, nix *Index) bool {
	return sameIndex(oix, nix) && oix.State != protobasev1.IndexState_INDEX_STATE_FAILED
}

// problem refuses the plan for a reason concerning record type t.
func (p *planner) problem(t protoreflect.FullName, msg string) {
	p.problems = append(p.problems, msg)
	p.problemTypes = append(p.problemTypes, string(t))
}

// refuseBreaking makes the plan incompatible for each breaking change of
// ot, a type holding n > 0 records: only an empty type may change in a way
// its stored records cannot follow.
func (p *planner) refuseBreaking(ot *RecordType, d *differ, n uint64) {
	for _, c := range d.changes {
		if c.breaking {
			p.incompatible = true
			p.problem(ot.Name, fmt.Sprintf("type %s (%d records): %s%s", ot.Name, n, c.text, c.hint))
		}
	}
}

// planIndexes returns the indexes of the kept type: each new index takes
// over the id and state of a reusable old one, or is added (built when the
// type has records, per build); old indexes not kept are dropped. Each
// decision is noted in d.
func (p *planner) planIndexes(d *differ, ot, nt *RecordType, oldByName map[string]*Index, build bool) []*Index {
	out := make([]*Index, len(nt.Indexes))
	newByName := map[string]*Index{}
	for i, nix := range nt.Indexes {
		newByName[nix.Name] = nix
		oix, ok := oldByName[nix.Name]
		switch {
		case ok && reusable(oix, nix):
			ix := *nix
			ix.ID, ix.State, ix.Error = oix.ID, oix.State, oix.Error
			out[i] = &ix
			if op, np := keyPaths(oix.Fields), keyPaths(nix.Fields); !slices.Equal(op, np) {
				d.add(false, fmt.Sprintf("index %s fields renamed from [%s] to [%s]", nix.Name, strings.Join(op, ", "), strings.Join(np, ", ")))
			}
			continue
		case ok && sameIndex(oix, nix):
			d.add(false, fmt.Sprintf("index %s rebuilt (it had failed: %s)", nix.Name, oix.Error))
			p.dropIndex(oix)
		case ok && nix.Expiry:
			d.add(false, fmt.Sprintf("ttl field changed to %s: expiry index %s rebuilt; records expired under the old field are deleted first", nt.TTL.Field.Name(), nix.Name))
			p.dropIndex(oix)
		case ok:
			d.add(false, fmt.Sprintf("index %s redefined", nix.Name))
			p.dropIndex(oix)
		case nix.Expiry:
			d.add(false, fmt.Sprintf("ttl added on field %s: expiry index %s added", nt.TTL.Field.Name(), nix.Name))
		default:
			d.add(false, fmt.Sprintf("index %s added", nix.Name))
		}
		out[i] = p.addIndex(nix, build)
	}
	for _, oix := range ot.Indexes {
		if _, ok := newByName[oix.Name]; ok {
			continue
		}
		if oix.Expiry {
			// The ttl option went, and with it the only use of its index.
			d.add(false, fmt.Sprintf("ttl removed: expiry index %s dropped; records already expired are deleted first", oix.Name))
			p.dropIndex(oix)
			continue
		}
		// An index left out of the new schema is dropped only when
		// named, like a type: leaving out a unique index would lose its
		// constraint without anyone asking for it.
		if name := IndexFullName(oix); !p.allowDrop[protoreflect.FullName(name)] {
			p.problem(ot.Name, fmt.Sprintf(
				"index %s: would be dropped (the type no longer declares it); name it in allow_drop to delete it", name))
			continue
		}
		d.add(false, fmt.Sprintf("index %s dropped", oix.Name))
		p.dropIndex(oix)
	}
	return out
}

// IndexFullName names an index as allow_drop does: its type's full name
// and its own name ("shop.User.email").
func IndexFullName(ix *Index) string {
	return string(ix.Type) + "." + ix.Name
}

// sameIndex reports whether two indexes have the same entries: the same
// fields, compared by number so that renaming a field keeps the index.
func sameIndex(a, b *Index) bool {
	return a.Unique == b.Unique && slices.Equal(keyNumbers(a.Fields), keyNumbers(b.Fields)) && sameSums(a, b)
}

// keyNumbers identifies the fields of a key by their numbers along each path
// ("4.1" for address.city).
func keyNumbers(k []KeyField) []string {
	out := make([]string, len(k))
	for i, kf := range k {
		nums := make([]string, len(kf.Fields))
		for j, f := range kf.Fields {
			nums[j] = strconv.Itoa(int(f.Number()))
		}
		out[i] = strings.Join(nums, ".")
	}
	return out
}

// differ collects the changes of one record type: those of its message
// and of the message and enum types it reaches (compared once per plan, see
// compare.go), then those of its primary key and indexes.
type differ struct {
	// keyFields are the fields whose decoded values are in stored keys:
	// every field along the paths of the primary key and of the indexes
	// the plan keeps, with what uses them ("primary key", "index by_email").
	keyFields map[fieldID]string
	changes   []change
	breaking  bool
}

// fieldID names a field across two versions of a schema, where its name
// may change and its number may not.
type fieldID struct {
	msg protoreflect.FullName
	num protoreflect.FieldNumber
}

func idOf(f protoreflect.FieldDescriptor) fieldID {
	return fieldID{f.ContainingMessage().FullName(), f.Number()}
}

// keyFieldsOf lists the fields of ot whose values are in its stored primary
// keys and in the entries of the indexes that nt keeps unchanged (an index
// redefined or added is built from the records under the new schema).
func keyFieldsOf(ot, nt *RecordType) map[fieldID]string {
	out := map[fieldID]string{}
	use := func(k []KeyField, what string) {
		for _, kf := range k {
			for _, f := range kf.Fields {
				if _, ok := out[idOf(f)]; !ok {
					out[idOf(f)] = what
				}
			}
		}
	}
	use(ot.PrimaryKey, "primary key")
	for _, oix := range ot.Indexes {
		if nix, ok := nt.Index(oix.Name); ok && sameIndex(oix, nix) && oix.State != protobasev1.IndexState_INDEX_STATE_FAILED {
			use(oix.Fields, "index "+oix.Name)
			use(oix.Sums, "index "+oix.Name)
		}
	}
	return out
}

type change struct {
	text string
	// breaking changes are refused when the type holds records.
	breaking bool
	// hint is added to the problem when the change is refused.
	hint string
}

func (d *differ) add(breaking bool, text string) { d.addHint(breaking, text, "") }

func (d *differ) addHint(breaking bool, text, hint string) {
	d.changes = append(d.changes, change{text, breaking, hint})
	d.breaking = d.breaking || breaking
}

// fieldMessage is the message type a field holds (the value type of a map).
func fieldMessage(f protoreflect.FieldDescriptor) protoreflect.MessageDescriptor {
	if f.IsMap() {
		f = f.MapValue()
	}
	return f.Message()
}

func sortedFields(md protoreflect.MessageDescriptor) []protoreflect.FieldDescriptor {
	fs := md.Fields()
	out := make([]protoreflect.FieldDescriptor, fs.Len())
	for i := range out {
		out[i] = fs.Get(i)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Number() < out[j].Number() })
	return out
}

// fieldType describes what a field holds on the wire and in which
// cardinality: two fields with the same description are compatible.
func fieldType(f protoreflect.FieldDescriptor) string {
	if f.IsMap() {
		return fmt.Sprintf("map<%s, %s>", fieldType(f.MapKey()), fieldType(f.MapValue()))
	}
	var s string
	switch f.Kind() {
	case protoreflect.MessageKind:
		s = string(f.Message().FullName())
	case protoreflect.GroupKind:
		s = "group " + string(f.Message().FullName())
	case protoreflect.EnumKind:
		s = string(f.Enum().FullName())
	default:
		s = f.Kind().String()
	}
	switch f.Cardinality() {
	case protoreflect.Repeated:
		s = "repeated " + s
	case protoreflect.Required:
		s = "required " + s
	}
	return s
}
