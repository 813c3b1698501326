package pebble

import (
	"bytes"
	"errors"

	"github.com/cockroachdb/pebble/v2"
)

// iterPair is an Iter over a store with an index instance: index entries
// are read from the index instance and every other key from the main one,
// the two merged in key order (they never hold the same key). Each side's
// iterator is opened when a positioning call first needs it, with the
// caller's bounds, cut to the index span for the index side; a side the
// bounds leave nothing of is never opened, so a range within the records
// or within one index reads one instance as before. Store.NewIter opens
// the sides its bounds reach at once, under applyMu, so that they see the
// same batches.
type iterPair struct {
	layout *keyLayout          // which side holds which keys
	src    [2]pebbleIterSource // main, index
	groups bool                // the index side is grouped (groups.go)
	its    [2]sideIter
	bounds [2][2][]byte // each side's bounds
	empty  [2]bool      // the bounds leave nothing of a side
	valid  [2]bool      // each side's position is a key
	cur    int          // the side Iter.it belongs to
	back   bool         // the last move went backward
	err    error        // opening a side failed
	buf    []byte       // holds the bounds for sides not yet open
}

const (
	sideMain  = 0
	sideIndex = 1
)

// newIterPair returns an Iter reading src's sides within [lower, upper);
// open opens the sides the bounds reach now.
func newIterPair(src [2]pebbleIterSource, groups bool, layout *keyLayout, lower, upper []byte, open bool) (*Iter, error) {
	p := &iterPair{layout: layout, src: src, groups: groups}
	p.setBounds(lower, upper)
	if open {
		for side := range 2 {
			if !p.empty[side] {
				if _, err := p.side(side); err != nil {
					return nil, errors.Join(err, p.close())
				}
			}
		}
	}
	return &Iter{pair: p}, nil
}

// setBounds sets [lower, upper) on both sides. The caller may reuse the
// slices afterwards, as with Pebble's own SetBounds.
func (p *iterPair) setBounds(lower, upper []byte) {
	p.buf = append(append(p.buf[:0], lower...), upper...)
	if lower != nil {
		lower = p.buf[:len(lower):len(lower)]
	}
	if upper != nil {
		upper = p.buf[len(p.buf)-len(upper):]
		if upper == nil {
			// buf is still nil when both bounds are empty: an empty upper
			// bound leaves nothing in range, where a nil one is no bound.
			upper = []byte{}
		}
	}
	mainLower, mainOK := p.layout.mainPart(lower, upper)
	p.bounds[sideMain] = [2][]byte{mainLower, upper}
	ixLower, ixUpper, ixOK := p.layout.indexPart(lower, upper)
	p.bounds[sideIndex] = [2][]byte{ixLower, ixUpper}
	p.empty = [2]bool{!mainOK, !ixOK}
	for side, it := range p.its {
		if it != nil && !p.empty[side] {
			it.SetBounds(p.bounds[side][0], p.bounds[side][1])
		}
	}
	p.valid = [2]bool{}
}

// side returns side's iterator, opening it if needed.
func (p *iterPair) side(side int) (sideIter, error) {
	if it := p.its[side]; it != nil {
		return it, nil
	}
	var it sideIter
	var err error
	if side == sideIndex && p.groups {
		it, err = newGroupIter(p.src[side], p.layout.indexUpper, p.bounds[side][0], p.bounds[side][1])
	} else {
		it, err = p.src[side].NewIter(&pebble.IterOptions{LowerBound: p.bounds[side][0], UpperBound: p.bounds[side][1]})
	}
	if err != nil {
		p.err = err
		return nil, err
	}
	p.its[side] = it
	return it, nil
}

// position runs move on each side the bounds reach and makes the
// smallest (largest, backward) valid one current.
func (p *iterPair) position(i *Iter, back bool, move func(sideIter) bool) bool {
	p.back = back
	for side := range 2 {
		p.valid[side] = false
		if p.empty[side] {
			continue
		}
		it, err := p.side(side)
		if err != nil {
			continue
		}
		p.valid[side] = move(it)
	}
	return p.pick(i)
}

// pick makes the side whose key comes first in the current direction
// current.
func (p *iterPair) pick(i *Iter) bool {
	switch {
	case p.valid[sideMain] && p.valid[sideIndex]:
		c := bytes.Compare(p.its[sideMain].Key(), p.its[sideIndex].Key())
		if (c < 0) != p.back {
			p.cur = sideMain
		} else {
			p.cur = sideIndex
		}
	case p.valid[sideMain]:
		p.cur = sideMain
	case p.valid[sideIndex]:
		p.cur = sideIndex
	default:
		i.it = nil
		return false
	}
	i.it = p.its[p.cur]
	return true
}

func (p *iterPair) first(i *Iter) bool {
	return p.position(i, false, sideIter.First)
}

func (p *iterPair) last(i *Iter) bool {
	return p.position(i, true, sideIter.Last)
}

func (p *iterPair) seekGE(i *Iter, key []byte) bool {
	return p.position(i, false, func(it sideIter) bool { return it.SeekGE(key) })
}

func (p *iterPair) seekLT(i *Iter, key []byte) bool {
	return p.position(i, true, func(it sideIter) bool { return it.SeekLT(key) })
}

// step moves forward, or backward when back is set. After a move the
// other way the other side stands on the wrong side of the current key;
// it is first brought to the key beyond it.
func (p *iterPair) step(i *Iter, back bool) bool {
	if i.it == nil {
		return false
	}
	if p.empty[1-p.cur] {
		// One side only (a range within the records, or within one index):
		// no merge, and nothing to compare.
		p.back = back
		var ok bool
		if back {
			ok = i.it.Prev()
		} else {
			ok = i.it.Next()
		}
		p.valid[p.cur] = ok
		if !ok {
			i.it = nil
		}
		return ok
	}
	if p.back != back {
		p.back = back
		if o := 1 - p.cur; !p.empty[o] && p.its[o] != nil {
			if back {
				p.valid[o] = p.its[o].SeekLT(i.it.Key())
			} else {
				p.valid[o] = p.its[o].SeekGE(i.it.Key())
			}
		}
	}
	if back {
		p.valid[p.cur] = i.it.Prev()
	} else {
		p.valid[p.cur] = i.it.Next()
	}
	return p.pick(i)
}

// lookup makes the side key belongs to current and returns its iterator;
// nil when the bounds leave nothing of that side or it cannot be opened.
// The other side's position is lost.
func (p *iterPair) lookup(i *Iter, key []byte) sideIter {
	side := sideMain
	if p.layout.isIndexKey(key) {
		side = sideIndex
	}
	p.valid = [2]bool{}
	if p.empty[side] {
		i.it = nil
		return nil
	}
	it, err := p.side(side)
	if err != nil {
		i.it = nil
		return nil
	}
	p.cur, p.back, i.it = side, false, it
	return it
}

func (p *iterPair) error() error {
	var errs []error
	if p.err != nil {
		errs = append(errs, p.err)
	}
	for _, it := range p.its {
		if it != nil {
			if err := it.Error(); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

func (p *iterPair) close() error {
	var errs []error
	for side, it := range p.its {
		if it != nil {
			errs = append(errs, it.Close())
			p.its[side] = nil
		}
	}
	return errors.Join(errs...)
}
