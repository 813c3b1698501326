package etcd_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/protobase/protobase/internal/store"
	"github.com/protobase/protobase/internal/store/etcd"
	"github.com/protobase/protobase/internal/store/etcd/etcdtest"
)

func open(t *testing.T, endpoint string) *etcd.Store {
	t.Helper()
	s, err := etcd.Open(etcd.Options{Endpoints: []string{endpoint}, Prefix: "/" + t.Name() + "/"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// A batch over the cluster's limits is refused whole, with the limit and
// the flag that raises it named; a batch within them applies.
func TestLimits(t *testing.T) {
	s := open(t, etcdtest.Start(t, etcdtest.Limits{})) // etcd's defaults: 128 ops, 1.5 MiB
	for _, tc := range []struct {
		name string
		fill func(store.WriteBatch)
		flag string
	}{
		{"ops", func(b store.WriteBatch) {
			for i := range 129 {
				b.Set(fmt.Appendf(nil, "k%d", i), nil)
			}
		}, "--max-txn-ops"},
		{"bytes", func(b store.WriteBatch) {
			b.Set([]byte("big"), make([]byte, 3<<20))
		}, "--max-request-bytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := s.NewWriteBatch()
			defer b.Close()
			tc.fill(b)
			err := s.ApplyBatch(b)
			if !errors.Is(err, store.ErrLimit) || !strings.Contains(err.Error(), tc.flag) {
				t.Fatalf("ApplyBatch = %v; want ErrLimit naming %s", err, tc.flag)
			}
			if _, found, _ := s.Get([]byte("k0"), nil); found {
				t.Error("part of a refused batch applied")
			}
		})
	}
	b := s.NewWriteBatch()
	defer b.Close()
	for i := range 128 {
		b.Set(fmt.Appendf(nil, "k%d", i), nil)
	}
	if err := s.ApplyBatch(b); err != nil {
		t.Fatalf("ApplyBatch of 128 operations: %v", err)
	}
}

// A snapshot whose revision the cluster compacted fails its reads with
// ErrCompacted, never rows of another revision.
func TestCompactedSnapshot(t *testing.T) {
	s := open(t, etcdtest.Start(t, etcdtest.Roomy))
	put := func(v string) int64 {
		b := s.NewWriteBatch()
		defer b.Close()
		b.Set([]byte("a"), []byte(v))
		if err := s.ApplyBatch(b); err != nil {
			t.Fatal(err)
		}
		return int64(b.Position())
	}
	first := put("1")
	snap, err := s.OpenSnapshot()
	if err != nil {
		t.Fatal(err)
	}
	defer snap.Close()
	second := put("2")
	if second <= first {
		t.Fatalf("positions %d then %d: not increasing", first, second)
	}
	if _, err := s.Client().Compact(context.Background(), second); err != nil {
		t.Fatal(err)
	}
	if v, _, err := snap.Get([]byte("a"), nil); !errors.Is(err, store.ErrCompacted) {
		t.Errorf("Get on a compacted snapshot = %q, %v; want ErrCompacted", v, err)
	}
	it, err := snap.NewIterator(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	if it.First() || !errors.Is(it.Error(), store.ErrCompacted) {
		t.Errorf("iterating a compacted snapshot: valid %v, error %v; want ErrCompacted", it.Valid(), it.Error())
	}
}

func TestOpenErrors(t *testing.T) {
	if _, err := etcd.Open(etcd.Options{}); err == nil {
		t.Error("Open without endpoints succeeded")
	}
	// A port nobody listens on: Open fails within its dial timeout.
	if _, err := etcd.Open(etcd.Options{Endpoints: []string{"127.0.0.1:1"}, DialTimeout: 200e6}); err == nil {
		t.Error("Open of an unreachable endpoint succeeded")
	}
}

// CheckBatch applies none of a batch's writes and reports whether the
// reads made through it (present, absent, an empty range) all still hold:
// ErrConflict once any of them changed.
func TestCheckBatch(t *testing.T) {
	s := open(t, etcdtest.Start(t, etcdtest.Limits{}))
	set := func(k string) {
		t.Helper()
		b := s.NewWriteBatch()
		defer b.Close()
		b.Set([]byte(k), []byte("v"))
		if err := s.ApplyBatch(b); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name   string
		change string // the key written between the reads and the check
		want   error
	}{
		{"unchanged", "elsewhere", nil},
		{"present rewritten", "present", store.ErrConflict},
		{"absent written", "absent", store.ErrConflict},
		{"range written", "range/b", store.ErrConflict},
	} {
		t.Run(tc.name, func(t *testing.T) {
			key := func(k string) []byte { return []byte(tc.name + "/" + k) }
			set(string(key("present")))
			b := s.NewWriteBatch()
			defer b.Close()
			if _, found, err := b.Read(key("present"), nil, false); err != nil || !found {
				t.Fatalf("read present: %v, %v", found, err)
			}
			if _, found, err := b.Read(key("absent"), nil, true); err != nil || found {
				t.Fatalf("read absent: %v, %v", found, err)
			}
			if empty, err := b.ReadAbsent(key("range/"), key("range0")); err != nil || !empty {
				t.Fatalf("read range: %v, %v", empty, err)
			}
			b.Set(key("written"), []byte("w"))
			set(string(key(tc.change)))
			if err := s.CheckBatch(b); (err == nil) != (tc.want == nil) || !errors.Is(err, tc.want) {
				t.Fatalf("CheckBatch = %v, want %v", err, tc.want)
			}
			if _, found, _ := s.Get(key("written"), nil); found {
				t.Fatal("CheckBatch applied the batch's write")
			}
		})
	}
}
