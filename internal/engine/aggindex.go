package engine

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"slices"

	pb "github.com/protobase/protobase/gen/protobase/v1"
	"github.com/protobase/protobase/internal/apierror"
	"github.com/protobase/protobase/internal/keyspace"
	"github.com/protobase/protobase/internal/schema"
	"github.com/protobase/protobase/internal/store"
)

// An aggregate index keeps, per group, one entry:
//
//	02 indexID(4 BE) groupkey -> count(8 BE) then, per sum field, its cell
//
// groupkey is the group fields' values as an aggregation keys its groups
// (aggField.appendKey). An integer sum's cell is the values counted and
// the sum in 128 bits, two's complement (n, hi, lo; 24 bytes), so that no
// sequence of writes overflows it: only an aggregation's answer must fit
// int64 (uint64 for unsigned fields), or it is OUT_OF_RANGE as a scan's is.
// A float sum's cell is n, the sum of the finite values (float64), the
// numbers of NaN, +Inf and -Inf values, so that removing an infinite value
// gives the finite sum back, and the sum's compensation (float64; 48
// bytes). A float sum is added to and subtracted from as records change:
// the compensation keeps the low-order bits each addition rounds away
// (Neumaier's summation), so that adding a large value and removing it
// again gives back the small values added meanwhile, and the sum stays
// within a few units in the last place of a scan's. An entry whose float
// cells are 40 bytes holds no compensation (it reads as 0). A group whose
// count falls to 0 has no entry.
//
// The index counts every stored record, expired or not: the reaper
// removes expired records through the write path, which subtracts them.

// aggIndex is one aggregate index maintained by writes.
type aggIndex struct {
	ix       *schema.Index
	prefix   []byte
	groups   []*aggField
	sums     []*aggField
	building bool // existing records are still being counted
	// spec reads a record's group fields, then its sum fields, in one
	// walk over its bytes.
	spec *aggSpec
}

// newAggIndex compiles ix's fields against t.
func newAggIndex(t *recType, ix *schema.Index) (*aggIndex, error) {
	a := &aggIndex{ix: ix, prefix: keyspace.IndexPrefix(ix.ID), building: ix.State == pb.IndexState_INDEX_STATE_BUILDING}
	for _, kf := range ix.Fields {
		f, err := aggFieldOf(t, kf.Path, "", false)
		if err != nil {
			return nil, err
		}
		a.groups = append(a.groups, f)
	}
	for _, kf := range ix.Sums {
		f, err := aggFieldOf(t, kf.Path, "", false)
		if err != nil {
			return nil, err
		}
		a.sums = append(a.sums, f)
	}
	a.spec = &aggSpec{fields: append(append([]*aggField(nil), a.groups...), a.sums...)}
	a.spec.w = newAggWalk(a.spec)
	return a, nil
}

// aggCell is one sum of a group, or a change of it.
type aggCell struct {
	n              uint64 // values counted (two's complement in a change)
	hi             int64  // integer sum, 128 bits
	lo             uint64
	f              float64 // finite float values
	nan, pinf, nin uint64
	comp           float64 // what adding to f rounded away (addFloat)
}

// aggEntry is one group's count and sums, or a change of them.
type aggEntry struct {
	count uint64
	cells []aggCell
}

func (c *aggCell) zero() bool { return *c == aggCell{} }

// addInt adds sign × (hi, lo) in 128 bits.
func (c *aggCell) addInt(hi int64, lo uint64, sign int) {
	if sign < 0 {
		// Two's complement negation of the 128-bit value.
		var borrow uint64
		lo, borrow = bits.Sub64(0, lo, 0)
		hi = -hi - int64(borrow)
	}
	var carry uint64
	c.lo, carry = bits.Add64(c.lo, lo, 0)
	c.hi += hi + int64(carry)
}

// take adds sign × one value of field f.
func (c *aggCell) take(f *aggField, v aggVal, sign int) {
	c.n += uint64(int64(sign))
	switch f.cls {
	case vInt:
		c.addInt(v.i>>63, uint64(v.i), sign)
	case vUint:
		c.addInt(0, v.u, sign)
	default:
		d := uint64(int64(sign))
		switch {
		case math.IsNaN(v.f):
			c.nan += d
		case math.IsInf(v.f, 1):
			c.pinf += d
		case math.IsInf(v.f, -1):
			c.nin += d
		default:
			addCompensated(&c.f, &c.comp, float64(sign)*v.f)
		}
	}
}

// finite is the compensated sum of the finite values.
func (c *aggCell) finite() float64 { return c.f + c.comp }

// merge adds change d to c.
func (c *aggCell) merge(d *aggCell) {
	c.n += d.n
	c.addInt(d.hi, d.lo, 1)
	mergeCompensated(&c.f, &c.comp, d.f, d.comp)
	c.nan += d.nan
	c.pinf += d.pinf
	c.nin += d.nin
}

// float is the float sum as adding every value would give it.
func (c *aggCell) float() float64 {
	switch {
	case c.nan > 0 || (c.pinf > 0 && c.nin > 0):
		return math.NaN()
	case c.pinf > 0:
		return math.Inf(1)
	case c.nin > 0:
		return math.Inf(-1)
	}
	return c.finite()
}

// zero reports a change that changes nothing.
// merge adds the change d to e.
func (e *aggEntry) merge(d *aggEntry) {
	e.count += d.count
	for i := range e.cells {
		e.cells[i].merge(&d.cells[i])
	}
}

func (e *aggEntry) zero() bool {
	if e.count != 0 {
		return false
	}
	for i := range e.cells {
		if !e.cells[i].zero() {
			return false
		}
	}
	return true
}

// encode appends e's stored form; sums are a's.
func (a *aggIndex) encode(dst []byte, e *aggEntry) []byte {
	dst = binary.BigEndian.AppendUint64(dst, e.count)
	for i, f := range a.sums {
		c := &e.cells[i]
		dst = binary.BigEndian.AppendUint64(dst, c.n)
		if f.cls == vFloat {
			for _, w := range []uint64{math.Float64bits(c.f), c.nan, c.pinf, c.nin, math.Float64bits(c.comp)} {
				dst = binary.BigEndian.AppendUint64(dst, w)
			}
			continue
		}
		dst = binary.BigEndian.AppendUint64(binary.BigEndian.AppendUint64(dst, uint64(c.hi)), c.lo)
	}
	return dst
}

var errAggEntry = errors.New("aggregate index entry of the wrong length")

// decode reads a stored entry of a into e.
func (a *aggIndex) decode(b []byte, e *aggEntry) error {
	word := func() uint64 {
		if len(b) < 8 {
			b = nil
			return 0
		}
		w := binary.BigEndian.Uint64(b)
		b = b[8:]
		return w
	}
	want, floats := 8, 0
	for _, f := range a.sums {
		want += 24
		if f.cls == vFloat {
			want += 24
			floats++
		}
	}
	compensated := len(b) == want
	if !compensated && (floats == 0 || len(b) != want-8*floats) {
		return fmt.Errorf("%w: %d bytes, want %d", errAggEntry, len(b), want)
	}
	e.count = word()
	e.cells = slices.Grow(e.cells[:0], len(a.sums))[:len(a.sums)]
	for i, f := range a.sums {
		c := aggCell{n: word()}
		if f.cls == vFloat {
			c.f, c.nan, c.pinf, c.nin = math.Float64frombits(word()), word(), word(), word()
			if compensated {
				c.comp = math.Float64frombits(word())
			}
		} else {
			c.hi, c.lo = int64(word()), word()
		}
		e.cells[i] = c
	}
	return nil
}

// aggChanges are a batch's changes of aggregate index entries, one per
// group however many records of the batch fall in it.
type aggChanges struct {
	byKey map[string]*aggEntry
	index map[string]*aggIndex
	// ckpt is, per building index, the last record key its build has
	// counted (nil: none yet), read once per batch.
	ckpt    map[uint32][]byte
	key     []byte
	scratch []byte
	val     []byte
	cur     aggEntry
	vals    []aggVal
}

func (c *aggChanges) reset() {
	if c.byKey == nil {
		c.byKey, c.index, c.ckpt = map[string]*aggEntry{}, map[string]*aggIndex{}, map[uint32][]byte{}
	}
	clear(c.byKey)
	clear(c.index)
	clear(c.ckpt)
}

// counts reports whether the building index a counts record key: only
// once its build has passed the key, as the build counts the records
// before its checkpoint itself. The checkpoint is read through b, so on a
// shared store a build step that moves it fails the batch's
// preconditions.
func (c *aggChanges) counts(b store.WriteBatch, a *aggIndex, key []byte) (bool, error) {
	if !a.building {
		return true, nil
	}
	ck, ok := c.ckpt[a.ix.ID]
	if !ok {
		v, found, err := b.Read(keyspace.BuildKey(a.ix.ID), nil, false)
		if err != nil {
			return false, err
		}
		if found {
			ck = append([]byte{}, v...)
		}
		c.ckpt[a.ix.ID] = ck
	}
	return ck != nil && bytes.Compare(key, ck) <= 0, nil
}

// add notes sign × record rec (a stored or a new record of a's type) in
// its group of a.
func (c *aggChanges) add(a *aggIndex, rec []byte, sign int) error {
	n := len(a.spec.fields)
	c.vals = slices.Grow(c.vals[:0], n)[:n]
	if err := a.spec.readFields(rec, c.vals, &c.scratch); err != nil {
		return unreadable(err)
	}
	c.key = append(c.key[:0], a.prefix...)
	for i, g := range a.groups {
		c.key = g.appendKey(c.key, c.vals[i])
	}
	e := c.byKey[string(c.key)]
	if e == nil {
		e = &aggEntry{cells: make([]aggCell, len(a.sums))}
		k := string(c.key)
		c.byKey[k], c.index[k] = e, a
	}
	e.count += uint64(int64(sign))
	for i, f := range a.sums {
		if v := c.vals[len(a.groups)+i]; v.ok {
			e.cells[i].take(f, v, sign)
		}
	}
	return nil
}

// apply writes the changes into b: each changed group's entry is read
// (a precondition of b on a shared store, so that two servers adding to
// one group never lose an addition), changed and written back, or deleted
// when its count reaches 0. On Pebble the read-modify-write runs under
// writeMu.
func (c *aggChanges) apply(b store.WriteBatch) error {
	if len(c.byKey) == 0 {
		return nil
	}
	keys := make([]string, 0, len(c.byKey))
	for k, e := range c.byKey {
		if !e.zero() {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	for _, k := range keys {
		a, d := c.index[k], c.byKey[k]
		v, found, err := b.Read([]byte(k), c.val[:0], false)
		if err != nil {
			return err
		}
		c.cur.count, c.cur.cells = 0, slices.Grow(c.cur.cells[:0], len(a.sums))[:len(a.sums)]
		clear(c.cur.cells)
		if found {
			c.val = v
			if err := a.decode(v, &c.cur); err != nil {
				return &apierror.Error{Code: apierror.Internal, Msg: "aggregate index " + a.ix.Name + ": " + err.Error(), Err: err}
			}
		}
		c.cur.merge(d)
		if c.cur.count == 0 {
			b.Delete([]byte(k))
			continue
		}
		b.Set([]byte(k), a.encode(nil, &c.cur))
	}
	return nil
}

// noteAggregates notes in w.aggs what record p changes in its type's
// aggregate indexes: old, the stored record it replaces or removes
// (found), leaves its group; its new value, unless p removes or expires
// it, joins one.
func (w *Writer) noteAggregates(p *prep, old []byte, found bool) error {
	key := w.bytes(p.key)
	for _, a := range p.t.aggs {
		ok, err := w.aggs.counts(w.cur, a, key)
		if err != nil {
			return err
		}
		if !ok {
			continue
		}
		if found {
			if err := w.aggs.add(a, old, -1); err != nil {
				return err
			}
		}
		if p.op != OpRemove && p.op != opExpire {
			if err := w.aggs.add(a, p.value(), 1); err != nil {
				return err
			}
		}
	}
	return nil
}

// aggByID returns the maintained aggregate index with the given id, if any.
func (t *recType) aggByID(id uint32) *aggIndex {
	for _, a := range t.aggs {
		if a.ix.ID == id {
			return a
		}
	}
	return nil
}

// buildingIndex returns the index or aggregate index of t (nil: none)
// with the given id, and whether it is being built.
func (t *recType) buildingIndex(id uint32) (*schema.Index, bool) {
	if t == nil {
		return nil, false
	}
	if ix := t.indexByID(id); ix != nil {
		return ix.ix, ix.building
	}
	if a := t.aggByID(id); a != nil {
		return a.ix, a.building
	}
	return nil, false
}
