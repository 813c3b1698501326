package pebble

import (
	"context"
	"fmt"
	"testing"

	"github.com/cockroachdb/pebble/v2"

	"github.com/protobase/protobase/internal/keyspace"
)

// A store whose tables Pebble wrote in its default columnar blocks (every
// store before row blocks became the store's choice) opens, reads them,
// writes row-block tables beside them, and compacts the two together
// without losing a key.
func TestOpensColumnarTables(t *testing.T) {
	dir := t.TempDir()
	db, err := pebble.Open(dir, &pebble.Options{FormatMajorVersion: pebble.FormatNewest, Logger: newPebbleLogger(nil)})
	if err != nil {
		t.Fatal(err)
	}
	// Every store the engine opened holds the token secret, which is how
	// Open tells a store of an earlier version from another program's.
	if err := db.Set([]byte(keyspace.SecretKey), make([]byte, 32), pebble.NoSync); err != nil {
		t.Fatal(err)
	}
	key := func(i int) string { return fmt.Sprintf("k%06d", i) }
	const n = 2000
	for i := 0; i < n; i += 2 {
		if err := db.Set([]byte(key(i)), []byte("columnar"), pebble.NoSync); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	s := openT(t, dir, true)
	wantValue(t, s, key(0), "columnar")
	commitT(t, s, func(b *Batch) {
		for i := 1; i < n; i += 2 {
			b.Set([]byte(key(i)), []byte("row"))
		}
	})
	if err := s.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := s.Compact(context.Background()); err != nil {
		t.Fatal(err)
	}
	var want []string
	for i := range n {
		want = append(want, key(i)+"=columnar")
		if i%2 == 1 {
			want[i] = key(i) + "=row"
		}
	}
	if got := scan(t, s, "k", "", false); !equal(got, want) {
		t.Fatalf("after compaction %d keys, want %d: %.80q", len(got), len(want), got)
	}
}
