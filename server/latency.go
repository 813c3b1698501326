package server

import (
	"math"
	"sort"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/protobase/protobase/internal/query"
)

// latency holds the histograms the engine's Observer feeds: the write
// path split into its parts, group commit, Search per query, Get and
// Watch delivery. Every series exists from start-up, at zero.
type latency struct {
	batch, apply, commitWait, fsync prometheus.Histogram
	groupBatches, groupRecords      prometheus.Histogram
	get, watchLag                   prometheus.Histogram
	search                          map[string]*countHistogram
}

// writeBuckets span a batch acknowledged from the page cache (tens of µs)
// to one stalled behind a slow disk (seconds).
var writeBuckets = []float64{0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10}

// searchAccess are the plan access paths a Search query may take, each
// with its series from start-up.
var searchAccess = []query.Access{query.AccessPKPoint, query.AccessPKRange, query.AccessIndexRange, query.AccessFullScan}

var searchDesc = prometheus.NewDesc("protobase_search_query_seconds",
	"Time to answer one query of a Search stream, by plan access path; a request's primary-key lookups run together and each counts the time of the run.",
	[]string{"access"}, nil)

func newLatency() *latency {
	hist := func(name, help string, buckets []float64) prometheus.Histogram {
		return prometheus.NewHistogram(prometheus.HistogramOpts{Name: name, Help: help, Buckets: buckets})
	}
	write := func(name, help string) prometheus.Histogram { return hist(name, help, writeBuckets) }
	l := &latency{
		batch: write("protobase_write_batch_seconds",
			"Time from a write batch's receipt by the engine to it being durable, when it may be acknowledged: apply, commit wait and fsync."),
		apply: write("protobase_write_apply_seconds",
			"Time a write batch takes to check and apply (visible), less its commit wait."),
		commitWait: write("protobase_write_commit_wait_seconds",
			"Time a write batch waits for the commit lock behind other streams' batches."),
		fsync: write("protobase_write_fsync_seconds",
			"Time from a write batch's apply to it being known durable: the write-ahead log's fsync, and the wait for it."),
		groupBatches: hist("protobase_write_group_commit_batches",
			"Write batches made durable together by one fsync of the write-ahead log.", prometheus.ExponentialBuckets(1, 2, 11)),
		groupRecords: hist("protobase_write_group_commit_records",
			"Records of the write batches made durable together by one fsync of the write-ahead log.", prometheus.ExponentialBuckets(1, 4, 10)),
		get: hist("protobase_get_seconds", "Time to answer one Get request (of one or more keys).", latencyBuckets),
		watchLag: hist("protobase_watch_lag_seconds",
			"Time from a change's commit to the watch response carrying it being sent (the newest change of each response).", writeBuckets),
		search: map[string]*countHistogram{},
	}
	for _, a := range searchAccess {
		l.search[a.String()] = newCountHistogram(latencyBuckets, a.String())
	}
	return l
}

func (l *latency) collectors() []prometheus.Collector {
	return []prometheus.Collector{l.batch, l.apply, l.commitWait, l.fsync, l.groupBatches, l.groupRecords,
		l.get, l.watchLag, searchCollector{l}}
}

// WriteDurable is engine.Observer's.
func (l *latency) WriteDurable(total, apply, commitWait, fsync time.Duration) {
	l.batch.Observe(total.Seconds())
	l.apply.Observe(apply.Seconds())
	l.commitWait.Observe(commitWait.Seconds())
	l.fsync.Observe(fsync.Seconds())
}

// GroupCommit is engine.Observer's.
func (l *latency) GroupCommit(batches, records uint64) {
	l.groupBatches.Observe(float64(batches))
	l.groupRecords.Observe(float64(records))
}

// Search is engine.Observer's.
func (l *latency) Search(access string, queries int, took time.Duration) {
	if h := l.search[access]; h != nil {
		h.observe(took.Seconds(), uint64(queries))
	}
}

// Get is engine.Observer's.
func (l *latency) Get(took time.Duration) { l.get.Observe(took.Seconds()) }

// WatchSent is engine.Observer's.
func (l *latency) WatchSent(lag time.Duration) { l.watchLag.Observe(max(lag, 0).Seconds()) }

// countHistogram is a histogram that takes n observations of one value
// at once: a Search request's lookups cost one update, not one each.
type countHistogram struct {
	access  string
	upper   []float64
	buckets []atomic.Uint64 // per bucket, the last one +Inf
	count   atomic.Uint64
	sumBits atomic.Uint64 // float64 bits of the sum
}

func newCountHistogram(upper []float64, access string) *countHistogram {
	return &countHistogram{access: access, upper: upper, buckets: make([]atomic.Uint64, len(upper)+1)}
}

func (h *countHistogram) observe(v float64, n uint64) {
	h.buckets[sort.SearchFloat64s(h.upper, v)].Add(n)
	for {
		old := h.sumBits.Load()
		if h.sumBits.CompareAndSwap(old, math.Float64bits(math.Float64frombits(old)+v*float64(n))) {
			break
		}
	}
	h.count.Add(n)
}

func (h *countHistogram) metric() prometheus.Metric {
	cum := make(map[float64]uint64, len(h.upper))
	var c uint64
	for i, u := range h.upper {
		c += h.buckets[i].Load()
		cum[u] = c
	}
	count := c + h.buckets[len(h.upper)].Load()
	return prometheus.MustNewConstHistogram(searchDesc, count, math.Float64frombits(h.sumBits.Load()), cum, h.access)
}

// searchCollector serves the Search histograms.
type searchCollector struct{ l *latency }

func (c searchCollector) Describe(ch chan<- *prometheus.Desc) { ch <- searchDesc }

func (c searchCollector) Collect(ch chan<- prometheus.Metric) {
	for _, a := range searchAccess {
		ch <- c.l.search[a.String()].metric()
	}
}
