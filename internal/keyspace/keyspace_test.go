package keyspace

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/protobase/protobase/internal/orderedcode"
)

func TestPrefixEnd(t *testing.T) {
	for _, tc := range []struct{ in, want []byte }{
		{[]byte{0x01, 0, 0, 0, 7}, []byte{0x01, 0, 0, 0, 8}},
		{[]byte{0x02, 0, 0, 0, 0xff}, []byte{0x02, 0, 0, 1}},
		{[]byte{0x02, 0xff, 0xff}, []byte{0x03}},
		{[]byte{0xff, 0xff}, nil},
		{nil, nil},
	} {
		if got := PrefixEnd(tc.in); !bytes.Equal(got, tc.want) {
			t.Errorf("PrefixEnd(% x) = % x, want % x", tc.in, got, tc.want)
		}
	}
	in := []byte{0x01, 0x00}
	PrefixEnd(in)
	if !bytes.Equal(in, []byte{0x01, 0x00}) {
		t.Errorf("PrefixEnd modified its argument: % x", in)
	}
}

func TestPrefixes(t *testing.T) {
	if got, want := RecordPrefix(0x01020304), []byte{TagRecord, 1, 2, 3, 4}; !bytes.Equal(got, want) {
		t.Errorf("RecordPrefix = % x, want % x", got, want)
	}
	if got, want := IndexPrefix(7), []byte{TagIndex, 0, 0, 0, 7}; !bytes.Equal(got, want) {
		t.Errorf("IndexPrefix = % x, want % x", got, want)
	}
	if got, want := AppendRecordKey([]byte("x"), 9, []byte{0xaa}), []byte{'x', TagRecord, 0, 0, 0, 9, 0xaa}; !bytes.Equal(got, want) {
		t.Errorf("AppendRecordKey = % x, want % x", got, want)
	}
	start, end := Bounds()
	for _, k := range [][]byte{[]byte(SchemaKey), []byte(SeqKey), []byte(SecretKey), RecordPrefix(0), RecordPrefix(1<<32 - 2), append(IndexPrefix(1<<32-2), 0xff, 0xff)} {
		if bytes.Compare(k, start) < 0 || bytes.Compare(k, end) >= 0 {
			t.Errorf("key % x outside Bounds [% x, % x)", k, start, end)
		}
	}
	for _, k := range []string{SchemaKey, SeqKey, SecretKey} {
		if k[0] != TagMeta {
			t.Errorf("meta key %q does not start with TagMeta", k)
		}
	}
}

func TestIndexEntryPK(t *testing.T) {
	pk := orderedcode.AppendInt(nil, 42)
	strInt := []orderedcode.Kind{orderedcode.KindString, orderedcode.KindInt}
	entry := func(id uint32, parts ...[]byte) []byte {
		k := IndexPrefix(id)
		for _, p := range parts {
			k = append(k, p...)
		}
		return k
	}
	for _, tc := range []struct {
		name  string
		key   []byte
		id    uint32
		kinds []orderedcode.Kind
		want  []byte
		err   error // nil: success; ErrForeignKey; errAny: some keys error
	}{
		{"one field", entry(3, orderedcode.AppendString(nil, "ann"), pk), 3, []orderedcode.Kind{orderedcode.KindString}, pk, nil},
		{"two fields", entry(3, orderedcode.AppendString(nil, "a\x00b"), orderedcode.AppendInt(nil, -1), pk), 3, strInt, pk, nil},
		{"empty pk", entry(3, orderedcode.AppendString(nil, "")), 3, []orderedcode.Kind{orderedcode.KindString}, []byte{}, nil},
		{"no fields", entry(3, pk), 3, nil, pk, nil},
		{"other index", entry(4, orderedcode.AppendString(nil, "ann"), pk), 3, []orderedcode.Kind{orderedcode.KindString}, nil, ErrForeignKey},
		{"record key", AppendRecordKey(nil, 3, pk), 3, nil, nil, ErrForeignKey},
		{"short", []byte{TagIndex, 0, 0}, 0, nil, nil, ErrForeignKey},
		{"truncated index key", entry(3, []byte{0x01}), 3, []orderedcode.Kind{orderedcode.KindInt}, nil, errAny},
		{"unterminated string", entry(3, []byte("ab")), 3, []orderedcode.Kind{orderedcode.KindString}, nil, errAny},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := IndexEntryPK(tc.key, tc.id, tc.kinds)
			switch {
			case tc.err == nil && err != nil:
				t.Fatalf("error %v", err)
			case errors.Is(tc.err, ErrForeignKey) && !errors.Is(err, ErrForeignKey):
				t.Fatalf("error %v, want ErrForeignKey", err)
			case errors.Is(tc.err, errAny) && (err == nil || errors.Is(err, ErrForeignKey)):
				t.Fatalf("error %v, want a key decoding error", err)
			case tc.err == nil && !bytes.Equal(got, tc.want):
				t.Fatalf("pk % x, want % x", got, tc.want)
			}
		})
	}
}

var errAny = errors.New("any")

// TestDesignDocTable checks the key table of docs/design.md against the
// package: every row's key column must be one this package lays out, and
// every key this package lays out must have a row.
func TestDesignDocTable(t *testing.T) {
	f, err := os.Open("../../docs/design.md")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	want := map[string]bool{
		fmt.Sprintf("%02x %q", TagMeta, SchemaKey[1:]):                          true,
		fmt.Sprintf("%02x %q", TagMeta, SeqKey[1:]):                             true,
		fmt.Sprintf("%02x %q", TagMeta, SecretKey[1:]):                          true,
		fmt.Sprintf("%02x %q name", TagMeta, APIKeyPrefix[1:]):                  true,
		fmt.Sprintf("%02x %q indexID(4)", TagMeta, BuildPrefix[1:]):             true,
		fmt.Sprintf("%02x %q indexID(4) \"/\" lease", TagMeta, BuildPrefix[1:]): true,
		fmt.Sprintf("%02x %q commit(8)", TagMeta, LogPrefix[1:]):                true,
		fmt.Sprintf("%02x %q commit(8) part(4)", TagMeta, LogPrefix[1:]):        true,
		fmt.Sprintf("%02x %q typeID(4)", TagMeta, WrittenPrefix[1:]):            true,
		fmt.Sprintf("%02x typeID(4) pk", TagRecord):                             true,
		fmt.Sprintf("%02x %x", TagRecord, ExpiryMarkKey[1:]):                    true,
		fmt.Sprintf("%02x indexID(4) ixkey pk", TagIndex):                       true,
		fmt.Sprintf("%02x indexID(4) ixkey", TagIndex):                          true,
		fmt.Sprintf("%02x indexID(4) groupkey", TagIndex):                       true,
		// The Pebble store's own keys under StorePrefix, which it names.
		fmt.Sprintf("%02x %q n(8)", TagMeta, StorePrefix[1:]+"ixlog/"): true,
		fmt.Sprintf("%02x %q", TagMeta, StorePrefix[1:]+"index"):       true,
		fmt.Sprintf("%02x %q", TagMeta, StorePrefix[1:]+"floor"):       true,
	}
	got := map[string]bool{}
	in := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "| key | value |":
			in = true
			continue
		case !in:
			continue
		case !strings.HasPrefix(line, "|"):
			in = false
			continue
		case strings.HasPrefix(line, "|---"):
			continue
		}
		cells := strings.Split(line, "|")
		if len(cells) < 3 {
			t.Fatalf("malformed table row %q", line)
		}
		key := strings.Trim(strings.TrimSpace(cells[1]), "`")
		if !want[key] {
			t.Errorf("docs/design.md lists key %q, which the key space does not have", key)
		}
		got[key] = true
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	for k := range want {
		if !got[k] {
			t.Errorf("docs/design.md has no row for key %q", k)
		}
	}
}

func TestLogKey(t *testing.T) {
	for _, c := range []uint64{0, 1, 1 << 40, 1<<64 - 1} {
		k := AppendLogKey(nil, c)
		if got, ok := LogCommit(k); !ok || got != c {
			t.Errorf("LogCommit(AppendLogKey(%d)) = %d, %v", c, got, ok)
		}
		if k[0] != TagMeta || len(k) != LogKeyLen {
			t.Errorf("log key % x: want TagMeta first and length %d", k, LogKeyLen)
		}
	}
	if bytes.Compare(AppendLogKey(nil, 255), AppendLogKey(nil, 256)) >= 0 {
		t.Error("log keys do not sort in commit order")
	}
	for _, k := range [][]byte{nil, []byte(LogPrefix), []byte(SeqKey), append(AppendLogKey(nil, 1), 0)} {
		if _, ok := LogCommit(k); ok {
			t.Errorf("LogCommit(% x) accepted a key that is not a log key", k)
		}
	}
}

// TestLogPartKey checks that the parts of an entry sort after its key, in
// part order, and before the next commit's key.
func TestLogPartKey(t *testing.T) {
	for _, c := range []uint64{0, 7, 1<<64 - 1} {
		for _, n := range []uint32{0, 1, 1<<32 - 1} {
			k := AppendLogPartKey(nil, c, n)
			if gc, gn, ok := LogPart(k); !ok || gc != c || gn != n {
				t.Errorf("LogPart(AppendLogPartKey(%d, %d)) = %d, %d, %v", c, n, gc, gn, ok)
			}
		}
	}
	order := [][]byte{AppendLogKey(nil, 7), AppendLogPartKey(nil, 7, 0), AppendLogPartKey(nil, 7, 1),
		AppendLogPartKey(nil, 7, 256), AppendLogKey(nil, 8)}
	for i := 1; i < len(order); i++ {
		if bytes.Compare(order[i-1], order[i]) >= 0 {
			t.Errorf("% x sorts before % x", order[i], order[i-1])
		}
	}
	for _, k := range [][]byte{nil, AppendLogKey(nil, 7), append(AppendLogPartKey(nil, 7, 0), 0), []byte(SeqKey + "0123456789ab")} {
		if _, _, ok := LogPart(k); ok {
			t.Errorf("LogPart(% x) accepted a key that is not a part key", k)
		}
	}
}

// TestLayout checks what the Pebble store is told: the index span holds
// every index entry and nothing else, and the store's own keys sort before
// every key of the engine and inside Bounds.
func TestLayout(t *testing.T) {
	var l Layout
	lo, hi := l.IndexSpan()
	in := func(k []byte) bool { return bytes.Compare(k, lo) >= 0 && bytes.Compare(k, hi) < 0 }
	for _, k := range [][]byte{IndexPrefix(0), append(IndexPrefix(1<<32-2), 0xff, 0xff), {TagIndex}} {
		if !in(k) {
			t.Errorf("index key % x outside the index span [% x, % x)", k, lo, hi)
		}
	}
	for _, k := range [][]byte{nil, []byte(SchemaKey), []byte(StorePrefix), AppendLogKey(nil, 1<<64-1), append(RecordPrefix(1<<32-2), 0xff)} {
		if in(k) {
			t.Errorf("key % x inside the index span [% x, % x)", k, lo, hi)
		}
	}
	own := append(l.StorePrefix(), 0xff, 0xff)
	start, end := l.Bounds()
	if bytes.Compare(l.StorePrefix(), start) < 0 || bytes.Compare(own, end) >= 0 {
		t.Errorf("the store's keys under % x lie outside Bounds [% x, % x)", l.StorePrefix(), start, end)
	}
	for _, other := range []string{APIKeyPrefix, BuildPrefix, LogPrefix, SchemaKey, SecretKey, SeqKey} {
		if bytes.Compare(own, []byte(other)) >= 0 {
			t.Errorf("the store's key % x does not sort before %q", own, other)
		}
	}
	if len(l.KnownKeys()) == 0 {
		t.Error("no known keys")
	}
}
