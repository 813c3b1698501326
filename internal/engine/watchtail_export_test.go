package engine

// WatchTailReads returns how many log entries watches read from the
// log's tail (hits) and how many times they found it without the commit
// they needed (misses), and the bytes it holds.
func (e *Engine) WatchTailReads() (hits, misses uint64, bytes int) {
	e.tail.mu.Lock()
	defer e.tail.mu.Unlock()
	return e.tail.hits, e.tail.misses, e.tail.bytes
}
