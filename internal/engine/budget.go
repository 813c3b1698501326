package engine

import (
	"container/list"
	"context"
	"sync"
)

// budget counts bytes of memory against a limit. acquire waits, first
// come first served, while the bytes taken would pass the limit; force
// takes bytes at once, past the limit if need be, for memory that exists
// already and cannot wait (a storage batch once applied): acquirers then
// wait until it is given back. It is golang.org/x/sync/semaphore's
// Weighted with force added.
type budget struct {
	mu      sync.Mutex
	size    int64
	cur     int64
	waiters list.List // of *budgetWaiter, oldest first
}

type budgetWaiter struct {
	n     int64
	ready chan struct{} // closed when the bytes are taken for it
}

func newBudget(size int64) *budget { return &budget{size: size} }

// acquire takes n bytes, waiting until they fit or ctx ends. n must not
// exceed the size.
func (b *budget) acquire(ctx context.Context, n int64) error {
	b.mu.Lock()
	if b.cur+n <= b.size && b.waiters.Len() == 0 {
		b.cur += n
		b.mu.Unlock()
		return nil
	}
	w := &budgetWaiter{n: n, ready: make(chan struct{})}
	elem := b.waiters.PushBack(w)
	b.mu.Unlock()
	select {
	case <-w.ready:
		return nil
	case <-ctx.Done():
		b.mu.Lock()
		select {
		case <-w.ready:
			// Taken meanwhile: give it back, as the caller will not use it.
			b.cur -= n
			b.notifyLocked()
		default:
			front := b.waiters.Front() == elem
			b.waiters.Remove(elem)
			if front {
				b.notifyLocked() // the next waiter may fit now
			}
		}
		b.mu.Unlock()
		return ctx.Err()
	}
}

// tryAcquire takes n bytes if they fit now, without waiting.
func (b *budget) tryAcquire(n int64) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.cur+n <= b.size && b.waiters.Len() == 0 {
		b.cur += n
		return true
	}
	return false
}

// force takes n bytes whether or not they fit.
func (b *budget) force(n int64) {
	b.mu.Lock()
	b.cur += n
	b.mu.Unlock()
}

// release gives back n bytes taken before.
func (b *budget) release(n int64) {
	if n <= 0 {
		return
	}
	b.mu.Lock()
	b.cur -= n
	if b.cur < 0 {
		b.mu.Unlock()
		panic("engine: budget released more than it held")
	}
	b.notifyLocked()
	b.mu.Unlock()
}

func (b *budget) notifyLocked() {
	for {
		next := b.waiters.Front()
		if next == nil {
			return
		}
		w := next.Value.(*budgetWaiter)
		if b.cur+w.n > b.size {
			return // first come first served: the others wait behind it
		}
		b.cur += w.n
		b.waiters.Remove(next)
		close(w.ready)
	}
}
