package memsize

import (
	"runtime"
	"testing"
)

func TestParsing(t *testing.T) {
	for in, want := range map[string]uint64{
		"MemTotal:       24555948 kB\nMemFree: 1 kB\n": 24555948 << 10,
		"MemFree: 1 kB\nMemTotal: 1024 kB":             1 << 20,
		"MemTotal: lots kB":                            0,
		"MemTotal: -5 kB":                              0,
		"MemTotal: 99999999999999999999999 kB":         0,
		"":                                             0,
		"\x00\xff":                                     0,
	} {
		if got := memTotal([]byte(in)); got != want {
			t.Errorf("memTotal(%q) = %d, want %d", in, got, want)
		}
	}
	for in, want := range map[string]uint64{
		"max\n":                  0,
		"2147483648\n":           2 << 30,
		"9223372036854771712\n":  0, // cgroup v1's "no limit"
		"-1":                     0,
		"12abc":                  0,
		"":                       0,
		"18446744073709551616\n": 0,
	} {
		if got := cgroupLimit([]byte(in)); got != want {
			t.Errorf("cgroupLimit(%q) = %d, want %d", in, got, want)
		}
	}
	if m := Usable(); runtime.GOOS == "linux" && m < 64<<20 {
		t.Errorf("Usable() = %d on Linux", m)
	}
}
