package pebble

import "testing"

// A log file reserves twice what it holds in whole MiB, at least 1 MiB,
// and never beyond Pebble's own reservation in blocks of most bytes.
func TestWALReserveEnd(t *testing.T) {
	const mib = 1 << 20
	most := pebbleWALReserve(128 << 20) // 140.8 MiB
	for _, c := range []struct{ end, most, want int64 }{
		{1, most, mib},
		{mib / 2, most, mib},
		{mib/2 + 1, most, 2 * mib},
		{3*mib + 300<<10, most, 7 * mib},
		{60 * mib, most, 120 * mib},
		{80 * mib, most, most},
		{most + 1, most, 2 * most},
		{3 * mib, 0, 6 * mib},
		{3 * mib, 4 * mib, 4 * mib},
	} {
		if got := walReserveEnd(c.end, c.most); got != c.want {
			t.Errorf("walReserveEnd(%d, %d) = %d, want %d", c.end, c.most, got, c.want)
		}
	}
}
