package freeport

import (
	"net"
	"strconv"
	"testing"
)

func TestParseLow(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int
		ok   bool
	}{
		{"32768\t60999\n", 32768, true},
		{"1024 65000", 1024, true},
		{"", 0, false},
		{"32768", 0, false},
		{"x 60999", 0, false},
		{"0 60999", 0, false},
		{"70000 80000", 0, false},
	} {
		got, err := parseLow(tc.in)
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("parseLow(%q) = %d, %v; want %d, ok %v", tc.in, got, err, tc.want, tc.ok)
		}
	}
}

// The ports are distinct, free (they can be bound) and, where the kernel
// says its ephemeral range, below it.
func TestLoopback(t *testing.T) {
	ports, err := Loopback(8)
	if err != nil {
		t.Fatal(err)
	}
	low := ephemeralLow()
	seen := map[int]bool{}
	for _, p := range ports {
		if seen[p] {
			t.Fatalf("port %d twice in %v", p, ports)
		}
		seen[p] = true
		if low-floor >= 1000 && (p < floor || p >= low) {
			t.Errorf("port %d outside [%d, %d)", p, floor, low)
		}
		l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
		if err != nil {
			t.Fatalf("port %d is not free: %v", p, err)
		}
		l.Close()
	}
}

// A port some listener holds is never picked.
func TestLoopbackSkipsTaken(t *testing.T) {
	low := ephemeralLow()
	if low-floor < 1000 {
		t.Skip("no room below the ephemeral range on this machine")
	}
	l, err := listen(floor + 1000)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	taken := l.Addr().(*net.TCPAddr).Port
	// Over [floor, floor+1000) with one port taken, 2,000 picks all
	// succeed and none is the taken one.
	for range 2000 {
		m, err := listen(floor + 1000)
		if err != nil {
			t.Fatal(err)
		}
		if p := m.Addr().(*net.TCPAddr).Port; p == taken {
			t.Fatalf("picked port %d, which a listener holds", p)
		}
		m.Close()
	}
}
