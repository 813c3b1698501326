package engine

import (
	"bytes"
	"context"
	"math/rand/v2"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"

	pb "github.com/protobase/protobase/gen/protobase/v1"
	"github.com/protobase/protobase/internal/keyspace"
	"github.com/protobase/protobase/internal/store/pebble"
)

const extractProto = `syntax = "proto3";
package ex;
import "protobase/v1/options.proto";
message Address { string city = 1; int32 zip = 2; }
message Rec {
  option (protobase.v1.record) = {
    primary_key: "id"
    primary_key: "region"
    index: { fields: "name" }
    index: { fields: "email" unique: true }
    index: { fields: "address.city" fields: "score" }
    index: { fields: "tag" fields: "flag" fields: "id" }
    index: { fields: "size" fields: "ratio" }
    index: { fields: "i32" fields: "s32" fields: "s64" fields: "e" }
    index: { fields: "f64" fields: "u64" fields: "f32" fields: "sf64" }
  };
  int64 id = 1;
  uint32 region = 2;
  string name = 3;
  string email = 4;
  Address address = 5;
  double score = 6;
  oneof kind { string tag = 7; int64 code = 8; }
  bool flag = 9;
  sfixed32 size = 10;
  float ratio = 11;
  bytes note = 12;
  int32 i32 = 13;
  sint32 s32 = 14;
  sint64 s64 = 15;
  Color e = 16;
  fixed64 f64 = 17;
  uint64 u64 = 18;
  fixed32 f32 = 19;
  sfixed64 sf64 = 20;
}
enum Color { COLOR_UNSPECIFIED = 0; RED = 1; BLUE = -2; }
`

// openCatalog applies src to an engine on a real store and returns the
// record type name's compiled form.
func openCatalog(t testing.TB, src, name string) *recType {
	t.Helper()
	st, err := pebble.Open(pebble.Options{Dir: t.TempDir(), Layout: keyspace.Layout{}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	e, err := Open(context.Background(), st, Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	if _, err := e.ApplySchema(context.Background(), &pb.ApplySchemaRequest{Files: map[string]string{"ex.proto": src}}); err != nil {
		t.Fatal(err)
	}
	rt := e.cat.Load().lookup(name)
	if rt == nil {
		t.Fatalf("no type %s", name)
	}
	return rt
}

// randomRec encodes a valid ex.Rec with fields present or absent, repeated
// (the last occurrence wins), nested messages split over occurrences (they
// merge), and oneof members overriding each other.
func randomRec(r *rand.Rand) []byte {
	var b []byte
	for range r.IntN(16) {
		switch r.IntN(20) {
		case 0:
			b = protowire.AppendVarint(protowire.AppendTag(b, 1, protowire.VarintType), r.Uint64())
		case 1:
			b = protowire.AppendVarint(protowire.AppendTag(b, 2, protowire.VarintType), uint64(r.Uint32()))
		case 2:
			b = protowire.AppendString(protowire.AppendTag(b, 3, protowire.BytesType), string(rune('a'+r.IntN(26))))
		case 3:
			b = protowire.AppendString(protowire.AppendTag(b, 4, protowire.BytesType), "e"+string(rune('a'+r.IntN(26))))
		case 4:
			var sub []byte
			if r.IntN(2) == 0 {
				sub = protowire.AppendString(protowire.AppendTag(sub, 1, protowire.BytesType), "c"+string(rune('a'+r.IntN(26))))
			}
			if r.IntN(2) == 0 {
				sub = protowire.AppendVarint(protowire.AppendTag(sub, 2, protowire.VarintType), uint64(r.Int32()))
			}
			b = protowire.AppendBytes(protowire.AppendTag(b, 5, protowire.BytesType), sub)
		case 5:
			b = protowire.AppendFixed64(protowire.AppendTag(b, 6, protowire.Fixed64Type), r.Uint64())
		case 6:
			b = protowire.AppendString(protowire.AppendTag(b, 7, protowire.BytesType), "t"+string(rune('a'+r.IntN(26))))
		case 7:
			b = protowire.AppendVarint(protowire.AppendTag(b, 8, protowire.VarintType), r.Uint64())
		case 8:
			b = protowire.AppendVarint(protowire.AppendTag(b, 9, protowire.VarintType), uint64(r.IntN(2)))
		case 9:
			b = protowire.AppendFixed32(protowire.AppendTag(b, 10, protowire.Fixed32Type), r.Uint32())
		case 10:
			b = protowire.AppendFixed32(protowire.AppendTag(b, 11, protowire.Fixed32Type), r.Uint32())
		case 11:
			b = protowire.AppendBytes(protowire.AppendTag(b, 12, protowire.BytesType), []byte{byte(r.Uint32())})
		case 12, 13, 14, 15, 17: // int32, sint32, sint64, enum, uint64: any varint
			num := []protowire.Number{13, 14, 15, 16, 18}[r.IntN(5)]
			b = protowire.AppendVarint(protowire.AppendTag(b, num, protowire.VarintType), r.Uint64()>>r.IntN(64))
		case 16:
			b = protowire.AppendFixed64(protowire.AppendTag(b, 17, protowire.Fixed64Type), r.Uint64())
		case 18:
			b = protowire.AppendFixed32(protowire.AppendTag(b, 19, protowire.Fixed32Type), r.Uint32())
		case 19:
			b = protowire.AppendFixed64(protowire.AppendTag(b, 20, protowire.Fixed64Type), r.Uint64())
		}
	}
	return b
}

// TestKeyExtractorMatchesPaths checks the one-walk extractor against the
// per-path reads it replaces, on valid records of every shape and on
// malformed bytes (which must fail alike, naming the same field).
func TestKeyExtractorMatchesPaths(t *testing.T) {
	rt := openCatalog(t, extractProto, "ex.Rec")
	if len(rt.indexes) != 7 {
		t.Fatalf("%d indexes, want 7", len(rt.indexes))
	}
	r := rand.New(rand.NewPCG(1, 2))
	var occ []occurrence
	check := func(rec []byte) {
		t.Helper()
		occ = rt.keys.locate(rec, occ[:0])
		want, wantField, wantErr := appendKey(nil, rec, rt.pk)
		got, gotField, gotErr := rt.keys.appendPK(nil, rec, occ)
		if !bytes.Equal(got, want) || gotField != wantField || (gotErr == nil) != (wantErr == nil) {
			t.Fatalf("record % x: pk % x %q %v, want % x %q %v", rec, got, gotField, gotErr, want, wantField, wantErr)
		}
		for j, ix := range rt.indexes {
			want, wantField, wantErr := appendKey(nil, rec, ix.paths)
			got, gotField, gotErr := rt.keys.appendIndex(nil, rec, occ, j)
			if !bytes.Equal(got, want) || gotField != wantField || (gotErr == nil) != (wantErr == nil) {
				t.Fatalf("record % x index %s: % x %q %v, want % x %q %v", rec, ix.ix.Name, got, gotField, gotErr, want, wantField, wantErr)
			}
		}
	}
	for range 5000 {
		rec := randomRec(r)
		if err := rt.rec.Validate(rec); err != nil {
			t.Fatalf("generated an invalid record % x: %v", rec, err)
		}
		check(rec)
		if len(rec) > 0 {
			check(rec[:r.IntN(len(rec))]) // truncated: may be malformed
		}
	}
	check([]byte{0x0a, 0x05, 'a'})                                     // wire type mismatch on id, truncated
	check(protowire.AppendString(protowire.AppendTag(nil, 1, 2), "x")) // id sent as bytes
	// A field number past the largest, which a tag's varint can hold.
	check(append(protowire.AppendVarint(nil, uint64(protowire.MaxValidNumber+1)<<3), 1))
}

// TestKeyExtractorAllocs: the write path's key reads allocate nothing.
func TestKeyExtractorAllocs(t *testing.T) {
	rt := openCatalog(t, extractProto, "ex.Rec")
	rec := randomRec(rand.New(rand.NewPCG(3, 4)))
	occ := make([]occurrence, 0, 16)
	dst := make([]byte, 0, 256)
	allocs := testing.AllocsPerRun(100, func() {
		occ = rt.keys.locate(rec, occ[:0])
		d, _, _ := rt.keys.appendPK(dst[:0], rec, occ)
		for j := range rt.indexes {
			d, _, _ = rt.keys.appendIndex(d[:0], rec, occ, j)
		}
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per record, want 0", allocs)
	}
}

// BenchmarkKeyExtractor compares the one-walk extractor with a walk per
// key field (appendKey per path list), on a record with a primary key and
// seven indexes: the keys an insert encodes, and an update's old-record
// index keys.
func BenchmarkKeyExtractor(b *testing.B) {
	r := rand.New(rand.NewPCG(5, 6))
	var rec []byte
	for len(rec) < 60 {
		rec = randomRec(r)
	}
	b.Run("rec=seven-indexes", func(b *testing.B) { benchExtract(b, openCatalog(b, extractProto, "ex.Rec"), rec) })
	// The ingest benchmarks' record: ~100 bytes, one index.
	var item []byte
	item = protowire.AppendVarint(protowire.AppendTag(item, 1, protowire.VarintType), 123456789)
	item = protowire.AppendString(protowire.AppendTag(item, 2, protowire.BytesType), "name-000000012345")
	item = protowire.AppendString(protowire.AppendTag(item, 3, protowire.BytesType), "user0000123456@example.com")
	item = protowire.AppendVarint(protowire.AppendTag(item, 4, protowire.VarintType), 1700000123456)
	item = protowire.AppendString(protowire.AppendTag(item, 5, protowire.BytesType), "lorem ipsum dolor sit amet consectetur")
	b.Run("rec=item", func(b *testing.B) { benchExtract(b, openCatalog(b, extractItemProto, "ex.Item"), item) })
}

const extractItemProto = `syntax = "proto3";
package ex;
import "protobase/v1/options.proto";
message Item {
  option (protobase.v1.record) = { primary_key: "id" index: { fields: "name" } };
  int64 id = 1;
  string name = 2;
  string email = 3;
  int64 created = 4;
  string note = 5;
}
`

func benchExtract(b *testing.B, rt *recType, rec []byte) {
	dst := make([]byte, 0, 512)
	occ := make([]occurrence, 0, 16)
	b.Run("walk", func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			occ = rt.keys.locate(rec, occ[:0])
			d, _, _ := rt.keys.appendPK(dst[:0], rec, occ)
			for j := range rt.indexes {
				d, _, _ = rt.keys.appendIndex(d, rec, occ, j)
			}
		}
	})
	b.Run("per-path", func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			d, _, _ := appendKey(dst[:0], rec, rt.pk)
			for _, ix := range rt.indexes {
				d, _, _ = appendKey(d, rec, ix.paths)
			}
		}
	})
}
