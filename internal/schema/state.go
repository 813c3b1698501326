package schema

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"

	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/descriptorpb"

	protobasev1 "github.com/protobase/protobase/gen/protobase/v1"
)

// State is one version of the schema: the compiled sources, the storage ids
// of the record types and indexes, and the build state of each index.
//
// A State is immutable: Plan and WithIndexState return new States that share
// what did not change. Invariants: Types and ByID hold the same record types;
// every id is below NextTypeID / NextIndexID; ids are unique (index ids
// across all types) and never reused.
type State struct {
	// Version counts applied changes; 0 is the empty schema.
	Version  uint64
	Compiled *Compiled
	Types    map[protoreflect.FullName]*RecordType
	ByID     map[uint32]*RecordType
	// NextTypeID and NextIndexID are the ids the next new type or index
	// gets. They start at 1 and only grow.
	NextTypeID, NextIndexID uint32
}

// Empty returns the state of a database without schema.
func Empty() *State {
	return &State{
		Compiled:    emptyCompiled(),
		Types:       map[protoreflect.FullName]*RecordType{},
		ByID:        map[uint32]*RecordType{},
		NextTypeID:  1,
		NextIndexID: 1,
	}
}

// Lookup finds a record type by type URL ("type.googleapis.com/shop.User",
// any "prefix/shop.User": the text after the last '/') or by full name.
func (s *State) Lookup(typeURL string) (*RecordType, bool) {
	name := typeURL
	if i := strings.LastIndexByte(typeURL, '/'); i >= 0 {
		name = typeURL[i+1:]
	}
	t, ok := s.Types[protoreflect.FullName(name)]
	return t, ok
}

// Index returns the index of the type with the given name.
func (t *RecordType) Index(name string) (*Index, bool) {
	for _, ix := range t.Indexes {
		if ix.Name == name {
			return ix, true
		}
	}
	return nil, false
}

// WithIndexState returns a copy of s in which the named index has the given
// state and error message. The Version does not change: index states are
// progress, not schema. s itself is unchanged; when the type or index does
// not exist, s is returned.
func (s *State) WithIndexState(typ protoreflect.FullName, index string, st protobasev1.IndexState, errMsg string) *State {
	old, ok := s.Types[typ]
	if !ok {
		return s
	}
	pos := slices.IndexFunc(old.Indexes, func(ix *Index) bool { return ix.Name == index })
	if pos < 0 {
		return s
	}
	ix := *old.Indexes[pos]
	ix.State, ix.Error = st, errMsg
	t := *old
	t.Indexes = slices.Clone(old.Indexes)
	t.Indexes[pos] = &ix

	ns := *s
	ns.Types = make(map[protoreflect.FullName]*RecordType, len(s.Types))
	for k, v := range s.Types {
		ns.Types[k] = v
	}
	ns.Types[typ] = &t
	ns.ByID = make(map[uint32]*RecordType, len(s.ByID))
	for k, v := range s.ByID {
		ns.ByID[k] = v
	}
	ns.ByID[t.ID] = &t
	return &ns
}

// StateName is how errors and log lines name an index state: "building",
// "ready" or "failed".
func StateName(st protobasev1.IndexState) string {
	return strings.ToLower(strings.TrimPrefix(st.String(), "INDEX_STATE_"))
}

// Describe lists the record types for GetSchema, sorted by name.
func (s *State) Describe() []*protobasev1.RecordType {
	out := make([]*protobasev1.RecordType, 0, len(s.Types))
	for _, t := range s.sortedTypes() {
		rt := &protobasev1.RecordType{Name: string(t.Name), PrimaryKey: keyPaths(t.PrimaryKey)}
		if t.TTL != nil {
			rt.Ttl = &protobasev1.TTLOptions{Field: string(t.TTL.Field.Name()), Unit: t.TTL.Unit}
		}
		for _, ix := range t.Indexes {
			rt.Indexes = append(rt.Indexes, &protobasev1.Index{
				Name:      ix.Name,
				Fields:    keyPaths(ix.Fields),
				Unique:    ix.Unique,
				State:     ix.State,
				Error:     ix.Error,
				Aggregate: ix.Aggregate,
				Sum:       describeSums(ix),
			})
		}
		out = append(out, rt)
	}
	return out
}

// FileDescriptorSet returns the user files and the imported files their
// declarations use (see usedDescriptorSet), each after the files it
// imports: what a client needs to decode the records.
func (s *State) FileDescriptorSet() *descriptorpb.FileDescriptorSet {
	return usedDescriptorSet(s.Compiled.ordered, s.Compiled.Files)
}

func (s *State) sortedTypes() []*RecordType {
	out := make([]*RecordType, 0, len(s.Types))
	for _, t := range s.Types {
		out = append(out, t)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Format versions the encoding of State, which Encode writes and Decode
// checks. Format 1 had no descriptors: its sources are compiled again when
// decoded. Format 3 is encoded as format 2 is; it marks a store written by
// a release that keeps each record's version in a header in front of the
// record's stored bytes (internal/store/pebble, version.go). Releases
// before it read formats 1 and 2 only, so they refuse such a store at open
// rather than misread its records, and the engine rewrites an older
// state in this format when it opens a store (Engine's Open).
const Format = 3

// StoredFormat returns the format of an encoded State, reading nothing
// else of it.
func StoredFormat(b []byte) (int, error) {
	var head struct {
		Format int `json:"format"`
	}
	if err := json.Unmarshal(b, &head); err != nil {
		return 0, fmt.Errorf("decode schema state: %w", err)
	}
	return head.Format, nil
}

// checkFormat refuses a format Decode cannot read, saying which side is
// the newer one.
func checkFormat(f int) error {
	switch {
	case f > Format:
		return fmt.Errorf("decode schema state: format %d is newer than this binary reads (formats 1 to %d): "+
			"the store was written by a later release of Protobase; run that release, or export with it and import here", f, Format)
	case f < 1:
		return fmt.Errorf("decode schema state: format %d, want 1 to %d", f, Format)
	}
	return nil
}

type stateJSON struct {
	Format      int               `json:"format"`
	Version     uint64            `json:"version"`
	Files       map[string]string `json:"files"`
	Types       []typeJSON        `json:"types"`
	NextTypeID  uint32            `json:"next_type_id"`
	NextIndexID uint32            `json:"next_index_id"`
	// Descriptors is the compiled form of Files (a serialized
	// FileDescriptorSet, imports included), so that Decode need not
	// compile them again.
	Descriptors []byte `json:"descriptors,omitempty"`
	// SourcesSHA256 is sourcesDigest(Files) when Descriptors were compiled
	// from Files.
	SourcesSHA256 []byte `json:"sources_sha256,omitempty"`
}

type typeJSON struct {
	Name       string      `json:"name"`
	ID         uint32      `json:"id"`
	PrimaryKey []string    `json:"primary_key"`
	Indexes    []indexJSON `json:"indexes,omitempty"`
}

type indexJSON struct {
	Name   string   `json:"name"`
	ID     uint32   `json:"id"`
	Fields []string `json:"fields"`
	Unique bool     `json:"unique,omitempty"`
	State  string   `json:"state"`
	Error  string   `json:"error,omitempty"`
	// Aggregate and Sums describe an aggregate index (Fields are its
	// group_by).
	Aggregate bool     `json:"aggregate,omitempty"`
	Sums      []string `json:"sum,omitempty"`
}

// Encode returns the persistent form of s: deterministic JSON holding the
// version, the sources and their compiled descriptors, the ids and
// definitions of the types and indexes, the index states and the id
// counters.
func (s *State) Encode() ([]byte, error) {
	files, err := s.Compiled.encodedFiles()
	if err != nil {
		return nil, fmt.Errorf("encode schema state: %w", err)
	}
	head := stateHead{
		Format:      Format,
		Version:     s.Version,
		Types:       []typeJSON{},
		NextTypeID:  s.NextTypeID,
		NextIndexID: s.NextIndexID,
	}
	for _, t := range s.sortedTypes() {
		tj := typeJSON{Name: string(t.Name), ID: t.ID, PrimaryKey: keyPaths(t.PrimaryKey)}
		for _, ix := range t.Indexes {
			tj.Indexes = append(tj.Indexes, indexJSON{
				Name:      ix.Name,
				ID:        ix.ID,
				Fields:    keyPaths(ix.Fields),
				Unique:    ix.Unique,
				State:     ix.State.String(),
				Error:     ix.Error,
				Aggregate: ix.Aggregate,
				Sums:      describeSums(ix),
			})
		}
		head.Types = append(head.Types, tj)
	}
	b, err := marshalJSON(head)
	if err != nil {
		return nil, fmt.Errorf("encode schema state: %w", err)
	}
	// The files and descriptors (megabytes for thousands of files) are
	// encoded once per Compiled, not at every index state change.
	out := make([]byte, 0, len(b)+len(files)+1)
	out = append(out, b[:len(b)-1]...) // without the closing brace
	out = append(out, files...)
	return append(out, "}\n"...), nil
}

// stateHead is what Encode writes besides encodedFiles.
type stateHead struct {
	Format      int        `json:"format"`
	Version     uint64     `json:"version"`
	Types       []typeJSON `json:"types"`
	NextTypeID  uint32     `json:"next_type_id"`
	NextIndexID uint32     `json:"next_index_id"`
}

// encodeFiles returns the JSON members of the state that come from c: the
// files, their descriptors and the digest of the files, each preceded by a
// comma.
func encodeFiles(c *Compiled) ([]byte, error) {
	desc, err := c.descriptors()
	if err != nil {
		return nil, err
	}
	var out []byte
	for _, m := range []struct {
		name  string
		value any
	}{{"files", c.Files}, {"descriptors", desc}, {"sources_sha256", sourcesDigest(c.Files)}} {
		if m.name == "descriptors" && len(desc) == 0 {
			continue
		}
		v, err := marshalJSON(m.value)
		if err != nil {
			return nil, err
		}
		out = append(append(append(out, `,"`...), m.name...), `":`...)
		out = append(out, v...)
	}
	return out, nil
}

// marshalJSON encodes v without HTML escaping and without a newline.
func marshalJSON(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// Decode rebuilds a State from the bytes of Encode: it loads the stored
// descriptors (or, for a state stored without them or whose descriptors
// cannot be read, compiles the stored sources again) and re-attaches the
// ids and index states. It fails when the sources no longer compile or do
// not match the stored types and indexes.
func Decode(ctx context.Context, b []byte) (*State, error) {
	var j stateJSON
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&j); err != nil {
		return nil, fmt.Errorf("decode schema state: %w", err)
	}
	if err := checkFormat(j.Format); err != nil {
		return nil, err
	}
	if j.NextTypeID == 0 || j.NextIndexID == 0 {
		return nil, fmt.Errorf("decode schema state: id counters must start at 1")
	}
	c, err := decodeCompiled(ctx, &j)
	if err != nil {
		return nil, err
	}
	s := &State{
		Version:     j.Version,
		Compiled:    c,
		Types:       make(map[protoreflect.FullName]*RecordType, len(j.Types)),
		ByID:        make(map[uint32]*RecordType, len(j.Types)),
		NextTypeID:  j.NextTypeID,
		NextIndexID: j.NextIndexID,
	}
	indexIDs := map[uint32]bool{}
	for _, tj := range j.Types {
		t, err := s.decodeType(tj, indexIDs)
		if err != nil {
			return nil, fmt.Errorf("decode schema state: %w", err)
		}
		s.Types[protoreflect.FullName(tj.Name)] = t
		s.ByID[t.ID] = t
	}
	for name := range c.Types {
		if s.Types[name] == nil {
			return nil, fmt.Errorf("decode schema state: record type %s of the stored files has no stored id", name)
		}
	}
	return s, nil
}

// decodeCompiled returns the compiled form of a stored state's files: from
// its stored descriptors when they were compiled from exactly these files
// and still load, else by compiling the files again, so that a state stays
// readable when its descriptors are missing or unusable.
func decodeCompiled(ctx context.Context, j *stateJSON) (*Compiled, error) {
	if len(j.Files) == 0 {
		return emptyCompiled(), nil
	}
	if len(j.Descriptors) > 0 && bytes.Equal(j.SourcesSHA256, sourcesDigest(j.Files)) {
		if c, err := compiledFromDescriptors(j.Files, j.Descriptors); err == nil {
			return c, nil
		}
	}
	c, err := compile(ctx, j.Files)
	if err != nil {
		return nil, fmt.Errorf("decode schema state: stored files do not compile: %w", err)
	}
	return c, nil
}

// decodeType re-attaches a stored type's id and index states to the type
// the compiled files declare under its name, after checking that the two
// agree: a stored state must describe the same keys and indexes as its
// files, and ids must be unique and below the state's counters. indexIDs
// holds the index ids taken so far.
func (s *State) decodeType(tj typeJSON, indexIDs map[uint32]bool) (*RecordType, error) {
	name := protoreflect.FullName(tj.Name)
	ct, ok := s.Compiled.Types[name]
	switch {
	case !ok:
		return nil, fmt.Errorf("type %s is not a record type of the stored files", name)
	case s.Types[name] != nil:
		return nil, fmt.Errorf("type %s stored twice", name)
	case tj.ID == 0 || tj.ID >= s.NextTypeID || s.ByID[tj.ID] != nil:
		return nil, fmt.Errorf("type %s: bad id %d", name, tj.ID)
	case !slices.Equal(tj.PrimaryKey, keyPaths(ct.PrimaryKey)):
		return nil, fmt.Errorf("type %s: stored primary key %v, files say %v", name, tj.PrimaryKey, keyPaths(ct.PrimaryKey))
	case len(tj.Indexes) != len(ct.Indexes):
		return nil, fmt.Errorf("type %s: %d indexes stored, files declare %d", name, len(tj.Indexes), len(ct.Indexes))
	}
	t := *ct
	t.ID = tj.ID
	t.Indexes = make([]*Index, len(ct.Indexes))
	for i, cix := range ct.Indexes {
		ix, err := s.decodeIndex(tj.Indexes[i], cix, indexIDs)
		if err != nil {
			return nil, fmt.Errorf("type %s: %w", name, err)
		}
		t.Indexes[i] = ix
	}
	return &t, nil
}

// decodeIndex re-attaches a stored index's id and state to the index the
// files declare in its place, and records its id in indexIDs.
func (s *State) decodeIndex(ij indexJSON, cix *Index, indexIDs map[uint32]bool) (*Index, error) {
	st, ok := protobasev1.IndexState_value[ij.State]
	switch {
	case ij.Name != cix.Name || !slices.Equal(ij.Fields, keyPaths(cix.Fields)) || ij.Unique != cix.Unique ||
		ij.Aggregate != cix.Aggregate || !slices.Equal(ij.Sums, describeSums(cix)):
		return nil, fmt.Errorf("stored index %q does not match the files", ij.Name)
	case ij.ID == 0 || ij.ID >= s.NextIndexID || indexIDs[ij.ID]:
		return nil, fmt.Errorf("index %q: bad id %d", ij.Name, ij.ID)
	case !ok || st == int32(protobasev1.IndexState_INDEX_STATE_UNSPECIFIED):
		return nil, fmt.Errorf("index %q: bad state %q", ij.Name, ij.State)
	}
	indexIDs[ij.ID] = true
	ix := *cix
	ix.ID, ix.State, ix.Error = ij.ID, protobasev1.IndexState(st), ij.Error
	return &ix, nil
}
