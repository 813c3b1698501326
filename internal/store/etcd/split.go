package etcd

import (
	"bytes"
	"fmt"
	"math/big"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// Bounds of SplitKeys' search for cut points.
const (
	// splitFan is how many sub-ranges one request counts: the cut's
	// search narrows by this factor per round trip. Its operations (two
	// per probe) stay within etcd's default --max-txn-ops (128).
	splitFan = 16
	// splitRounds bounds the requests spent on one cut point: 16 rounds
	// of a 16-way split resolve 64 bits of key past the shared prefix.
	splitRounds = 16
	// splitWidth is how many bytes past the shared prefix of two keys the
	// search looks at: 128 bits, far finer than any key count.
	splitWidth = 16
	// splitSlack is the fraction (1/splitSlack) of a part's size by which
	// a cut may miss its target: the parts need not be equal, only
	// similar, and every round saved is a round trip.
	splitSlack = 8
)

// SplitKeys cuts [start, end) into up to n parts holding about as many
// keys each, for a Scan that reads the parts concurrently. etcd keeps no
// size statistics, but it counts the keys of a range from its in-memory
// index without reading any value (a count-only range), so each cut point
// is searched for between the previous cut and end: one transaction counts
// the keys of splitFan sub-ranges of equal width in the key space, the
// search goes on in the sub-range that holds the target, and stops once a
// boundary is within a splitSlack-th of a part of it. The requests carry
// no keys back; a cut takes at most splitRounds of them (a few on keys of
// one record type), all at the revision of the first count so that they
// agree, and the member walks its index over the searched range once per
// round, a range that shrinks splitFan-fold each time. A range of fewer
// than two pages gets no split: a part of less than a page saves no round
// trip. The parts need not match the snapshot the Scan reads at: cut
// points are hints, and every key lies in exactly one part whatever they
// are.
func (s *Store) SplitKeys(start, end []byte, n int) ([][]byte, error) {
	if n <= 1 {
		return nil, nil
	}
	lo := s.prefix
	if start != nil {
		lo = s.Key(start)
	}
	hi := s.rangeEnd(end)
	if lo >= hi {
		return nil, nil
	}
	total, rev, err := s.count(lo, hi)
	if err != nil {
		return nil, err
	}
	parts := int64(n)
	if most := total / s.pageSize; most < parts {
		parts = most
	}
	if parts <= 1 {
		return nil, nil
	}
	sp := splitter{s: s, rev: rev, hi: hi, slack: max(1, total/parts/splitSlack)}
	from, below := lo, int64(0) // below counts the keys of [lo, from)
	var cuts [][]byte
	for i := int64(1); i < parts; i++ {
		k, c, err := sp.cut(from, below, total, total*i/parts)
		if err != nil {
			return nil, err
		}
		if k == "" {
			continue
		}
		cuts = append(cuts, []byte(k[len(s.prefix):]))
		from, below = k, c
	}
	return cuts, nil
}

// splitter finds SplitKeys' cut points in [.., hi) at revision rev.
type splitter struct {
	s     *Store
	rev   int64
	hi    string
	slack int64
}

// cut returns a key k in (from, hi) with about target keys of the split
// range below it, and that count; "" when it found none. below and total
// are the counts of the keys below from and below hi.
//
// The bounds of the search move to keys that exist where they can: the
// first key at or after a probe has as many keys below it as the probe,
// and two keys that exist share a longer prefix than two points of an
// empty stretch of the key space, so the next round's probes fall where
// the keys are.
func (sp *splitter) cut(from string, below, total, target int64) (string, int64, error) {
	a, ca := from, below
	b, cb := sp.hi, total
	crowded := false
	for range splitRounds {
		pts := probes(a, b, crowded)
		if len(pts) == 0 {
			break
		}
		counts, firsts, err := sp.probe(a, b, pts)
		if err != nil {
			return "", 0, err
		}
		c := ca
		na, nca, nb, ncb := a, ca, b, cb
		for i, p := range pts {
			c += counts[i]
			if d := c - target; d <= sp.slack && d >= -sp.slack {
				return p, c, nil
			}
			switch {
			case c < target && firsts[i] != "":
				na, nca = firsts[i], c
			case c < target:
				na, nca = p, c
			case nb != b:
			case firsts[i] != "":
				nb, ncb = firsts[i], c
			default:
				nb, ncb = p, c
			}
		}
		// The target below the first probe: the keys crowd just above a
		// (its first key, where an empty stretch of the key space follows
		// the range's keys), and the next round probes on a log scale.
		crowded = nb == pts[0]
		a, ca, b, cb = na, nca, nb, ncb
	}
	// Out of rounds, or a and b adjacent at splitWidth: the nearer bound
	// that is strictly inside the range, if either is.
	switch {
	case a != from && (b == sp.hi || target-ca <= cb-target):
		return a, ca, nil
	case b != sp.hi:
		return b, cb, nil
	}
	return "", 0, nil
}

// probe returns, in one transaction at the splitter's revision, the key
// counts of [a, pts[0]), [pts[0], pts[1]), ... and for each probe the
// first key at or after it and before b ("" when none).
func (sp *splitter) probe(a, b string, pts []string) (counts []int64, firsts []string, err error) {
	ops := make([]clientv3.Op, 0, 2*len(pts))
	for _, p := range pts {
		ops = append(ops,
			clientv3.OpGet(a, clientv3.WithRange(p), clientv3.WithCountOnly(), clientv3.WithRev(sp.rev)),
			clientv3.OpGet(p, clientv3.WithRange(b), clientv3.WithKeysOnly(), clientv3.WithLimit(1), clientv3.WithRev(sp.rev)))
		a = p
	}
	ctx, cancel := sp.s.request()
	defer cancel()
	resp, err := sp.s.cli.Txn(ctx).Then(ops...).Commit()
	if err != nil {
		return nil, nil, fmt.Errorf("etcd store: count keys for split points: %w", sp.s.readErr(err))
	}
	counts, firsts = make([]int64, len(pts)), make([]string, len(pts))
	for i, r := range resp.Responses {
		rr := r.GetResponseRange()
		switch {
		case rr == nil:
		case i%2 == 0:
			counts[i/2] = rr.Count
		case len(rr.Kvs) > 0:
			firsts[i/2] = string(rr.Kvs[0].Key)
		}
	}
	return counts, firsts, nil
}

// probes returns up to splitFan-1 keys strictly between a and b (a < b),
// increasing, when both are read as base-256 fractions past their common
// prefix at splitWidth bytes of precision: evenly spaced, or when crowded
// at distances from a that grow by equal factors, so that one round finds
// the scale of keys that crowd just above a. None when a and b are
// adjacent at that precision.
func probes(a, b string, crowded bool) []string {
	p := 0
	for p < len(a) && p < len(b) && a[p] == b[p] {
		p++
	}
	digits := func(s string) *big.Int {
		var w [splitWidth]byte
		copy(w[:], s[p:])
		return new(big.Int).SetBytes(w[:])
	}
	x, y := digits(a), digits(b)
	width := new(big.Int).Sub(y, x)
	bits := width.BitLen()
	var pts []string
	last := x
	for i := 1; i < splitFan; i++ {
		v := new(big.Int)
		if crowded {
			v.Rsh(width, uint(bits*(splitFan-i)/splitFan)) //nolint:gosec // below 128
		} else {
			v.Mul(width, big.NewInt(int64(i))).Quo(v, big.NewInt(splitFan))
		}
		v.Add(v, x)
		if v.Cmp(last) <= 0 || v.Cmp(y) >= 0 {
			continue
		}
		last = v
		var w [splitWidth]byte
		v.FillBytes(w[:])
		// Trailing zero bytes only lengthen the key: without them it
		// still sorts after a and the probe before it (the first byte
		// where it exceeds them is not zero) and before b.
		pts = append(pts, a[:p]+string(bytes.TrimRight(w[:], "\x00")))
	}
	return pts
}

// count returns how many keys [from, to) holds, read linearizably, and the
// revision counted at.
func (s *Store) count(from, to string) (int64, int64, error) {
	ctx, cancel := s.request()
	defer cancel()
	resp, err := s.cli.Get(ctx, from, clientv3.WithRange(to), clientv3.WithCountOnly())
	if err != nil {
		return 0, 0, fmt.Errorf("etcd store: count keys for split points: %w", s.readErr(err))
	}
	return resp.Count, resp.Header.Revision, nil
}
