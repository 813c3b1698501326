package engine

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strconv"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/protobase/protobase/internal/apierror"
	"github.com/protobase/protobase/internal/orderedcode"
	"github.com/protobase/protobase/internal/query"
	"github.com/protobase/protobase/internal/record"
	"github.com/protobase/protobase/internal/store"
)

// An index that names a repeated field (schema.Index.RepeatedField) has one
// entry per distinct element of the record: the entry's key holds the
// element where a singular field's value would be. A record without
// elements has no entry. The writer keeps such an index's keys of one
// record distinct, in the order the elements come (ordering them costs a
// batch of inserts a tenth of its phase 1, and its entries are ordered by
// group anyway); an update orders them to retract and write only the
// entries of the elements removed and added.

// MaxIndexEntriesPerRecord bounds the entries one record has in one index
// on a repeated field: its distinct elements. A record over it is refused
// (INVALID_ARGUMENT naming the field), and an index build meeting one
// fails: each entry is a key written in the record's batch, and the
// batch's memory and, on etcd, its operations grow with them.
const MaxIndexEntriesPerRecord = 1000

// MaxIndexEntriesPerBatch bounds the entries of one write batch in indexes
// on repeated fields, all its records together: a batch of many records
// each near MaxIndexEntriesPerRecord would otherwise hold keys many times
// its own size in memory. A batch over it is refused (RESOURCE_EXHAUSTED
// naming the record that passed it); sending fewer records per batch fits.
const MaxIndexEntriesPerBatch = 1_000_000

// tooManyElements is appendMulti's error for a record over
// MaxIndexEntriesPerRecord in an index.
type tooManyElements struct {
	n     int
	index string
}

func (e *tooManyElements) Error() string {
	return fmt.Sprintf("%d distinct elements, more than the limit of %d entries per record in index %s",
		e.n, MaxIndexEntriesPerRecord, e.index)
}

// multiKeys is the scratch of appendMulti, reused from record to record.
type multiKeys struct {
	head, tail, elems []byte
	offs              []int32 // elems[offs[i]:offs[i+1]] is element i's encoding
	order             []int32
	heads             []uint64 // heads[i]: element order[i]'s first 8 bytes, big-endian, zero-padded
}

// smallSort is the most elements distinct sorts by insertion: the usual
// record has a handful, and a general sort's calls through a comparison
// function cost more than its moves.
const smallSort = 32

// distinct sets order to the positions of the distinct elements of elems,
// ascending by their encoding.
func (m *multiKeys) distinct() {
	n := int32(len(m.offs) - 1) //nolint:gosec // bounded by the record's size
	elem := func(i int32) []byte { return m.elems[m.offs[i]:m.offs[i+1]] }
	if n > smallSort {
		for i := range n {
			m.order = append(m.order, i)
		}
		slices.SortFunc(m.order, func(a, c int32) int { return bytes.Compare(elem(a), elem(c)) })
		m.order = slices.CompactFunc(m.order, func(a, c int32) bool { return bytes.Equal(elem(a), elem(c)) })
		return
	}
	// Insertion by the elements' heads, kept beside order: padded with
	// zeros, two heads that differ order their elements as their bytes
	// do, and only equal heads need the bytes compared. The slices are
	// worked on as locals: appends through m store and reload their
	// headers at every element.
	elems, offs := m.elems, m.offs
	order, heads := m.order[:0], m.heads[:0]
next:
	for i := range n {
		e := elems[offs[i]:offs[i+1]]
		h := head8(e)
		k := len(order)
		for ; k > 0 && heads[k-1] >= h; k-- {
			if heads[k-1] > h {
				continue
			}
			o := order[k-1]
			c := bytes.Compare(elems[offs[o]:offs[o+1]], e)
			if c == 0 {
				continue next // a repeat: the first one stands
			}
			if c < 0 {
				break
			}
		}
		order, heads = append(order, i), append(heads, h)
		for j := len(order) - 1; j > k; j-- {
			order[j], heads[j] = order[j-1], heads[j-1]
		}
		order[k], heads[k] = i, h
	}
	m.order, m.heads = order, heads
}

// firsts sets order to the positions of the distinct elements of elems
// (at most smallSort), each the first of its repeats, in the order they
// come. An element is checked against those kept before it only when a
// bit picked by its head is already set in seen (most elements have no
// repeat, and their bit is free); then by head, the bytes compared only
// when heads are equal.
func (m *multiKeys) firsts() {
	elems, offs := m.elems, m.offs
	order, heads := m.order[:0], m.heads[:0]
	var seen uint64
next:
	for i := range int32(len(offs) - 1) { //nolint:gosec // at most smallSort
		e := elems[offs[i]:offs[i+1]]
		h := head8(e)
		bit := uint64(1) << (h * 0x9E3779B97F4A7C15 >> 58)
		if seen&bit != 0 {
			for k, g := range heads {
				if o := order[k]; g == h && bytes.Equal(elems[offs[o]:offs[o+1]], e) {
					continue next
				}
			}
		}
		seen |= bit
		order, heads = append(order, i), append(heads, h)
	}
	m.order, m.heads = order, heads
}

// head8 returns the first 8 bytes of e, big-endian, zero padded.
func head8(e []byte) uint64 {
	if len(e) >= 8 {
		return binary.BigEndian.Uint64(e)
	}
	var b [8]byte
	copy(b[:], e)
	return binary.BigEndian.Uint64(b[:])
}

// appendTopBytes appends to m the elements of the top-level repeated
// string or bytes field numbered num in record b, encoded as keys hold
// them, in one walk of b's fields (the usual tags field, without the
// calls per element of record.Path.Each). It reports false, having
// appended some or none, when b does not walk cleanly (malformed, or the
// field with another wire type): the path then reads b and gives the
// error a malformed record gets.
func (m *multiKeys) appendTopBytes(b []byte, num protowire.Number) bool {
	for i := 0; i < len(b); {
		fnum, wt, one := oneByteTag(b[i])
		n := 1
		if !one {
			if fnum, wt, n = fieldTag(b[i:]); n < 0 {
				return false
			}
		}
		i += n
		if fnum != num {
			k := valueLen(fnum, wt, b[i:])
			if k < 0 {
				return false
			}
			i += k
			continue
		}
		if wt != protowire.BytesType {
			return false
		}
		v, k := protowire.ConsumeBytes(b[i:])
		if k < 0 {
			return false
		}
		i += k
		m.elems = orderedcode.AppendBytes(m.elems, v)
		m.offs = append(m.offs, int32(len(m.elems))) //nolint:gosec // bounded by the record's size
	}
	return true
}

// appendMulti appends to dst the entry keys of record b in the j-th
// maintained index, which has a repeated field: for each distinct element
// (in ascending order when ordered says so or the elements are many, else
// in the order they come), prefix, the key with the element in place of the
// repeated field, then suffix (the primary key of a non-unique entry). It
// appends each key's end offset in dst to ends. On error it names the
// field.
func (x *keyExtractor) appendMulti(dst, b []byte, occ []occurrence, j int, prefix, suffix []byte,
	ends []int32, m *multiKeys, ordered bool) ([]byte, []int32, string, error) {
	fields := x.ixs[j]
	r := x.multi[j]
	var field string
	var err error
	// The parts every key of the record shares are put together once:
	// each key is then three copies, its element between them.
	if m.head, field, err = appendFields(append(m.head[:0], prefix...), b, occ, fields[:r]); err != nil {
		return dst, ends, field, err
	}
	if m.tail, field, err = appendFields(m.tail[:0], b, occ, fields[r+1:]); err != nil {
		return dst, ends, field, err
	}
	m.tail = append(m.tail, suffix...)
	f := &fields[r]
	m.elems, m.offs, m.order = m.elems[:0], append(m.offs[:0], 0), m.order[:0]
	if num := x.topBytes[j]; num == 0 || !m.appendTopBytes(b, num) {
		m.elems, m.offs = m.elems[:0], m.offs[:1]
		err = f.path.Each(b, func(v record.Scalar) bool {
			m.elems = appendScalar(m.elems, f.kind, v)
			m.offs = append(m.offs, int32(len(m.elems))) //nolint:gosec // bounded by the record's size
			return true
		})
		if err != nil {
			return dst, ends, f.path.String(), err
		}
	}
	if ordered || len(m.offs)-1 > smallSort {
		m.distinct()
	} else {
		m.firsts()
	}
	elem := func(i int32) []byte { return m.elems[m.offs[i]:m.offs[i+1]] }
	if n := len(m.order); n > MaxIndexEntriesPerRecord {
		return dst, ends, f.path.String(), &tooManyElements{n: n, index: x.names[j]}
	}
	for _, i := range m.order {
		dst = append(dst, m.head...)
		dst = append(dst, elem(i)...)
		dst = append(dst, m.tail...)
		ends = append(ends, int32(len(dst))) //nolint:gosec // the arena stays under 2 GiB: batches are bounded
	}
	return dst, ends, "", nil
}

// entryKeys returns the keys of record b's entries in ix, a maintained
// index of t, pk being the record's primary key: none (a unique index and
// an absent field, or a repeated field without elements), one, or one per
// distinct element of a repeated field, in ascending order. It reads every
// field over the whole record, for the builder, the checker and reads,
// which do not share the writer's walk.
func (t *recType) entryKeys(ix *index, b, pk []byte) ([][]byte, error) {
	j := slices.Index(t.indexes, ix)
	if j < 0 {
		return nil, fmt.Errorf("index %s is not maintained", ix.ix.Name)
	}
	var suffix []byte
	if !ix.ix.Unique {
		suffix = pk
	}
	if t.keys.multi[j] >= 0 {
		var m multiKeys
		buf, ends, _, err := t.keys.appendMulti(nil, b, nil, j, ix.prefix, suffix, nil, &m, true)
		if err != nil {
			return nil, err
		}
		out := make([][]byte, len(ends))
		s := int32(0)
		for i, e := range ends {
			out[i], s = buf[s:e:e], e
		}
		return out, nil
	}
	if skip, err := t.keys.absent(b, nil, j); err != nil || skip {
		return nil, err
	}
	k := append([]byte(nil), ix.prefix...)
	k, _, err := appendKey(k, b, ix.paths)
	if err != nil {
		return nil, err
	}
	return [][]byte{append(k, suffix...)}, nil
}

// entries returns the arena spans of p's entry keys in its type's index j
// (see appendIndexKeys): for a singular index its one span, or none when
// the record has no entry; for an index on a repeated field, one per
// distinct element, ascending.
func (w *Writer) entries(p *prep, j int) []span {
	k := int(p.ix) + j
	s := w.ixOff[k]
	if p.t.keys.multi[j] >= 0 {
		return w.mkeys[s.s:s.e]
	}
	if s.s == s.e {
		return nil
	}
	return w.ixOff[k : k+1]
}

// appendMultiKeys is appendIndexKeys for index j of p's type, which names
// a repeated field: it appends the entry keys to the arena, their spans to
// w.mkeys, and to ixOff the span of w.mkeys they take.
func (w *Writer) appendMultiKeys(i int, p *prep, val []byte, j int, mark bool) (dups bool, err error) {
	ix := p.t.indexes[j]
	var suffix []byte
	if !ix.ix.Unique {
		// The arena may move as it grows: the key is copied first.
		w.pkBuf = append(w.pkBuf[:0], w.bytes(p.pk)...)
		suffix = w.pkBuf
	}
	s0, m0 := len(w.arena), len(w.mkeys)
	var field string
	w.mends = w.mends[:0]
	if w.arena, w.mends, field, err = p.t.keys.appendMulti(w.arena, val, w.occ, j, ix.prefix, suffix, w.mends, &w.multi, false); err != nil {
		w.arena = w.arena[:s0]
		return false, recordError(apierror.InvalidArgument, i, p.url, field, err.Error())
	}
	if n := len(w.mkeys) + len(w.mends); n > MaxIndexEntriesPerBatch {
		w.arena = w.arena[:s0]
		return false, recordError(apierror.ResourceExhausted, i, p.url, ix.ix.Fields[p.t.keys.multi[j]].Path,
			"the batch's records have more than "+strconv.Itoa(MaxIndexEntriesPerBatch)+
				" entries in indexes on repeated fields together: send fewer records per batch")
	}
	s := int32(s0) //nolint:gosec // the arena stays under 2 GiB
	for _, e := range w.mends {
		k := span{s, e}
		w.mkeys = append(w.mkeys, k)
		if ix.ix.Unique && mark {
			dups = w.markUniqueSpan(k) || dups
		}
		s = e
	}
	w.ixOff = append(w.ixOff, span{int32(m0), int32(len(w.mkeys))}) //nolint:gosec // bounded by the batch
	return dups, nil
}

// retractMulti deletes the entries of old, the record p replaces (or
// removes), in index j of its type, which names a repeated field, except
// those p writes again: only the entries of elements removed go.
func (w *Writer) retractMulti(b store.WriteBatch, op Op, p *prep, old []byte, j int, dups bool) error {
	t := p.t
	ix := t.indexes[j]
	pk := w.bytes(p.pk)
	var suffix []byte
	if !ix.ix.Unique {
		suffix = pk
	}
	var err error
	w.oldIx, w.oldEnds, _, err = t.keys.appendMulti(w.oldIx[:0], old, w.oldOcc, j, ix.prefix, suffix, w.oldEnds[:0], &w.multi, true)
	var over *tooManyElements
	if errors.As(err, &over) {
		// A record over the limit has no entries: writes refuse it, and
		// an index build meeting it fails. It was stored before the
		// index, which is building, and the update or remove replacing
		// it is what lets that build succeed.
		return nil
	}
	if err != nil {
		return &apierror.Error{Code: apierror.Internal, Msg: "stored record of " + p.url + " unreadable: " + err.Error(), Err: err}
	}
	var keep []span
	if op != OpRemove {
		keep = w.entries(p, j)
		// Phase 1 left them in the order of their elements.
		slices.SortFunc(keep, func(x, y span) int { return bytes.Compare(w.bytes(x), w.bytes(y)) })
	}
	s := int32(0)
	for _, e := range w.oldEnds {
		k := w.oldIx[s:e]
		s = e
		// Both lists ascend: the entries kept before k are passed for good.
		for len(keep) > 0 && bytes.Compare(w.bytes(keep[0]), k) < 0 {
			keep = keep[1:]
		}
		if len(keep) > 0 && bytes.Equal(w.bytes(keep[0]), k) {
			continue
		}
		if ix.ix.Unique {
			cur, ok, err := w.get(k, &w.ixBuf, dups, false)
			if err != nil {
				return err
			}
			if !ok || !bytes.Equal(cur, pk) {
				continue
			}
		}
		w.delEntry(b, ix, k, dups || ix.ix.Unique)
	}
	return nil
}

// elementOf renders the element that the unique entry key k of index j,
// which names a repeated field, holds: for the error of a record whose
// element another record has.
func (x *keyExtractor) elementOf(ix *index, j int, k []byte) string {
	rest := k[len(ix.prefix):]
	r := x.multi[j]
	for _, kf := range ix.ix.Fields[:r] {
		var err error
		if rest, err = orderedcode.Skip(rest, kf.KeyKind()); err != nil {
			return "?"
		}
	}
	kf := ix.ix.Fields[r]
	v, _, err := orderedcode.Decode(rest, kf.KeyKind())
	if err != nil {
		return "?"
	}
	switch kf.KeyKind() {
	case orderedcode.KindString:
		return strconv.Quote(string(v.Bytes))
	case orderedcode.KindBytes:
		return fmt.Sprintf("0x%x", v.Bytes)
	case orderedcode.KindInt:
		return strconv.FormatInt(v.Int, 10)
	case orderedcode.KindUint:
		return strconv.FormatUint(v.Uint, 10)
	case orderedcode.KindBool:
		return strconv.FormatBool(v.Bool)
	}
	return strconv.FormatFloat(v.Float, 'g', -1, 64)
}

// multiScratch is what a cursor reading an index on a repeated field
// reuses from record to record (seenEarlier).
type multiScratch struct {
	keys []byte
	ends []int32
	m    multiKeys
}

// seenEarlier reports whether the record rec, of record key rk, found at
// the entry key of an index on a repeated field, has another entry that
// the plan's ranges hold and the read meets before key: the record is then
// a result once, at that entry. A record matching `tags in ("a", "b")` has
// an entry in the range of each element it holds. Asking the plan's whole
// ranges, not the part a page or a split scan reads, gives every reader
// the same first entry.
func (cu *cursor) seenEarlier(key, rk, rec []byte) (bool, error) {
	p := cu.c.plan
	t := cu.c.t
	j := -1
	for i, ix := range t.indexes {
		if ix.ix.ID == p.Index.ID {
			j = i
		}
	}
	if j < 0 {
		return false, nil
	}
	ix := t.indexes[j]
	var suffix []byte
	if !ix.ix.Unique {
		suffix = rk[len(t.prefix):]
	}
	if cu.ms == nil {
		cu.ms = new(multiScratch)
	}
	s := cu.ms
	var err error
	s.keys, s.ends, _, err = t.keys.appendMulti(s.keys[:0], rec, nil, j, ix.prefix, suffix, s.ends[:0], &s.m, true)
	if err != nil {
		return false, &apierror.Error{Code: apierror.Internal, Msg: "stored record unreadable: " + err.Error(), Err: err}
	}
	start := int32(0)
	for _, e := range s.ends {
		k := s.keys[start:e]
		start = e
		c := bytes.Compare(k, key)
		if p.Reverse {
			c = -c
		}
		if c < 0 && inRanges(p.Ranges, k) {
			return true, nil
		}
	}
	return false, nil
}

// inRanges reports whether k lies in one of rs, which are sorted and
// disjoint.
func inRanges(rs []query.Range, k []byte) bool {
	i, _ := slices.BinarySearchFunc(rs, k, func(r query.Range, k []byte) int {
		if bytes.Compare(r.Start, k) > 0 {
			return 1
		}
		if r.End != nil && bytes.Compare(k, r.End) >= 0 {
			return -1
		}
		return 0
	})
	return i < len(rs) && bytes.Compare(rs[i].Start, k) <= 0 && (rs[i].End == nil || bytes.Compare(k, rs[i].End) < 0)
}

// sortedEntry is an entry key of the batch (and its value) placed by its
// first 16 bytes past the prefix every key of the sort shares, big-endian
// and zero padded, so that most comparisons of putSorted need no
// bytes.Compare. putGroups keeps its groups as sortedEntrys too (see
// groupScratch).
type sortedEntry struct {
	hi, lo uint64
	k, v   span
	ix     *index
}

// putSorted writes the batch's entries in the j-th index of their types,
// in key order, when one of those indexes names a repeated field, and
// reports whether it did: a group at a time (putGroups) when all those
// indexes are grouped, else each entry in turn. A record's elements land
// all over such an index, ten entries a record scattered through the
// memtable; in key order each insert starts next to the one before it
// (Pebble's skiplist inserter keeps its last position).
func (w *Writer) putSorted(b store.WriteBatch, j int) bool {
	multi := false
	for i := range w.preps {
		if p := &w.preps[i]; j < len(p.t.indexes) && p.t.keys.multi[j] >= 0 {
			multi = true
			break
		}
	}
	if !multi {
		return false
	}
	// The keys share their index prefix (all of it when the batch holds
	// one type): the heads are taken past it, where the keys differ.
	var shared []byte
	for i := range w.preps {
		if p := &w.preps[i]; j < len(p.t.indexes) {
			pre := p.t.indexes[j].prefix
			if shared == nil {
				shared = pre
			}
			n := 0
			for n < len(shared) && n < len(pre) && shared[n] == pre[n] {
				n++
			}
			shared = shared[:n]
		}
	}
	skip := len(shared)
	if w.putGroups(b, j, skip) {
		return true
	}
	w.sorted = w.sorted[:0]
	for i := range w.preps {
		p := &w.preps[i]
		if j >= len(p.t.indexes) {
			continue
		}
		ix := p.t.indexes[j]
		var v span
		if ix.ix.Unique {
			v = p.pk
		}
		for _, k := range w.entries(p, j) {
			hi, lo := keyHead(w.bytes(k)[skip:])
			w.sorted = append(w.sorted, sortedEntry{hi: hi, lo: lo, k: k, v: v, ix: ix})
		}
	}
	w.sortEntries(skip)
	for _, e := range w.sorted {
		var v []byte
		if e.v.e > e.v.s {
			v = w.bytes(e.v)
		}
		w.setEntry(b, e.ix, w.bytes(e.k), v, false)
	}
	return true
}
