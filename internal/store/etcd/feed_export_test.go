package etcd

// FeedWatches returns the number of etcd watches Changes calls have opened.
func FeedWatches() int64 { return feedWatches.Load() }

// SetMarkerOff turns the commit marker off (true) or on for the tests
// that show what it prevents: a commit of unknown outcome is then sent
// again as if it had not applied.
func SetMarkerOff(off bool) { markerOff.Store(off) }
