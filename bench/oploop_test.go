package bench

import (
	"errors"
	"testing"
	"time"
)

// sink keeps the compiler from removing the allocations measured below.
var sink []byte

// MeasureOp runs long enough, grows the count past 1, and counts exactly
// the allocations the operation makes: one 4 KiB buffer per call.
func TestMeasureOp(t *testing.T) {
	r, err := MeasureOp(20*time.Millisecond, func(n int) error {
		for range n {
			sink = make([]byte, 4096)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if r.N < 2 || r.T < 20*time.Millisecond || r.T > 2*time.Second {
		t.Fatalf("%d iterations in %v", r.N, r.T)
	}
	if r.AllocsPerOp() != 1 || r.BytesPerOp() != 4096 {
		t.Fatalf("%d allocs/op, %d B/op; want 1 and 4096", r.AllocsPerOp(), r.BytesPerOp())
	}
	if ns := r.NsPerOp(); ns <= 0 || ns != float64(r.T.Nanoseconds())/float64(r.N) {
		t.Fatalf("%v ns/op", ns)
	}
	// An operation that allocates nothing reports zero.
	z, err := MeasureOp(time.Millisecond, func(n int) error {
		x := 0
		for i := range n {
			x += i
		}
		_ = x
		return nil
	})
	if err != nil || z.AllocsPerOp() != 0 || z.BytesPerOp() != 0 {
		t.Fatalf("%+v %v", z, err)
	}
}

// A failing operation fails the measurement, and a non-positive minimum
// time is refused.
func TestMeasureOpErrors(t *testing.T) {
	boom := errors.New("boom")
	if _, err := MeasureOp(time.Millisecond, func(int) error { return boom }); !errors.Is(err, boom) {
		t.Fatalf("got %v", err)
	}
	if _, err := MeasureOp(0, func(int) error { return nil }); err == nil {
		t.Fatal("zero minimum time accepted")
	}
}

// Growth is bounded: at least one more, at most 100 times more.
func TestNextOpIterations(t *testing.T) {
	for _, c := range []struct {
		last       int
		took, goal time.Duration
		want       int
	}{
		{1, time.Nanosecond, time.Second, 100},
		{100, time.Millisecond, 10 * time.Millisecond, 1200},
		{5, time.Second, time.Millisecond, 6},
		{1, 0, time.Second, 100},
	} {
		if got := nextOpIterations(c.last, c.took, c.goal); got != c.want {
			t.Errorf("after %d in %v for %v: %d, want %d", c.last, c.took, c.goal, got, c.want)
		}
	}
}
