package engine

import (
	"fmt"
	"strings"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/reflect/protoreflect"

	pb "github.com/protobase/protobase/gen/protobase/v1"
	"github.com/protobase/protobase/internal/keyspace"
	"github.com/protobase/protobase/internal/orderedcode"
	"github.com/protobase/protobase/internal/query"
	"github.com/protobase/protobase/internal/record"
	"github.com/protobase/protobase/internal/schema"
	"github.com/protobase/protobase/internal/wire"
)

// catalog is the engine's compiled view of one schema state: per record
// type, the wire validator and the compiled key paths. It is immutable and
// replaced as a whole when the schema or an index state changes.
type catalog struct {
	// ver is the version of the schema key the state was read from or
	// written at (store.View.GetVersioned; always 0 on a store that is
	// not shared).
	ver   uint64
	state *schema.State
	types map[string]*recType // by full name
	byID  map[uint32]*recType
}

// recType is one record type ready for the hot path.
type recType struct {
	rt  *schema.RecordType
	rec *record.Type
	url string // canonical type URL, "type.googleapis.com/" + full name
	// urlField is url encoded as Any.type_url, with its tag: what every
	// Any of the type written by hand begins with.
	urlField []byte
	prefix   []byte // record key prefix
	pk       []keyPath
	pkNums   []protowire.Number // top-level fields holding the primary key
	indexes  []*index           // maintained by writes: BUILDING and READY
	keys     *keyExtractor      // reads pk and every index key of indexes in one walk
	// target offers reads the READY indexes only; point recognises plain
	// primary-key lookups (nil when the key has no fast path). Both are
	// immutable: an index becoming READY publishes a new catalog.
	target *query.Target
	point  *query.Point
	// exp reads the record expiry; nil when the type has no ttl option.
	exp *expiry
	// aggs are the aggregate indexes writes maintain (BUILDING and READY).
	aggs []*aggIndex
}

// index is one secondary index maintained by writes.
type index struct {
	ix       *schema.Index
	prefix   []byte
	paths    []keyPath
	building bool // existing records are still being indexed
	// grouped says the index's entries are written with SetEntry and
	// DeleteEntry (entriesGroup).
	grouped bool
}

// entriesGroup reports whether a non-unique index's entries in a type
// whose primary key is pk may be kept in groups (store.WriteBatch's
// SetEntry): when the key ends in a component of fixed width, at least
// store.EntryGroupSuffix + 1 bytes, the entries that differ in their last
// bytes only are those of one index value and neighbouring primary keys,
// and cutting those bytes off keeps every entry's order. (A string's
// last bytes are its terminator, and strings of other lengths would cut
// elsewhere.)
func entriesGroup(pk []schema.KeyField) bool {
	if len(pk) == 0 {
		return false
	}
	switch pk[len(pk)-1].KeyKind() {
	case orderedcode.KindInt, orderedcode.KindUint, orderedcode.KindFloat32, orderedcode.KindFloat64:
		return true
	}
	return false
}

// keyPath is one key component: where to read it and how to encode it.
type keyPath struct {
	path *record.Path
	kind protoreflect.Kind
}

func newCatalog(state *schema.State) (*catalog, error) {
	c := &catalog{
		state: state,
		types: make(map[string]*recType, len(state.Types)),
		byID:  make(map[uint32]*recType, len(state.Types)),
	}
	for name, rt := range state.Types {
		t, err := newRecType(rt)
		if err != nil {
			return nil, fmt.Errorf("type %s: %w", name, err)
		}
		c.types[string(name)] = t
		c.byID[rt.ID] = t
	}
	return c, nil
}

func newRecType(rt *schema.RecordType) (*recType, error) {
	rec, err := record.Compile(rt.Desc)
	if err != nil {
		return nil, err
	}
	t := &recType{
		rt:     rt,
		rec:    rec,
		url:    "type.googleapis.com/" + string(rt.Name),
		prefix: keyspace.RecordPrefix(rt.ID),
	}
	t.urlField = wire.AppendString(nil, wire.AnyTypeURL, t.url)
	t.target = &query.Target{Rec: rec, Type: rt}
	for _, ix := range rt.Indexes {
		if ix.State == pb.IndexState_INDEX_STATE_READY && !ix.Aggregate {
			t.target.Indexes = append(t.target.Indexes, ix)
		}
	}
	t.point = query.NewPoint(t.target)
	if rt.TTL != nil {
		if t.exp, err = newExpiry(rec, rt.TTL); err != nil {
			return nil, fmt.Errorf("ttl: %w", err)
		}
	}
	if t.pk, err = compilePaths(rec, rt.PrimaryKey); err != nil {
		return nil, fmt.Errorf("primary key: %w", err)
	}
	seen := map[protowire.Number]bool{}
	for _, kf := range rt.PrimaryKey {
		n := kf.Fields[0].Number()
		if !seen[n] {
			seen[n] = true
			t.pkNums = append(t.pkNums, n)
		}
	}
	for _, ix := range rt.Indexes {
		if ix.State == pb.IndexState_INDEX_STATE_FAILED {
			continue
		}
		if ix.Aggregate {
			a, err := newAggIndex(t, ix)
			if err != nil {
				return nil, fmt.Errorf("aggregate index %s: %w", ix.Name, err)
			}
			t.aggs = append(t.aggs, a)
			continue
		}
		paths, err := compilePaths(rec, ix.Fields)
		if err != nil {
			return nil, fmt.Errorf("index %s: %w", ix.Name, err)
		}
		t.indexes = append(t.indexes, &index{
			ix:       ix,
			prefix:   keyspace.IndexPrefix(ix.ID),
			paths:    paths,
			building: ix.State == pb.IndexState_INDEX_STATE_BUILDING,
			grouped:  !ix.Unique && entriesGroup(rt.PrimaryKey),
		})
	}
	t.keys = newKeyExtractor(t.pk, t.indexes)
	return t, nil
}

func compilePaths(rec *record.Type, fields []schema.KeyField) ([]keyPath, error) {
	out := make([]keyPath, len(fields))
	for i, kf := range fields {
		p, err := rec.Path(kf.Path)
		if err != nil {
			return nil, err
		}
		out[i] = keyPath{path: p, kind: kf.Kind}
	}
	return out, nil
}

// lookup finds the record type of a type URL: the full name is the text
// after the last '/', as for google.protobuf.Any. The map index with a
// converted byte slice does not allocate.
func (c *catalog) lookup(typeURL string) *recType {
	if i := strings.LastIndexByte(typeURL, '/'); i >= 0 {
		typeURL = typeURL[i+1:]
	}
	return c.types[typeURL]
}

// appendKey appends the key encoding of paths read from the record bytes b.
// Absent fields encode as their default value, as protobuf reads them.
func appendKey(dst, b []byte, paths []keyPath) ([]byte, string, error) {
	for _, kp := range paths {
		v, _, err := kp.path.Get(b)
		if err != nil {
			return dst, kp.path.String(), err
		}
		dst = appendScalar(dst, kp.kind, v)
	}
	return dst, "", nil
}

func appendScalar(dst []byte, kind protoreflect.Kind, v record.Scalar) []byte {
	switch kind {
	case protoreflect.Int32Kind, protoreflect.Int64Kind, protoreflect.Sint32Kind,
		protoreflect.Sint64Kind, protoreflect.Sfixed32Kind, protoreflect.Sfixed64Kind,
		protoreflect.EnumKind:
		return orderedcode.AppendInt(dst, v.Int)
	case protoreflect.Uint32Kind, protoreflect.Uint64Kind, protoreflect.Fixed32Kind,
		protoreflect.Fixed64Kind:
		return orderedcode.AppendUint(dst, v.Uint)
	case protoreflect.BoolKind:
		return orderedcode.AppendBool(dst, v.Bool)
	case protoreflect.FloatKind:
		return orderedcode.AppendFloat32(dst, float32(v.Float))
	case protoreflect.DoubleKind:
		return orderedcode.AppendFloat64(dst, v.Float)
	case protoreflect.StringKind, protoreflect.BytesKind:
		return orderedcode.AppendBytes(dst, v.Bytes)
	}
	// The schema package refuses other kinds in keys; reaching here is a bug.
	panic(fmt.Sprintf("engine: kind %v in a key", kind))
}

// indexByID returns the maintained index with the given id, if any.
func (t *recType) indexByID(id uint32) *index {
	for _, ix := range t.indexes {
		if ix.ix.ID == id {
			return ix
		}
	}
	return nil
}
