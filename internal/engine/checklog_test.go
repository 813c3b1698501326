package engine_test

import (
	"math/rand/v2"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/protobase/protobase/internal/engine"
	"github.com/protobase/protobase/internal/keyspace"
	"github.com/protobase/protobase/internal/store"
)

// blobProto is a type without indexes whose records are as large as a
// test makes them.
const blobProto = `syntax = "proto3";
package blob;
import "protobase/v1/options.proto";

message Blob {
  option (protobase.v1.record) = { primary_key: "id" };
  int64 id = 1;
  bytes data = 2;
}
`

// logEngine opens an engine with the change log on, and shopProto and
// blobProto applied.
func logEngine(t *testing.T) *testEngine {
	t.Helper()
	te := openEngine(t, t.TempDir(), engine.Options{WatchRetention: time.Hour, WatchTrimInterval: time.Hour})
	te.Apply(map[string]string{"shop.proto": shopProto, "blob.proto": blobProto})
	return te
}

// blob is a blob.Blob record of id holding n random bytes.
func blob(id int64, n int, seed uint64) *anypb.Any {
	data := make([]byte, n)
	r := rand.New(rand.NewPCG(seed, uint64(id)))
	for i := range data {
		data[i] = byte(r.Uint32())
	}
	b := protowire.AppendTag(nil, 1, protowire.VarintType)
	b = protowire.AppendVarint(b, uint64(id))
	b = protowire.AppendTag(b, 2, protowire.BytesType)
	b = protowire.AppendBytes(b, data)
	return &anypb.Any{TypeUrl: "type.googleapis.com/blob.Blob", Value: b}
}

func users(te *testEngine, from, n int) []*anypb.Any {
	out := make([]*anypb.Any, n)
	for i := range out {
		id := itoa(from + i)
		out[i] = te.Rec("shop.User", `{"id": `+id+`, "name": "n`+id+`", "email": "e`+id+`"}`)
	}
	return out
}

// TestCheckChangeLog damages the change log three ways; Check names each.
func TestCheckChangeLog(t *testing.T) {
	te := logEngine(t)
	for i := range 4 {
		te.MustWrite(engine.OpInsert, users(te, 10*i, 3))
	}
	te.MustWrite(engine.OpInsert, []*anypb.Any{blob(1, 600<<10, 8)}) // commit 5, in 3 parts
	te.MustWrite(engine.OpInsert, users(te, 100, 3))
	if r := te.MustCheck(); r.LogEntries != 6 {
		t.Fatalf("check read %d change-log entries, want 6", r.LogEntries)
	}
	for _, c := range []struct {
		name string
		harm func(b store.WriteBatch)
		want engine.ProblemKind
	}{
		{"a malformed entry", func(b store.WriteBatch) {
			b.Set(keyspace.AppendLogKey(nil, 2), []byte{1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 9, 0x7f})
		}, engine.ProblemBadLogEntry},
		{"a missing part", func(b store.WriteBatch) {
			b.Delete(keyspace.AppendLogPartKey(nil, 5, 1))
		}, engine.ProblemBadLogEntry},
		{"a missing entry", func(b store.WriteBatch) {
			b.Delete(keyspace.AppendLogKey(nil, 3))
		}, engine.ProblemLogGap},
	} {
		b := te.St.NewWriteBatch()
		b.Stamp(1)
		c.harm(b)
		if err := te.St.ApplyBatch(b); err != nil {
			t.Fatal(err)
		}
		b.Close()
		r, err := engine.Check(t.Context(), te.St)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		found := false
		for _, p := range r.Problems {
			found = found || p.Kind == c.want
		}
		if !found {
			t.Fatalf("%s: check found %v, want a %s", c.name, r.Problems, c.want)
		}
	}
}
