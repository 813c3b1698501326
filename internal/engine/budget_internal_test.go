package engine

import (
	"context"
	"testing"
	"time"
)

// A budget serves its waiters first come first served, lets force pass
// the limit and makes later acquirers wait it out, and gives back a
// cancelled waiter's place (or the bytes taken for it meanwhile).
func TestBudget(t *testing.T) {
	b := newBudget(100)
	if !b.tryAcquire(60) || b.tryAcquire(50) {
		t.Fatal("60 of 100 taken, then 50 more must not fit")
	}
	got := make(chan int64, 3)
	wait := func(n int64) {
		go func() {
			if err := b.acquire(context.Background(), n); err != nil {
				t.Error(err)
			}
			got <- n
		}()
		time.Sleep(20 * time.Millisecond) // queued in this order
	}
	wait(50) // waits for room
	wait(10) // fits, but waits behind the first
	select {
	case n := <-got:
		t.Fatalf("%d taken while an earlier waiter waits", n)
	default:
	}
	b.force(60) // past the limit: 120 taken
	b.release(60)
	select {
	case n := <-got:
		t.Fatalf("%d taken while forced bytes fill the budget", n)
	case <-time.After(50 * time.Millisecond):
	}
	b.release(60)
	if a, c := <-got, <-got; a+c != 60 {
		t.Fatalf("waiters served %d and %d, want 50 and 10", a, c)
	}
	// A cancelled waiter leaves, and the one behind it is served.
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- b.acquire(ctx, 90) }()
	time.Sleep(20 * time.Millisecond)
	wait(30)
	cancel()
	if err := <-done; err == nil {
		t.Fatal("a cancelled acquire succeeded")
	}
	if n := <-got; n != 30 {
		t.Fatalf("served %d after the cancelled waiter, want 30", n)
	}
	b.release(90)
	if b.cur != 0 {
		t.Fatalf("%d bytes still taken after every release", b.cur)
	}
}
