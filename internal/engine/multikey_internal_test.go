package engine

import (
	"bytes"
	"flag"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protowire"
)

// TestMultiKeysDistinct holds distinct to a sort and a compaction of the
// elements' bytes: random elements of a few bytes (zeros among them, so
// that zero-padded heads tie, and prefixes of each other), repeats
// included, on both sides of smallSort; the first of repeated elements
// stands. Up to smallSort elements, firsts keeps the same ones in the
// order they came.
func TestMultiKeysDistinct(t *testing.T) {
	rnd := rand.New(rand.NewPCG(35, 1))
	var m multiKeys
	for round := range 2000 {
		n := rnd.IntN(smallSort + 8)
		if round%10 == 0 {
			n = rnd.IntN(200)
		}
		m.elems, m.offs, m.order = m.elems[:0], append(m.offs[:0], 0), m.order[:0]
		for range n {
			for range rnd.IntN(12) {
				m.elems = append(m.elems, []byte{0, 1, 'a', 0xff}[rnd.IntN(4)])
			}
			m.offs = append(m.offs, int32(len(m.elems))) //nolint:gosec // small
		}
		elem := func(i int32) []byte { return m.elems[m.offs[i]:m.offs[i+1]] }
		want := make([]int32, n)
		for i := range want {
			want[i] = int32(i) //nolint:gosec // small
		}
		slices.SortStableFunc(want, func(a, c int32) int { return bytes.Compare(elem(a), elem(c)) })
		want = slices.CompactFunc(want, func(a, c int32) bool { return bytes.Equal(elem(a), elem(c)) })
		m.distinct()
		if len(m.order) != len(want) {
			t.Fatalf("round %d, %d elements: %d distinct, want %d", round, n, len(m.order), len(want))
		}
		for i := range want {
			if !bytes.Equal(elem(m.order[i]), elem(want[i])) || (n <= smallSort && m.order[i] != want[i]) {
				t.Fatalf("round %d, %d elements: distinct element %d is #%d %x, want #%d %x",
					round, n, i, m.order[i], elem(m.order[i]), want[i], elem(want[i]))
			}
		}
		if n > smallSort {
			continue
		}
		// firsts keeps the same elements, in the order they came.
		slices.Sort(want)
		m.firsts()
		if !slices.Equal(m.order, want) {
			t.Fatalf("round %d, %d elements: firsts %v, want %v", round, n, m.order, want)
		}
	}
}

// multiProto's indexes on repeated fields cover the shapes appendMulti
// walks itself (top-level strings and bytes, a one-byte and a two-byte
// tag, with a field before the element) and one it leaves to the path (a
// nested field).
const multiProto = `syntax = "proto3";
package ex;
import "protobase/v1/options.proto";
message Inner { repeated string names = 1; }
message Doc {
  option (protobase.v1.record) = {
    primary_key: "id"
    index: { fields: "tags" }
    index: { fields: "team" fields: "labels" }
    index: { fields: "inner.names" }
  };
  int64 id = 1;
  repeated string tags = 2;
  string team = 3;
  Inner inner = 4;
  repeated bytes labels = 300;
}
`

var multiSeed = flag.Uint64("multikey.seed", 0, "seed of TestAppendMultiWalk (0: from the clock)")

// multiWalkBoth returns the entry keys of rec in index j of rt, or their
// error, as appendMulti makes them and as the field's path alone reads
// them; they must agree.
func multiWalkBoth(rt *recType, rec []byte, j int) (walk, path string) {
	one := func(x *keyExtractor) string {
		var m multiKeys
		dst, ends, field, err := x.appendMulti(nil, rec, x.locate(rec, nil), j, []byte("P"), []byte("S"), nil, &m, true)
		if err != nil {
			return "error " + field + ": " + err.Error()
		}
		return fmt.Sprintf("%q %v", dst, ends)
	}
	byPath := *rt.keys
	byPath.topBytes = make([]protowire.Number, len(rt.keys.topBytes))
	return one(rt.keys), one(&byPath)
}

// randomDoc appends to b random fields of multiProto's Doc and others,
// well formed or not: elements with zero and 0xff bytes, empty ones and
// repeats; fields unknown to the type in every wire type; and, now and
// then, the element field with another wire type, a truncated value, a
// field number 0 or past the largest, or an end-group tag.
func randomDoc(rnd *rand.Rand, b []byte) []byte {
	elem := func() []byte {
		e := make([]byte, rnd.IntN(6))
		for i := range e {
			e[i] = []byte{0, 1, 'a', 'b', 0xff}[rnd.IntN(5)]
		}
		return e
	}
	for range rnd.IntN(12) {
		switch rnd.IntN(12) {
		case 0, 1, 2:
			b = protowire.AppendBytes(protowire.AppendTag(b, 2, protowire.BytesType), elem())
		case 3, 4:
			b = protowire.AppendBytes(protowire.AppendTag(b, 300, protowire.BytesType), elem())
		case 5:
			b = protowire.AppendString(protowire.AppendTag(b, 3, protowire.BytesType), "team")
		case 6:
			inner := protowire.AppendBytes(protowire.AppendTag(nil, 1, protowire.BytesType), elem())
			b = protowire.AppendBytes(protowire.AppendTag(b, 4, protowire.BytesType), inner)
		case 7:
			b = protowire.AppendVarint(protowire.AppendTag(b, 1, protowire.VarintType), rnd.Uint64())
		case 8:
			b = protowire.AppendFixed32(protowire.AppendTag(b, 9, protowire.Fixed32Type), 1)
			b = protowire.AppendFixed64(protowire.AppendTag(b, 2000, protowire.Fixed64Type), 2)
			b = protowire.AppendBytes(protowire.AppendTag(b, 17, protowire.BytesType), elem())
		case 9:
			b = protowire.AppendTag(b, 5, protowire.StartGroupType)
			b = protowire.AppendVarint(protowire.AppendTag(b, 1, protowire.VarintType), 7)
			b = protowire.AppendTag(b, 5, protowire.EndGroupType)
		case 10:
			b = hostileField(rnd, b)
		default:
			b = append(b, elem()...) // whatever the bytes make of it
		}
	}
	return b
}

func hostileField(rnd *rand.Rand, b []byte) []byte {
	switch rnd.IntN(7) {
	case 0:
		return protowire.AppendVarint(protowire.AppendTag(b, 2, protowire.VarintType), 1)
	case 1:
		return protowire.AppendFixed32(protowire.AppendTag(b, 300, protowire.Fixed32Type), 1)
	case 2:
		return append(protowire.AppendTag(b, 2, protowire.BytesType), 5, 'x')
	case 3:
		return append(b, 0x02, 0x01, 'x') // field number 0
	case 4:
		return protowire.AppendTag(b, 6, protowire.EndGroupType)
	case 5: // a field number past the largest, which a tag's varint can hold
		return append(protowire.AppendVarint(b, uint64(protowire.MaxValidNumber+1)<<3), 1)
	}
	return append(b, 0xff, 0xff, 0xff) // a truncated varint tag
}

// TestAppendMultiWalk holds appendMulti's own walk of top-level repeated
// string and bytes fields to what the field's path reads, keys and
// errors alike, on random records well formed and not.
func TestAppendMultiWalk(t *testing.T) {
	rt := openCatalog(t, multiProto, "ex.Doc")
	if got := rt.keys.topBytes; !slices.Equal(got, []protowire.Number{2, 300, 0}) {
		t.Fatalf("walked fields %v, want [2 300 0]", got)
	}
	seed := *multiSeed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano()) //nolint:gosec // a seed
	}
	rnd := rand.New(rand.NewPCG(seed, 36))
	errs := 0
	for round := range 20000 {
		rec := randomDoc(rnd, nil)
		for j := range rt.indexes {
			walk, path := multiWalkBoth(rt, rec, j)
			if walk != path {
				t.Fatalf("seed %d (replay with -multikey.seed=%d), round %d, index %d, record %x:\nwalk %s\npath %s",
					seed, seed, round, j, rec, walk, path)
			}
			if strings.HasPrefix(walk, "error") {
				errs++
			}
		}
	}
	if errs == 0 {
		t.Fatalf("seed %d: no record was refused: the hostile fields do not reach the walk", seed)
	}
}

// FuzzAppendMulti holds appendMulti's own walk to the field's path on
// arbitrary bytes.
func FuzzAppendMulti(f *testing.F) {
	rt := openCatalog(f, multiProto, "ex.Doc")
	rnd := rand.New(rand.NewPCG(1, 36))
	for range 20 {
		f.Add(randomDoc(rnd, nil))
	}
	f.Fuzz(func(t *testing.T, rec []byte) {
		for j := range rt.indexes {
			if walk, path := multiWalkBoth(rt, rec, j); walk != path {
				t.Fatalf("index %d, record %x:\nwalk %s\npath %s", j, rec, walk, path)
			}
		}
	})
}

// BenchmarkAppendMulti measures the entry keys of one record in an index
// on a repeated field, as a writer makes them for an insert: the record
// of the ingest benchmarks (an id, 10 tags of 1,000 values, a team).
func BenchmarkAppendMulti(b *testing.B) {
	rt := openCatalog(b, multiProto, "ex.Doc")
	rnd := rand.New(rand.NewPCG(7, 8))
	recs := make([][]byte, 1024)
	for i := range recs {
		v := protowire.AppendVarint(protowire.AppendTag(nil, 1, protowire.VarintType), uint64(i))
		for range 10 {
			v = protowire.AppendString(protowire.AppendTag(v, 2, protowire.BytesType), "tag"+strconv.Itoa(rnd.IntN(1000)))
		}
		recs[i] = protowire.AppendString(protowire.AppendTag(v, 3, protowire.BytesType), "t"+strconv.Itoa(i%10))
	}
	ix := rt.indexes[0]
	var m multiKeys
	var dst []byte
	var ends []int32
	var occ []occurrence
	pk := []byte{1, 2, 3, 4, 5, 6, 7, 8, 9}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		rec := recs[i%len(recs)]
		occ = rt.keys.locate(rec, occ)
		var err error
		dst, ends, _, err = rt.keys.appendMulti(dst[:0], rec, occ, 0, ix.prefix, pk, ends[:0], &m, false)
		if err != nil || len(ends) == 0 {
			b.Fatal(len(ends), err)
		}
	}
}
