package engine

import (
	"testing"

	"github.com/protobase/protobase/internal/keyspace"
)

// Only the entries of a non-unique index of the catalog are left without
// bloom filters: a unique index's (read by its uniqueness checks), the
// records, the meta keys and the entries of an index the catalog does not
// hold keep theirs.
func TestRangedOnlySpans(t *testing.T) {
	e := openEngine(t)
	if _, err := apply(e, `syntax = "proto3";
package inv;
import "protobase/v1/options.proto";
message Item {
  option (protobase.v1.record) = {
    primary_key: "id"
    index: { fields: "name" }
    index: { fields: "email" unique: true }
  };
  int64 id = 1;
  string name = 2;
  string email = 3;
}
`); err != nil {
		t.Fatal(err)
	}
	var plain, unique []byte
	for _, rt := range e.cat.Load().byID {
		for _, ix := range rt.indexes {
			if ix.ix.Unique {
				unique = ix.prefix
			} else {
				plain = ix.prefix
			}
		}
	}
	if plain == nil || unique == nil {
		t.Fatalf("indexes not in the catalog: plain %x, unique %x", plain, unique)
	}
	for _, c := range []struct {
		key  []byte
		want bool
	}{
		{append(plain[:len(plain):len(plain)], "\x01name\x00\x00"...), true},
		{plain, true},
		{append(unique[:len(unique):len(unique)], "\x01a@b\x00\x00"...), false},
		{keyspace.AppendRecordKey(nil, 1, []byte{1}), false},
		{keyspace.AppendLogKey(nil, 7), false},
		{[]byte(keyspace.SeqKey), false},
		{keyspace.IndexPrefix(1 << 30), false},
		{plain[:keyspace.PrefixLen-1], false},
		{nil, false},
	} {
		if got := e.rangedOnly(c.key); got != c.want {
			t.Errorf("rangedOnly(% x) = %v, want %v", c.key, got, c.want)
		}
	}
}
