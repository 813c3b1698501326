package engine

import pb "github.com/protobase/protobase/gen/protobase/v1"

// HoldWatchShare counts a watcher of req in, as if one were running, so
// that the next watcher of req fills the shared entries; the returned
// func counts it out.
func (e *Engine) HoldWatchShare(req *pb.WatchRequest) func() {
	key := shareKeyOf(req, e.cat.Load().state.Version)
	e.share.join(key)
	return func() { e.share.leave(key) }
}

// WatchShareEntries returns how many shared entries the engine keeps.
func (e *Engine) WatchShareEntries() int {
	e.share.mu.Lock()
	defer e.share.mu.Unlock()
	return len(e.share.entries)
}
