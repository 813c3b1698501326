package engine

import (
	"encoding/binary"
	"hash/maphash"
	"math"
	"math/bits"
	"slices"
)

// groupCacheSize is the number of groups a part finds without building
// their keys; more groups share its slots and are found through the map.
const groupCacheSize = 256

// groupSeed hashes long group values for the group cache.
var groupSeed = maphash.MakeSeed()

// fpWords is the number of words of one group value's fingerprint.
const fpWords = 3

// group is the group of the values just read (p.vals), made if new; nil
// when it cannot be, with p.err set.
//
// A group whose values hash to a cache slot that holds it is found without
// building its key. Values that fit a fingerprint (fingerprint) are
// compared as words, the others (strings over 16 bytes) value by value
// (same); values that miss the cache build their key (appendKey) and look
// it up in p.groups, which stays the one record of the part's groups.
//
// Rejected: hashing every value (maphash for a string) and comparing it as
// a value: 19 ns a record in BenchmarkAggregate/team, against 13 ns with
// the words.
func (p *aggPart) group() *aggGroup {
	s := p.s
	fp := p.fp
	exact := true
	var h uint64
	for i, f := range s.groups {
		v := &p.vals[s.groupAt[i]]
		w := (*[fpWords]uint64)(fp[i*fpWords:])
		if f.fingerprint(v, w) {
			h = h*0x9E3779B97F4A7C15 + mixWords(w)
		} else {
			exact = false
			h = h*0x9E3779B97F4A7C15 + maphash.Bytes(groupSeed, v.b)
		}
	}
	slot := &p.cache[h%groupCacheSize]
	if g := *slot; g != nil {
		if exact {
			if slices.Equal(fp, g.fp) {
				return g
			}
		} else if p.same(g) {
			return g
		}
	}
	p.key = p.key[:0]
	for i, g := range s.groups {
		p.key = g.appendKey(p.key, p.vals[s.groupAt[i]])
	}
	grp := p.groups[string(p.key)]
	if grp == nil {
		if grp = p.newGroup(string(p.key)); grp == nil {
			return nil
		}
		if exact {
			grp.fp = append([]uint64(nil), fp...)
		}
	}
	*slot = grp
	return grp
}

// same reports whether the values just read are g's.
func (p *aggPart) same(g *aggGroup) bool {
	for i, f := range p.s.groups {
		if !f.equal(&p.vals[p.s.groupAt[i]], &g.vals[i]) {
			return false
		}
	}
	return true
}

// fingerprint sets w to words that tell v from every other value of f:
// equal words, equal values (as stored: NaNs of other bits, -0 and 0 have
// other words, and then miss the cache, not their group). It reports
// false for a string or bytes value over 16 bytes, whose words would not.
//
// w[0] is 0 for an absent value, else 1 plus the length of a string;
// w[1] and w[2] hold the value: a string's bytes in overlapping loads,
// which with its length give back every byte.
func (f *aggField) fingerprint(v *aggVal, w *[fpWords]uint64) bool {
	if !v.ok {
		*w = [fpWords]uint64{}
		return true
	}
	switch f.cls {
	case vInt, vBool:
		*w = [fpWords]uint64{1, uint64(v.i), 0}
	case vUint:
		*w = [fpWords]uint64{1, v.u, 0}
	case vFloat:
		*w = [fpWords]uint64{1, math.Float64bits(v.f), 0}
	case vTime:
		*w = [fpWords]uint64{1, uint64(v.i), uint64(uint32(v.n))}
	default:
		b := v.b
		n := len(b)
		switch {
		case n > 16:
			return false
		case n >= 8:
			*w = [fpWords]uint64{1 + uint64(n), binary.LittleEndian.Uint64(b), binary.LittleEndian.Uint64(b[n-8:])}
		case n >= 4:
			*w = [fpWords]uint64{1 + uint64(n), uint64(binary.LittleEndian.Uint32(b)), uint64(binary.LittleEndian.Uint32(b[n-4:]))}
		case n > 0:
			*w = [fpWords]uint64{1 + uint64(n), uint64(b[0]) | uint64(b[n/2])<<8 | uint64(b[n-1])<<16, 0}
		default:
			*w = [fpWords]uint64{1, 0, 0}
		}
	}
	return true
}

// mixWords hashes a fingerprint: a multiply whose high and low halves
// spread every bit of the words over the slot's bits.
func mixWords(w *[fpWords]uint64) uint64 {
	hi, lo := bits.Mul64(w[1]^0xA0761D6478BD642F, w[2]^w[0]<<32^0xE7037ED1A0B428DB)
	return hi ^ lo
}

// equal reports whether a and b are one group's value of f, as appendKey
// encodes them alike.
func (f *aggField) equal(a, b *aggVal) bool {
	if !a.ok || !b.ok {
		return a.ok == b.ok
	}
	switch f.cls {
	case vInt, vBool:
		return a.i == b.i
	case vUint:
		return a.u == b.u
	case vFloat:
		return a.f == b.f || (a.f != a.f && b.f != b.f)
	case vTime:
		return a.i == b.i && a.n == b.n
	}
	return string(a.b) == string(b.b)
}
