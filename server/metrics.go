package server

import (
	"math"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/protobase/protobase/internal/engine"
	"github.com/protobase/protobase/internal/store/etcd"
	"github.com/protobase/protobase/internal/store/pebble"
	natstransport "github.com/protobase/protobase/internal/transport/nats"
)

// metrics is what the server exports at /metrics; docs/operations.md lists
// every series and what a high value means. The latency histograms exist
// before the engine opens (the engine reports into them); the rest reads
// the engine's and the store's counters at scrape time.
type metrics struct {
	reg     *prometheus.Registry
	grpc    *grpcMetrics
	queries *prometheus.HistogramVec
	// queryObs are queries' series by call and access path, looked up
	// once: a label lookup hashes both labels under the vector's lock,
	// on every Query page.
	queryObs map[queryLabels]prometheus.Observer
	latency  *latency
}

// queryLabels are the labels of a protobase_query_duration_seconds series.
type queryLabels struct{ call, access string }

// latencyBuckets span a point read (tens of µs) to a long scan (a minute).
var latencyBuckets = []float64{0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60}

func newMetrics() *metrics {
	m := &metrics{
		reg:  prometheus.NewRegistry(),
		grpc: newGRPCMetrics(latencyBuckets),
		queries: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "protobase_query_duration_seconds",
			Help:    "Time to run a Scan or one Query page, by call and plan access path (pk_point, pk_range, index_range, full_scan).",
			Buckets: latencyBuckets,
		}, []string{"call", "access"}),
		latency:  newLatency(),
		queryObs: map[queryLabels]prometheus.Observer{},
	}
	// Each query histogram a Scan or Query may feed is served from
	// start-up, at zero, so that an alert's series exists before the
	// first query.
	for _, call := range []string{"Scan", "Query"} {
		for _, a := range searchAccess {
			m.queryObs[queryLabels{call, a.String()}] = m.queries.WithLabelValues(call, a.String())
		}
	}
	return m
}

// observeQuery is engine.Options.ObserveQuery.
func (m *metrics) observeQuery(call, access string, took time.Duration) {
	o, ok := m.queryObs[queryLabels{call, access}]
	if !ok {
		o = m.queries.WithLabelValues(call, access)
	}
	o.Observe(took.Seconds())
}

// register adds every series; the storage figures only for a backend
// that has them (Pebble).
func (m *metrics) register(eng *engine.Engine, st any) {
	m.reg.MustRegister(m.grpc.collectors()...)
	m.reg.MustRegister(m.queries, collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m.reg.MustRegister(m.latency.collectors()...)
	registerEngineMetrics(m.reg, eng)
	if sm, ok := st.(interface{ Metrics() pebble.Metrics }); ok {
		m.reg.MustRegister(storageCollector{sm})
	}
	if sf, ok := st.(interface{ Faults() (uint64, uint64) }); ok {
		registerStoreFaults(m.reg, sf.Faults)
	}
	if sr, ok := st.(interface{ RetryStats() etcd.RetryStats }); ok {
		registerStoreRetries(m.reg, sr.RetryStats)
	}
}

// registerStoreRetries exports how often a shared store (etcd) sent a
// request again, and how the commits of unknown outcome were settled.
func registerStoreRetries(reg *prometheus.Registry, stats func() etcd.RetryStats) {
	outcome := func(label string, v func(etcd.RetryStats) uint64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "protobase_store_ambiguous_commits_total",
			Help:        "Write batches whose commit went unanswered and that the commit marker then settled: applied (acknowledged at the revision that applied it) or not_applied (sent again and applied once).",
			ConstLabels: prometheus.Labels{"outcome": label}},
			func() float64 { return float64(v(stats())) })
	}
	reg.MustRegister(
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "protobase_store_retries_total",
			Help: "Store requests sent again because etcd did not serve an attempt (no leader, a member lost, no answer), within --etcd-retry-timeout."},
			func() float64 { return float64(stats().Retries) }),
		outcome("applied", func(r etcd.RetryStats) uint64 { return r.AmbiguousApplied }),
		outcome("not_applied", func(r etcd.RetryStats) uint64 { return r.AmbiguousResent }),
	)
}

// registerStoreFaults exports the counts of requests a shared store
// (etcd) did not serve.
func registerStoreFaults(reg *prometheus.Registry, faults func() (unavailable, outcomeUnknown uint64)) {
	reg.MustRegister(
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "protobase_store_unavailable_total",
			Help: "Attempts of store requests (reads, and write batches never sent or refused unapplied) that failed because etcd could not be reached or did not answer: nothing was applied. Each is attempted again until --etcd-retry-timeout; then clients see UNAVAILABLE."},
			func() float64 { u, _ := faults(); return float64(u) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "protobase_store_outcome_unknown_total",
			Help: "Attempts of write batches sent to etcd that got no answer: each may have been applied. The commit marker settles them when etcd answers again; past --etcd-retry-timeout clients see DEADLINE_EXCEEDED."},
			func() float64 { _, k := faults(); return float64(k) }),
	)
}

func registerEngineMetrics(reg *prometheus.Registry, eng *engine.Engine) {
	st := eng.Stats()
	counter := func(name, help string, v func() uint64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help}, func() float64 { return float64(v()) })
	}
	reg.MustRegister(
		counter("protobase_write_batches_total", "Write batches applied.", st.Batches.Load),
		counter("protobase_write_records_total", "Records written (inserted, updated, upserted or removed).", st.Records.Load),
		counter("protobase_write_errors_total", "Write batches refused.", st.WriteErrors.Load),
		counter("protobase_queries_total", "Queries run (Search, Scan, Query).", st.Queries.Load),
		counter("protobase_query_errors_total", "Queries refused or failed.", st.QueryErrors.Load),
		counter("protobase_point_lookups_total", "Primary-key point reads made by queries.", st.PointLookups.Load),
		counter("protobase_records_read_total", "Records read from storage by queries.", st.RecordsRead.Load),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "protobase_index_builds", Help: "Indexes being built in the background."},
			func() float64 { return float64(eng.IndexBuilds()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "protobase_watches", Help: "Watch calls running."},
			func() float64 { return float64(st.Watches.Load()) }),
		counter("protobase_watch_changes_total", "Changes sent to watchers.", st.WatchChanges.Load),
		expiryCollector{eng},
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "protobase_ttl_reaper_lag_seconds",
			Help: "Seconds since the oldest expiry whose record the reaper has not deleted yet passed (0: none waits)."},
			func() float64 {
				lag, err := eng.ReaperLag()
				if err != nil {
					return math.NaN()
				}
				return lag.Seconds()
			}),
	)
	for op := engine.OpInsert; op <= engine.OpPatch; op++ {
		labels := prometheus.Labels{"op": op.String()}
		reg.MustRegister(
			prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "protobase_write_op_batches_total", Help: "Write batches applied, by operation.", ConstLabels: labels},
				func() float64 { return float64(st.OpBatches[op].Load()) }),
			prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "protobase_write_op_records_total", Help: "Records written, by operation.", ConstLabels: labels},
				func() float64 { return float64(st.OpRecords[op].Load()) }),
		)
	}
}

// registerBackupMetrics exports the backups being taken (Backup calls
// copying the store), which the web console's health page shows.
func registerBackupMetrics(reg *prometheus.Registry, running func() int64) {
	reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "protobase_backups_in_progress",
		Help: "Backups being taken: Backup calls copying the store."}, func() float64 { return float64(running()) }))
}

// registerNATSMetrics exports the NATS service's counters (a server with
// NATS on registers them at start-up, before the service runs).
func registerNATSMetrics(reg *prometheus.Registry, st *natstransport.Stats) {
	counter := func(name, help string, labels prometheus.Labels, v func() uint64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help, ConstLabels: labels}, func() float64 { return float64(v()) })
	}
	for _, why := range natstransport.DropReasons {
		reg.MustRegister(counter("protobase_nats_requests_dropped_total",
			"NATS requests dropped unanswered for their reply subject: none (no_reply), no Authorization header to find the caller's inbox by (no_key), outside the caller's inbox (outside_inbox), or an API or $-reserved subject (reserved).",
			prometheus.Labels{"reason": why.String()}, func() uint64 { return st.Dropped(why) }))
	}
	reg.MustRegister(
		counter("protobase_nats_service_disconnects_total", "Times the NATS service's own connection was lost (it reconnects by itself).", nil, st.Disconnects),
		counter("protobase_nats_service_reconnects_total", "Times the NATS service's own connection came back.", nil, st.Reconnects),
		counter("protobase_nats_pending_overflows_total", "Times a NATS endpoint's subscription reached its pending limits and NATS began dropping its requests.", nil, st.PendingOverflows),
		counter("protobase_nats_rate_refused_total", "NATS requests refused because their key sent faster than --nats-key-bytes-per-second.", nil, st.RateRefused),
		counter("protobase_nats_floods_total", "Times a key over its NATS byte rate had its connections to the embedded NATS server closed (at most once a second per key).", nil, st.Floods),
	)
}

// storageCollector exports the store's figures, read once per scrape.
type storageCollector struct {
	st interface{ Metrics() pebble.Metrics }
}

var storageDescs = struct {
	disk, tables, tableBytes, l0Tables, l0Sublevels, readAmp, memBytes, memTables, walBytes, walFiles,
	cacheBytes, cacheHits, cacheMisses, filterHits, flushes, compactions, debt, stalls, stallTime,
	diskFull, diskFullRefused *prometheus.Desc
}{
	disk:        desc("protobase_storage_disk_bytes", "Bytes on disk: tables, WAL, manifests and files not yet deleted."),
	tables:      desc("protobase_storage_tables", "Live storage tables (all levels)."),
	tableBytes:  desc("protobase_storage_table_bytes", "Bytes of live storage tables (all levels)."),
	l0Tables:    desc("protobase_storage_l0_tables", "Tables in level 0; growing means compactions fall behind ingest."),
	l0Sublevels: desc("protobase_storage_l0_sublevels", "Level 0's read amplification; writes stall as it nears 20 and stop at 36."),
	readAmp:     desc("protobase_storage_read_amplification", "Table layers a point read may consult."),
	memBytes:    desc("protobase_storage_memtable_bytes", "Memory of memtables, active and queued for flush."),
	memTables:   desc("protobase_storage_memtables", "Memtables, active and queued for flush."),
	walBytes:    desc("protobase_storage_wal_bytes", "Bytes of write-ahead log files as the storage engine counts them (the file being written counts once it is rotated)."),
	walFiles:    desc("protobase_storage_wal_files", "Live write-ahead log files."),
	cacheBytes:  desc("protobase_storage_block_cache_bytes", "Bytes in the block cache."),
	cacheHits:   desc("protobase_storage_block_cache_hits_total", "Block cache hits."),
	cacheMisses: desc("protobase_storage_block_cache_misses_total", "Block cache misses: reads from disk or page cache."),
	filterHits:  desc("protobase_storage_bloom_filter_hits_total", "Table reads avoided by bloom filters."),
	flushes:     desc("protobase_storage_flushes_total", "Memtable flushes."),
	compactions: desc("protobase_storage_compactions_total", "Compactions."),
	debt:        desc("protobase_storage_compaction_debt_bytes", "Bytes compactions must still rewrite."),
	stalls:      desc("protobase_storage_write_stalls_total", "Write stalls (memtables or level 0 full)."),
	stallTime:   desc("protobase_storage_write_stall_seconds_total", "Time writes spent stalled."),
	diskFull:    desc("protobase_storage_disk_full", "1 while the disk holding the data directory is full and writes are refused (RESOURCE_EXHAUSTED), else 0."),
	diskFullRefused: desc("protobase_storage_disk_full_refused_total",
		"Write batches refused because the disk holding the data directory was full."),
}

func desc(name, help string) *prometheus.Desc { return prometheus.NewDesc(name, help, nil, nil) }

func (c storageCollector) Describe(ch chan<- *prometheus.Desc) {
	d := storageDescs
	for _, x := range []*prometheus.Desc{d.disk, d.tables, d.tableBytes, d.l0Tables, d.l0Sublevels, d.readAmp, d.memBytes, d.memTables,
		d.walBytes, d.walFiles, d.cacheBytes, d.cacheHits, d.cacheMisses, d.filterHits, d.flushes, d.compactions, d.debt, d.stalls, d.stallTime,
		d.diskFull, d.diskFullRefused} {
		ch <- x
	}
}

func (c storageCollector) Collect(ch chan<- prometheus.Metric) {
	m := c.st.Metrics()
	d := storageDescs
	gauge := func(dd *prometheus.Desc, v float64) {
		ch <- prometheus.MustNewConstMetric(dd, prometheus.GaugeValue, v)
	}
	count := func(dd *prometheus.Desc, v float64) {
		ch <- prometheus.MustNewConstMetric(dd, prometheus.CounterValue, v)
	}
	gauge(d.disk, float64(m.DiskBytes))
	gauge(d.tables, float64(m.Tables))
	gauge(d.tableBytes, float64(m.TableBytes))
	gauge(d.l0Tables, float64(m.L0Tables))
	gauge(d.l0Sublevels, float64(m.L0Sublevels))
	gauge(d.readAmp, float64(m.ReadAmp))
	gauge(d.memBytes, float64(m.MemTableBytes))
	gauge(d.memTables, float64(m.MemTables))
	gauge(d.walBytes, float64(m.WALBytes))
	gauge(d.walFiles, float64(m.WALFiles))
	gauge(d.cacheBytes, float64(m.BlockCacheBytes))
	count(d.cacheHits, float64(m.BlockCacheHits))
	count(d.cacheMisses, float64(m.BlockCacheMisses))
	count(d.filterHits, float64(m.FilterHits))
	count(d.flushes, float64(m.Flushes))
	count(d.compactions, float64(m.Compactions))
	gauge(d.debt, float64(m.CompactionDebtBytes))
	count(d.stalls, float64(m.WriteStalls))
	count(d.stallTime, m.WriteStallTime.Seconds())
	full := 0.0
	if m.DiskFull {
		full = 1
	}
	gauge(d.diskFull, full)
	count(d.diskFullRefused, float64(m.DiskFullRefused))
}

// expiryCollector exports the expired records deleted, per type with a
// ttl option: each such type has its series from start-up, at 0.
type expiryCollector struct{ eng *engine.Engine }

var expiredDesc = prometheus.NewDesc("protobase_records_expired_total",
	"Records deleted because their ttl expiry passed (by the reaper, or before a write replaced them), by type.", []string{"type"}, nil)

func (c expiryCollector) Describe(ch chan<- *prometheus.Desc) { ch <- expiredDesc }

func (c expiryCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.eng.Stats()
	for name, t := range c.eng.Schema().Types {
		if t.TTL != nil {
			ch <- prometheus.MustNewConstMetric(expiredDesc, prometheus.CounterValue, float64(st.Expired(string(name))), string(name))
		}
	}
}
