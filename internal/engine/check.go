package engine

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/protobase/protobase/internal/changelog"
	"github.com/protobase/protobase/internal/keyspace"
	"github.com/protobase/protobase/internal/orderedcode"
	"github.com/protobase/protobase/internal/schema"
	"github.com/protobase/protobase/internal/store"
)

// Check verifies that a store's secondary indexes agree with its records:
//
//   - every index entry belongs to a maintained index of a known type, and
//     points at a live record that holds the entry's value;
//   - every record has the entry of every READY index (an index still
//     BUILDING may lack entries of records the builder has not reached);
//   - a unique index holds exactly one entry per value, so no two records
//     share a value, and no entry for a record lacking one of its fields
//     that can be absent (those records are left out, see
//     keyExtractor.absent);
//   - every READY aggregate index holds, per group, the count and sums
//     its records add up to, and no entry for a group without records
//     (checkagg.go);
//   - every record belongs to a known type and its key decodes;
//   - every record's version is well formed (store.HeaderChecker, on a
//     store that keeps it in a header of the record's value) and not 0,
//     and, on a store that is not Shared, not above the last commit: the
//     engine stamps each batch's records with its commit sequence, and
//     that sequence is written in the same batch;
//   - every change-log entry reads, every change of it and every part of
//     an entry stored in parts, and the entries are consecutive commits
//     ending at or before the last commit (the log is Watch's history:
//     a damaged entry would fail every watcher that reaches it).
//
// Check reads one snapshot and never writes, so it may run on a store that
// a server is using; an operator runs it through server.Check on a data
// directory no server holds. It returns an error only when the store cannot
// be read; inconsistencies are in the report.
//
// The key layout Check relies on is spelled out in checkLayout below, the
// one place to re-point when the layout moves.
func Check(ctx context.Context, st store.KV) (*CheckReport, error) {
	snap, err := st.OpenSnapshot()
	if err != nil {
		return nil, fmt.Errorf("check: open snapshot: %w", err)
	}
	defer snap.Close()
	raw, found, err := snap.Get(checkLayout.schemaKey, nil)
	if err != nil {
		return nil, fmt.Errorf("check: read schema state: %w", err)
	}
	state := schema.Empty()
	if found {
		if state, err = schema.Decode(ctx, raw); err != nil {
			return nil, fmt.Errorf("check: decode schema state: %w", err)
		}
	}
	cat, err := newCatalog(state)
	if err != nil {
		return nil, fmt.Errorf("check: load schema state: %w", err)
	}
	c := &checker{ctx: ctx, snap: snap, cat: cat, r: &CheckReport{}, shared: st.Shared(),
		present: map[uint32]int{}, listed: map[uint32]int{}}
	if g, ok := st.(store.EntryGrouper); ok && g.GroupsEntries() {
		c.groups = newEntryGroups(snap)
		defer c.groups.close()
	}
	if raw, found, err := snap.Get(keySeq, nil); err != nil {
		return nil, fmt.Errorf("check: read the last commit: %w", err)
	} else if found && len(raw) == 8 {
		c.seq = binary.BigEndian.Uint64(raw)
	}
	if err := c.records(); err != nil {
		return nil, err
	}
	if err := c.entries(); err != nil {
		return nil, err
	}
	if err := c.changeLog(); err != nil {
		return nil, err
	}
	return c.r, nil
}

// CheckReport is what Check found: counts of what it read and every
// inconsistency, in key order within each pass.
type CheckReport struct {
	Types   int    // record types in the schema
	Indexes int    // secondary indexes checked (READY or BUILDING)
	Records uint64 // records read
	Entries uint64 // index entries read
	// LogEntries counts the change-log entries read.
	LogEntries uint64
	Problems   []Problem
}

// OK reports whether Check found no inconsistency.
func (r *CheckReport) OK() bool { return len(r.Problems) == 0 }

// WriteTo prints the report for a person: one line per problem, then a
// summary line.
func (r *CheckReport) WriteTo(w io.Writer) (int64, error) {
	var buf bytes.Buffer
	for _, p := range r.Problems {
		fmt.Fprintln(&buf, p.String())
	}
	verdict := "consistent"
	if !r.OK() {
		verdict = fmt.Sprintf("INCONSISTENT: %d problems", len(r.Problems))
	}
	fmt.Fprintf(&buf, "%d types, %d indexes, %d records, %d index entries, %d change-log entries: %s\n",
		r.Types, r.Indexes, r.Records, r.Entries, r.LogEntries, verdict)
	n, err := w.Write(buf.Bytes())
	return int64(n), err
}

// ProblemKind classifies an inconsistency.
type ProblemKind string

// The kinds of inconsistency Check reports.
const (
	// ProblemMissingEntry: a record lacks its entry in a READY index.
	ProblemMissingEntry ProblemKind = "missing-entry"
	// ProblemDanglingEntry: an index entry points at no record.
	ProblemDanglingEntry ProblemKind = "dangling-entry"
	// ProblemStaleEntry: an index entry points at a record that does not
	// hold the entry's value.
	ProblemStaleEntry ProblemKind = "stale-entry"
	// ProblemDuplicateUnique: two records share a value of a unique index.
	ProblemDuplicateUnique ProblemKind = "duplicate-unique"
	// ProblemOrphanEntry: an entry of an index that is not maintained
	// (unknown, dropped or failed).
	ProblemOrphanEntry ProblemKind = "orphan-entry"
	// ProblemOrphanRecord: a record of an unknown type.
	ProblemOrphanRecord ProblemKind = "orphan-record"
	// ProblemBadKey: a key or stored record that does not decode.
	ProblemBadKey ProblemKind = "bad-key"
	// ProblemBadVersion: a record's version header is malformed, or its
	// version is 0 or above the last commit.
	ProblemBadVersion ProblemKind = "bad-version"
	// ProblemBadLogEntry: a change-log entry (or one of its parts) that
	// does not read, or a key in the log that is no entry's.
	ProblemBadLogEntry ProblemKind = "bad-log-entry"
	// ProblemLogGap: the change log's commits are not consecutive, or go
	// past the last commit.
	ProblemLogGap ProblemKind = "log-gap"
)

// Problem is one inconsistency.
type Problem struct {
	Kind  ProblemKind
	Type  string // record type, when known
	Index string // index name, when the problem is an index's
	// Key is the store key at fault: the index entry's, or the record's
	// for missing entries and duplicates.
	Key    []byte
	Detail string
}

func (p Problem) String() string {
	s := string(p.Kind)
	if p.Type != "" {
		s += " " + p.Type
	}
	if p.Index != "" {
		s += " index " + p.Index
	}
	return fmt.Sprintf("%s key %x: %s", s, p.Key, p.Detail)
}

// checkLayout is everything Check knows about the key layout (internal/keyspace): where the schema lives, the record and index spaces and
// how their keys split into id and rest.
var checkLayout = struct {
	schemaKey             []byte
	recordSpace, ixSpace  byte
	recordKey, indexEntry func(prefix, pk []byte) []byte
}{
	schemaKey:   keySchema,
	recordSpace: keyspace.TagRecord,
	ixSpace:     keyspace.TagIndex,
	recordKey:   func(prefix, pk []byte) []byte { return append(append([]byte(nil), prefix...), pk...) },
	indexEntry:  func(ixKey, pk []byte) []byte { return append(append([]byte(nil), ixKey...), pk...) },
}

// spaceID splits a record or index key into its space-local id and the rest.
func spaceID(k []byte) (uint32, []byte, bool) {
	if len(k) < keyspace.PrefixLen {
		return 0, nil, false
	}
	return binary.BigEndian.Uint32(k[1:keyspace.PrefixLen]), k[keyspace.PrefixLen:], true
}

// checker holds one Check's state.
type checker struct {
	ctx  context.Context
	snap store.ReadSnapshot
	cat  *catalog
	r    *CheckReport
	// seq is the last commit at the snapshot; shared says the store
	// numbers versions itself (etcd), which seq does not bound.
	seq    uint64
	shared bool

	cur []byte     // scratch for oneEntry: the entry read
	ra  *readAhead // the records pass's reads of entries
	// groups reads the entries of grouped indexes on a store that keeps
	// them in groups, which point reads do not find (checkgroups.go); nil
	// on other stores.
	groups *entryGroups
	// present counts, per index on a repeated field, the entries the
	// records pass found in place; listed those the entries pass met.
	// When the two agree the entries are exactly the records' (see
	// checkElements).
	present, listed map[uint32]int
	// aggs are the groups of the aggregate indexes, recomputed from the
	// records (checkagg.go).
	aggs aggChanges
}

func (c *checker) add(p Problem) { c.r.Problems = append(c.r.Problems, p) }

// maintained returns the indexes of t that Check verifies: READY and
// BUILDING. The catalog leaves FAILED ones out, whose entries were deleted
// with the failure, so an entry of one is an orphan.
func maintained(t *recType) []*index { return t.indexes }

// records is the first pass: every record has its index entries, and no
// two records share a unique value.
func (c *checker) records() error {
	c.r.Types = len(c.cat.types)
	for _, t := range c.cat.types {
		c.r.Indexes += len(maintained(t)) + len(t.aggs)
	}
	lo, hi := []byte{checkLayout.recordSpace}, []byte{checkLayout.recordSpace + 1}
	it, err := c.snap.NewIterator(lo, hi)
	if err != nil {
		return fmt.Errorf("check: iterate records: %w", err)
	}
	defer it.Close()
	if c.ra, err = newReadAhead(c.snap, c.shared, lo, hi, c.entryReads); err != nil {
		return fmt.Errorf("check: iterate records: %w", err)
	}
	defer c.ra.Close()
	for ok := it.First(); ok; ok = it.Next() {
		if err := c.ctx.Err(); err != nil {
			return err
		}
		if err := c.ra.step(); err != nil {
			return err
		}
		key, val := it.Key(), it.Value()
		if string(key) == keyspace.ExpiryMarkKey {
			continue // the reaper's mark on a shared store, not a record
		}
		c.r.Records++
		id, pk, ok := spaceID(key)
		t := c.cat.byID[id]
		if !ok || t == nil {
			c.add(Problem{Kind: ProblemOrphanRecord, Key: bytes.Clone(key), Detail: "record of no known type"})
			continue
		}
		name := string(t.rt.Name)
		c.version(it, name, key)
		if !validKey(pk, t.rt.PrimaryKey) {
			c.add(Problem{Kind: ProblemBadKey, Type: name, Key: bytes.Clone(key), Detail: "primary key does not decode"})
			continue
		}
		for _, ix := range maintained(t) {
			if err := c.entry(t, ix, key, pk, val); err != nil {
				return err
			}
		}
		c.noteAggregates(t, key, val)
	}
	if err := it.Error(); err != nil {
		return fmt.Errorf("check: iterate records: %w", err)
	}
	return nil
}

// entryReads appends the index entries the records pass reads for the
// record (key, val): those its maintained indexes should hold.
func (c *checker) entryReads(key, val []byte, out [][]byte) [][]byte {
	id, pk, ok := spaceID(key)
	t := c.cat.byID[id]
	if !ok || t == nil || !validKey(pk, t.rt.PrimaryKey) {
		return out
	}
	for _, ix := range maintained(t) {
		if keys, err := t.entryKeys(ix, val, pk); err == nil {
			out = append(out, keys...)
		}
	}
	return out
}

// version checks the version of the record the iterator is on, of type
// typ under key.
func (c *checker) version(it store.Iterator, typ string, key []byte) {
	detail := ""
	if hc, ok := it.(store.HeaderChecker); ok {
		detail = hc.HeaderProblem()
	}
	if detail == "" {
		switch v := it.Version(); {
		case v == 0:
			detail = "the record has version 0, which means absent"
		case !c.shared && v > c.seq:
			detail = fmt.Sprintf("version %d is above the last commit, %d", v, c.seq)
		}
	}
	if detail != "" {
		c.add(Problem{Kind: ProblemBadVersion, Type: typ, Key: bytes.Clone(key), Detail: detail})
	}
}

// entry checks that the record (key, pk, val) of t has its entries in ix
// (one, none, or one per distinct element of a repeated field), and that
// a unique entry names it.
func (c *checker) entry(t *recType, ix *index, key, pk, val []byte) error {
	name := string(t.rt.Name)
	keys, err := t.entryKeys(ix, val, pk)
	if err != nil {
		return c.badRecord(name, ix, key, "stored record does not yield its index keys: ", err)
	}
	// A record that has expired conflicts with nothing and no read
	// returns it: a later record may have taken its unique value
	// (expiry.go), and an index built after it expired has no entry for
	// it (build.go). Time only moves on, so it is expired still. The
	// expiry index holds every record until the reaper deletes it.
	expired := !ix.ix.Expiry && t.expired(val, instantOf(time.Now()))
	for _, want := range keys {
		if err := c.oneEntry(t, ix, key, pk, want, expired); err != nil {
			return err
		}
	}
	return nil
}

// oneEntry checks the entry want of the record (key, pk) of t in ix;
// expired says the record has expired.
func (c *checker) oneEntry(t *recType, ix *index, key, pk, want []byte, expired bool) error {
	name := string(t.rt.Name)
	var wantVal []byte
	if ix.ix.Unique {
		wantVal = pk
	}
	cur, found, err := c.readEntry(ix, want)
	c.cur = cur
	if err != nil {
		return fmt.Errorf("check: read index entry: %w", err)
	}
	switch {
	case found && bytes.Equal(cur, wantVal):
		if ix.ix.RepeatedField() >= 0 {
			c.present[ix.ix.ID]++
		}
	case found && ix.ix.Unique && (ix.building || expired):
		// The builder has not reached this record, or will fail
		// the build on the shared value, or the record expired and
		// another took its value: none is damage.
	case found && ix.ix.Unique:
		if c.holds(t, ix, cur, want) {
			c.add(Problem{Kind: ProblemDuplicateUnique, Type: name, Index: ix.ix.Name, Key: bytes.Clone(key),
				Detail: fmt.Sprintf("record shares its value with the record of primary key %x, which holds the entry", cur)})
		} else {
			c.add(Problem{Kind: ProblemMissingEntry, Type: name, Index: ix.ix.Name, Key: bytes.Clone(key),
				Detail: fmt.Sprintf("the value's entry points at primary key %x instead", cur)})
		}
	case found:
		c.add(Problem{Kind: ProblemBadKey, Type: name, Index: ix.ix.Name, Key: bytes.Clone(key),
			Detail: "non-unique entry has a value"})
	case !ix.building && !expired:
		c.add(Problem{Kind: ProblemMissingEntry, Type: name, Index: ix.ix.Name, Key: bytes.Clone(key),
			Detail: fmt.Sprintf("no entry %x", want)})
	}
	return nil
}

// readEntry reads the index entry want of ix.
func (c *checker) readEntry(ix *index, want []byte) ([]byte, bool, error) {
	if c.groups == nil || !ix.grouped {
		return c.ra.get(want, c.cur)
	}
	found, err := c.groups.has(want)
	return c.cur[:0], found, err
}

// badRecord records that the stored record of key cannot be checked against
// ix; the check goes on with the next one.
func (c *checker) badRecord(typ string, ix *index, key []byte, detail string, err error) error {
	c.add(Problem{Kind: ProblemBadKey, Type: typ, Index: ix.ix.Name, Key: bytes.Clone(key), Detail: detail + err.Error()})
	return nil
}

// holds reports whether the record of primary key pk exists and yields the
// index entry key ek.
func (c *checker) holds(t *recType, ix *index, pk, ek []byte) bool {
	val, found, err := c.snap.Get(checkLayout.recordKey(t.prefix, pk), nil)
	if err != nil || !found {
		return false
	}
	ok, err := yields(t, ix, val, pk, ek)
	return err == nil && ok
}

// yields reports whether the record val of primary key pk has the entry
// ek in ix.
func yields(t *recType, ix *index, val, pk, ek []byte) (bool, error) {
	keys, err := t.entryKeys(ix, val, pk)
	if err != nil {
		return false, err
	}
	return slices.ContainsFunc(keys, func(k []byte) bool { return bytes.Equal(k, ek) }), nil
}

// entries is the second pass: every index entry belongs to a maintained
// index and points at a live record holding its value.
func (c *checker) entries() error {
	indexes, owner, aggIDs := c.indexesByID()
	lo, hi := []byte{checkLayout.ixSpace}, []byte{checkLayout.ixSpace + 1}
	it, err := c.snap.NewIterator(lo, hi)
	if err != nil {
		return fmt.Errorf("check: iterate index entries: %w", err)
	}
	defer it.Close()
	ra, err := newReadAhead(c.snap, c.shared, lo, hi, func(key, val []byte, out [][]byte) [][]byte {
		return recordReads(indexes, owner, key, val, out)
	})
	if err != nil {
		return fmt.Errorf("check: iterate index entries: %w", err)
	}
	defer ra.Close()
	for ok := it.First(); ok; ok = it.Next() {
		if err := c.ctx.Err(); err != nil {
			return err
		}
		if err := ra.step(); err != nil {
			return err
		}
		c.r.Entries++
		key := it.Key()
		id, rest, ok := spaceID(key)
		ix := indexes[id]
		if ok && ix == nil && aggIDs[id] {
			continue // checkAggregates
		}
		if !ok || ix == nil {
			c.add(Problem{Kind: ProblemOrphanEntry, Key: bytes.Clone(key), Detail: fmt.Sprintf("entry of index id %d, which no type maintains", id)})
			continue
		}
		t := owner[id]
		p := Problem{Type: string(t.rt.Name), Index: ix.ix.Name, Key: bytes.Clone(key)}
		pk := entryPK(ix, rest, it.Value())
		if pk == nil || !validKey(pk, t.rt.PrimaryKey) {
			p.Kind, p.Detail = ProblemBadKey, "entry does not decode to a primary key"
			c.add(p)
			continue
		}
		val, found, err := ra.get(checkLayout.recordKey(t.prefix, pk), nil)
		if err != nil {
			return fmt.Errorf("check: read record: %w", err)
		}
		if !found {
			p.Kind, p.Detail = ProblemDanglingEntry, fmt.Sprintf("points at primary key %x, which has no record", pk)
			c.add(p)
			continue
		}
		if ix.ix.RepeatedField() >= 0 {
			c.listed[id]++ // the record's entries are compared as a whole: checkElements
			continue
		}
		if skip, err := t.skips(ix, val); err == nil && skip {
			p.Kind, p.Detail = ProblemStaleEntry, fmt.Sprintf("points at primary key %x, whose record lacks a field of the index and so has no entry", pk)
			c.add(p)
			continue
		}
		if ok, err := yields(t, ix, val, pk, key); err != nil || !ok {
			p.Kind, p.Detail = ProblemStaleEntry, fmt.Sprintf("points at primary key %x, whose record holds another value", pk)
			c.add(p)
		}
	}
	if err := it.Error(); err != nil {
		return fmt.Errorf("check: iterate index entries: %w", err)
	}
	for id, ix := range indexes {
		if err := c.checkElements(owner[id], ix); err != nil {
			return err
		}
	}
	return c.checkAggregates()
}

// indexesByID returns the indexes the checker verifies and their types,
// by index id, and the ids of the aggregate indexes.
func (c *checker) indexesByID() (indexes map[uint32]*index, owner map[uint32]*recType, aggIDs map[uint32]bool) {
	indexes, owner, aggIDs = map[uint32]*index{}, map[uint32]*recType{}, map[uint32]bool{}
	for _, t := range c.cat.types {
		for _, ix := range maintained(t) {
			indexes[ix.ix.ID], owner[ix.ix.ID] = ix, t
		}
		for _, a := range t.aggs {
			aggIDs[a.ix.ID] = true
		}
	}
	return indexes, owner, aggIDs
}

// recordReads appends the record key the entries pass reads for the
// entry (key, val): the record it names, if it decodes.
func recordReads(indexes map[uint32]*index, owner map[uint32]*recType, key, val []byte, out [][]byte) [][]byte {
	id, rest, ok := spaceID(key)
	if ix := indexes[id]; ok && ix != nil {
		if pk := entryPK(ix, rest, val); pk != nil {
			out = append(out, checkLayout.recordKey(owner[id].prefix, pk))
		}
	}
	return out
}

// entryPK returns the primary key an entry of ix names: its value in a
// unique index, the end of its key (rest, after the index id) in another;
// nil if the key does not decode.
func entryPK(ix *index, rest, val []byte) []byte {
	if ix.ix.Unique {
		return val
	}
	return skipKey(rest, ix.ix.Fields)
}

// checkElements finds the stale entries of ix, an index on a repeated
// field. Reading a record's entries costs a walk of all its elements, so
// the entries pass does not do it per entry (a record of 1,000 elements
// would be read 1,000 times): the records pass counted the entries it
// found in place, each the entry of a record, and when the index holds
// as many (and its records pass met every entry, which a build in
// progress need not), they are the same set and none is stale. Otherwise
// each entry is checked against its record.
func (c *checker) checkElements(t *recType, ix *index) error {
	id := ix.ix.ID
	if ix.ix.RepeatedField() < 0 || (c.listed[id] == c.present[id] && !ix.building) {
		return nil
	}
	prefix := ix.prefix
	it, err := c.snap.NewIterator(prefix, keyspace.PrefixEnd(prefix))
	if err != nil {
		return fmt.Errorf("check: iterate index entries: %w", err)
	}
	defer it.Close()
	for ok := it.First(); ok; ok = it.Next() {
		if err := c.ctx.Err(); err != nil {
			return err
		}
		key := it.Key()
		pk := it.Value()
		if !ix.ix.Unique {
			pk = skipKey(key[len(prefix):], ix.ix.Fields)
		}
		if pk == nil || !validKey(pk, t.rt.PrimaryKey) {
			continue // reported by the entries pass
		}
		val, found, err := c.snap.Get(checkLayout.recordKey(t.prefix, pk), nil)
		if err != nil {
			return fmt.Errorf("check: read record: %w", err)
		}
		if !found {
			continue // reported by the entries pass
		}
		if ok, err := yields(t, ix, val, pk, key); err != nil || !ok {
			c.add(Problem{Kind: ProblemStaleEntry, Type: string(t.rt.Name), Index: ix.ix.Name, Key: bytes.Clone(key),
				Detail: fmt.Sprintf("points at primary key %x, whose record holds no such element", pk)})
		}
	}
	if err := it.Error(); err != nil {
		return fmt.Errorf("check: iterate index entries: %w", err)
	}
	return nil
}

// skipKey returns what follows the encoded fields in b (a non-unique
// entry's primary key), or nil when b does not decode.
func skipKey(b []byte, fields []schema.KeyField) []byte {
	for _, f := range fields {
		var err error
		if b, err = orderedcode.Skip(b, f.KeyKind()); err != nil {
			return nil
		}
	}
	return b
}

// validKey reports whether b is exactly the encoding of fields.
func validKey(b []byte, fields []schema.KeyField) bool {
	rest := skipKey(b, fields)
	return rest != nil && len(rest) == 0
}

// changeLog is the third pass: every change-log entry reads to its last
// change (its parts included), and the entries are consecutive commits
// up to the last commit at most (changelog.Check). A storage error (a
// damaged block) fails the check with the error, as in the other passes.
func (c *checker) changeLog() error {
	n, err := changelog.Check(c.ctx, c.snap, c.seq, func(p changelog.Problem) {
		kind := ProblemBadLogEntry
		if p.Gap {
			kind = ProblemLogGap
		}
		c.add(Problem{Kind: kind, Key: p.Key, Detail: p.Detail})
	})
	c.r.LogEntries = n
	return err
}
