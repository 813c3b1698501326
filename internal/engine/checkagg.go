package engine

import (
	"bytes"
	"fmt"
	"math"

	"github.com/protobase/protobase/internal/keyspace"
)

// ProblemAggregateMismatch: an aggregate index's entry for a group holds
// another count or sum than the group's records add up to.
const ProblemAggregateMismatch ProblemKind = "aggregate-mismatch"

// noteAggregates adds the stored record val of t to the groups the check
// recomputes for t's aggregate indexes. Expired records count, as the
// writes that keep the index count every stored record.
func (c *checker) noteAggregates(t *recType, key, val []byte) {
	if len(t.aggs) == 0 {
		return
	}
	c.aggs.reset1()
	for _, a := range t.aggs {
		if err := c.aggs.add(a, val, 1); err != nil {
			c.add(Problem{Kind: ProblemBadKey, Type: string(t.rt.Name), Index: a.ix.Name, Key: bytes.Clone(key),
				Detail: "stored record does not yield its aggregate group: " + err.Error()})
		}
	}
}

// reset1 readies the changes for their first use, and keeps them after.
func (c *aggChanges) reset1() {
	if c.byKey == nil {
		c.reset()
	}
}

// checkAggregates compares every READY aggregate index with the groups
// recomputed from the records: an entry of another count or sums is a
// mismatch, an entry of a group without records stale, a group without
// its entry missing. A BUILDING index has counted only the records its
// build passed, so it is not compared.
func (c *checker) checkAggregates() error {
	c.aggs.reset1()
	for _, t := range c.cat.types {
		for _, a := range t.aggs {
			if a.building {
				continue
			}
			if err := c.checkAggregate(t, a); err != nil {
				return err
			}
		}
	}
	for k, want := range c.aggs.byKey {
		a := c.aggs.index[k]
		if a.building || want.count == 0 {
			continue
		}
		c.add(Problem{Kind: ProblemMissingEntry, Type: string(a.ix.Type), Index: a.ix.Name, Key: []byte(k),
			Detail: fmt.Sprintf("no entry for a group of %d records", want.count)})
	}
	return nil
}

// checkAggregate compares the entries of a, of type t, with the groups
// recomputed, deleting each group met.
func (c *checker) checkAggregate(t *recType, a *aggIndex) error {
	it, err := c.snap.NewIterator(a.prefix, keyspace.PrefixEnd(a.prefix))
	if err != nil {
		return fmt.Errorf("check: iterate aggregate index entries: %w", err)
	}
	defer it.Close()
	var got aggEntry
	vals := make([]aggVal, len(a.groups))
	for ok := it.First(); ok; ok = it.Next() {
		if err := c.ctx.Err(); err != nil {
			return err
		}
		key := it.Key()
		p := Problem{Type: string(t.rt.Name), Index: a.ix.Name, Key: bytes.Clone(key)}
		if err := decodeGroupKey(a.groups, key[len(a.prefix):], vals); err != nil {
			p.Kind, p.Detail = ProblemBadKey, "aggregate entry key: "+err.Error()
			c.add(p)
			continue
		}
		if err := a.decode(it.Value(), &got); err != nil {
			p.Kind, p.Detail = ProblemBadKey, "aggregate entry: "+err.Error()
			c.add(p)
			continue
		}
		want := c.aggs.byKey[string(key)]
		delete(c.aggs.byKey, string(key))
		switch {
		case want == nil || want.count == 0:
			p.Kind, p.Detail = ProblemStaleEntry, fmt.Sprintf("entry of %d records for a group no record is in", got.count)
			c.add(p)
		case !sameAggregate(a, &got, want):
			p.Kind, p.Detail = ProblemAggregateMismatch, fmt.Sprintf("entry holds %s, the group's records add up to %s",
				a.describe(&got), a.describe(want))
			c.add(p)
		}
	}
	if err := it.Error(); err != nil {
		return fmt.Errorf("check: iterate aggregate index entries: %w", err)
	}
	return nil
}

// sameAggregate compares two entries of a: counts and integer sums
// exactly, float sums within the rounding that adding and subtracting
// values in another order leaves.
func sameAggregate(a *aggIndex, x, y *aggEntry) bool {
	if x.count != y.count {
		return false
	}
	for i, f := range a.sums {
		p, q := x.cells[i], y.cells[i]
		if f.cls != vFloat {
			if p != q {
				return false
			}
			continue
		}
		if p.n != q.n || p.nan != q.nan || p.pinf != q.pinf || p.nin != q.nin {
			return false
		}
		pf, qf := p.finite(), q.finite()
		if d := math.Abs(pf - qf); d > 1e-9*math.Max(math.Abs(pf), math.Abs(qf)) && d > 1e-9 {
			return false
		}
	}
	return true
}

// describe renders an entry of a for a problem's detail.
func (a *aggIndex) describe(e *aggEntry) string {
	s := fmt.Sprintf("count %d", e.count)
	for i, f := range a.sums {
		c := &e.cells[i]
		if f.cls == vFloat {
			s += fmt.Sprintf(", sum(%s) %g of %d", f.name, c.float(), c.n)
			continue
		}
		s += fmt.Sprintf(", sum(%s) %d:%d of %d", f.name, c.hi, c.lo, c.n)
	}
	return s
}
