package pebble

import "testing"

func TestDefaultSizesFollowMemory(t *testing.T) {
	for _, c := range []struct {
		memory          uint64
		cache, memtable int64
	}{
		{0, DefaultCacheBytes, DefaultMemTableBytes},
		{256 << 20, MinCacheBytes, MinMemTableBytes},
		{2 << 30, 256 << 20, 32 << 20},
		{24 << 30, 3 << 30, MaxMemTableBytes},
		{1 << 40, MaxCacheBytes, MaxMemTableBytes},
		{1<<64 - 1, MaxCacheBytes, MaxMemTableBytes},
	} {
		cache, mt := DefaultSizes(c.memory)
		if cache != c.cache || mt != c.memtable {
			t.Errorf("DefaultSizes(%d) = %d, %d; want %d, %d", c.memory, cache, mt, c.cache, c.memtable)
		}
	}
}
