package watch

import pb "github.com/protobase/protobase/gen/protobase/v1"

// HoldShare counts a watcher of req in, as if one were running, so that
// the next watcher of req fills the shared entries; the returned func
// counts it out.
func (s *Service) HoldShare(req *pb.WatchRequest) func() {
	key := shareKeyOf(req, s.src.Schema().Version)
	s.share.join(key)
	return func() { s.share.leave(key) }
}

// SharedEntries returns how many shared entries the service keeps.
func (s *Service) SharedEntries() int {
	s.share.mu.Lock()
	defer s.share.mu.Unlock()
	return len(s.share.mu.entries)
}
