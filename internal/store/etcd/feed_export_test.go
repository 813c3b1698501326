package etcd

// FeedWatches returns the number of etcd watches Changes calls have opened.
func FeedWatches() int64 { return feedWatches.Load() }
