package engine

import (
	"time"

	"github.com/protobase/protobase/internal/query"
)

// Observer receives the timings that latency histograms are built from.
// The engine calls it once per write batch, per durability point, per
// Search run, per Get and per watch response: never per record. Its
// methods must be cheap and safe for concurrent use.
type Observer interface {
	// WriteDurable reports a batch made durable: total runs from Apply's
	// start to the batch being known durable; apply is Apply's own time
	// less commitWait, the wait for the commit lock behind other
	// streams' batches; fsync runs from the batch's apply to it being
	// known durable (a stream that sends its next batch at once learns
	// it when it next waits).
	WriteDurable(total, apply, commitWait, fsync time.Duration)
	// GroupCommit reports the batches, and their records, that one
	// wait for the write-ahead log's fsync found made durable together
	// with the batch it waited for.
	GroupCommit(batches, records uint64)
	// Search reports queries of one Search request that ran together
	// with the access path access, each answered took after the run
	// started: a request's primary-key lookups run as one, any other
	// query alone.
	Search(access string, queries int, took time.Duration)
	// Get reports one Get request.
	Get(took time.Duration)
	// WatchSent reports a watch response sent lag after the commit of
	// the newest change it carries.
	WatchSent(lag time.Duration)
}

// timed reports whether a Search run takes the time: for the slow-query
// log or for the Observer.
func (e *Engine) timed() bool { return e.opts.SlowQuery > 0 || e.opts.Observer != nil }

// observeSearch reports n queries of access path a that ran from start
// (zero when the run was not timed).
func (e *Engine) observeSearch(a query.Access, n int, start time.Time) {
	if obs := e.opts.Observer; obs != nil && !start.IsZero() {
		obs.Search(a.String(), n, time.Since(start))
	}
}

// observeGet reports a Get that started at start.
func observeGet(obs Observer, start time.Time) { obs.Get(time.Since(start)) }
