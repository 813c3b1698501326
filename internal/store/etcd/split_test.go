package etcd_test

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/protobase/protobase/internal/store/etcd"
	"github.com/protobase/protobase/internal/store/etcd/etcdtest"
)

// SplitKeys cuts a range into parts of similar key counts, each cut
// strictly inside the range and in order, on ranges whose keys crowd into a
// corner of the key space (two "types" of very different sizes) as well as
// spread ones; a range of less than two pages is not cut.
func TestSplitKeys(t *testing.T) {
	endpoint := etcdtest.Start(t, etcdtest.Roomy)
	s, err := etcd.Open(etcd.Options{Endpoints: []string{endpoint}, Prefix: "/split/", PageSize: 50})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	var keys [][]byte
	for i := range 1800 { // type a: dense, ordered-code-like ids
		keys = append(keys, fmt.Appendf(nil, "r\x01\x80%08d", i*7))
	}
	for i := range 200 { // type b: few, with long keys
		keys = append(keys, fmt.Appendf(nil, "r\x02user-%04d@example.com", i))
	}
	for i := 0; i < len(keys); i += 500 {
		b := s.NewWriteBatch()
		for _, k := range keys[i:min(i+500, len(keys))] {
			b.Set(k, []byte("v"))
		}
		if err := s.ApplyBatch(b); err != nil {
			t.Fatal(err)
		}
		b.Close()
	}
	for _, tc := range []struct {
		name       string
		start, end []byte
		n          int
		keys       int // in [start, end)
		parts      int
	}{
		{"whole store", nil, nil, 4, 2000, 4},
		{"type a", []byte("r\x01"), []byte("r\x02"), 8, 1800, 8},
		{"type b", []byte("r\x02"), []byte("r\x03"), 8, 200, 4}, // no part under a page
		{"type b within two pages", []byte("r\x02"), []byte("r\x02user-0099"), 4, 99, 1},
		{"one part asked", nil, nil, 1, 2000, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cuts, err := s.SplitKeys(tc.start, tc.end, tc.n)
			if err != nil {
				t.Fatal(err)
			}
			if len(cuts) != tc.parts-1 {
				t.Fatalf("%d cut points %q, want %d", len(cuts), cuts, tc.parts-1)
			}
			counts := partCounts(t, keys, tc.start, tc.end, cuts)
			want := tc.keys / tc.parts
			for i, c := range counts {
				// A cut may miss its target by an eighth of a part; the
				// part after it by up to two such misses.
				if c < want-want/4-1 || c > want+want/4+1 {
					t.Errorf("part %d holds %d keys, want about %d (parts %v)", i, c, want, counts)
				}
			}
		})
	}
}

// partCounts counts the keys of each part of [start, end) that cuts make,
// failing the test when a cut is outside the range or out of order.
func partCounts(t *testing.T, keys [][]byte, start, end []byte, cuts [][]byte) []int {
	t.Helper()
	prev := start
	for _, c := range cuts {
		if bytes.Compare(c, prev) <= 0 || (end != nil && bytes.Compare(c, end) >= 0) {
			t.Fatalf("cut %q is not after %q and inside the range's end %q", c, prev, end)
		}
		prev = c
	}
	counts := make([]int, len(cuts)+1)
	for _, k := range keys {
		if bytes.Compare(k, start) < 0 || (end != nil && bytes.Compare(k, end) >= 0) {
			continue
		}
		i := 0
		for i < len(cuts) && bytes.Compare(k, cuts[i]) >= 0 {
			i++
		}
		counts[i]++
	}
	return counts
}
