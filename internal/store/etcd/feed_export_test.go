package etcd

// FeedWatches returns the number of etcd watches Changes calls have opened.
func FeedWatches() int64 { return feedWatches.Load() }

// FeedProgress returns the highest revision a progress notification moved
// a Changes call to.
func FeedProgress() int64 { return feedProgress.Load() }
