package server_test

import (
	"context"
	"encoding/json"
	"math"
	"net/http"
	"os"
	"regexp"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"google.golang.org/protobuf/types/known/anypb"

	pb "github.com/protobase/protobase/gen/protobase/v1"
	"github.com/protobase/protobase/server"
)

// After a workload, /metrics carries the latency histograms (per RPC, per
// query call and plan, the write path and group commit, Search per query,
// Get, Watch delivery), each served at zero from start-up and after it
// with sane quantiles, the write counters by operation and the storage
// figures, with values that match what was done.
func TestMetricsAfterWorkload(t *testing.T) {
	ts := startServer(t, server.Config{MetricsAddr: "127.0.0.1:0"})
	url := "http://" + ts.Srv.MetricsAddr() + "/metrics"
	// Every latency histogram is served before anything ran, at zero.
	before := scrape(t, url)
	for _, h := range append(latencyHistograms[:len(latencyHistograms):len(latencyHistograms)],
		latencyHistogram{"protobase_query_duration_seconds", map[string]string{"call": "Scan", "access": "index_range"}, 0}) {
		if v, ok := metricValue(before, h.name, h.labels); !ok || v != 0 {
			t.Errorf("at start-up %s%v: served %v, count %v; want served at 0", h.name, h.labels, ok, v)
		}
	}
	ts.MustApply(map[string]string{"shop.proto": shopProto})
	var batch []*anypb.Any
	for i := range 100 {
		batch = append(batch, ts.Rec("shop.User", `{"id": `+itoa(i+1)+`, "email": "u`+itoa(i)+`"}`))
	}
	ts.MustWrite(insert, batch[:60], batch[60:])
	ts.MustWrite(pb.WriteOp_WRITE_OP_UPSERT, batch[:5])
	ts.MustWrite(pb.WriteOp_WRITE_OP_REMOVE, batch[95:])
	if _, err := ts.C.Query(context.Background(), &pb.Query{Type: "shop.User"}, 10, ""); err != nil {
		t.Fatal(err)
	}
	if n := ts.Count("shop.User"); n != 95 {
		t.Fatalf("%d users, want 95", n)
	}
	ws := ts.watch(&pb.WatchRequest{Types: []string{"shop.User"}, Start: &pb.WatchStart{Start: &pb.WatchStart_Oldest{Oldest: true}}})
	ws.first()
	ws.next(110) // 100 inserts, 5 upserts of existing keys, 5 removes
	searchAndGet(t, ts)

	fams := scrape(t, url)
	for _, c := range []struct {
		name   string
		labels map[string]string
		check  func(float64) bool
		want   string
	}{
		{"protobase_write_op_records_total", map[string]string{"op": "insert"}, eq(100), "100"},
		{"protobase_write_op_batches_total", map[string]string{"op": "insert"}, eq(2), "2"},
		{"protobase_write_op_records_total", map[string]string{"op": "upsert"}, eq(5), "5"},
		{"protobase_write_op_records_total", map[string]string{"op": "remove"}, eq(5), "5"},
		{"protobase_write_op_records_total", map[string]string{"op": "update"}, eq(0), "0"},
		{"protobase_query_duration_seconds", map[string]string{"call": "Query", "access": "full_scan"}, eq(1), "1 observation"},
		{"protobase_query_duration_seconds", map[string]string{"call": "Scan", "access": "full_scan"}, atLeast(1), ">= 1 observation"},
		{"grpc_server_handling_seconds", map[string]string{"grpc_method": "Insert"}, eq(1), "1 observation"},
		{"grpc_server_handling_seconds", map[string]string{"grpc_method": "Query"}, eq(1), "1 observation"},
		{"protobase_storage_disk_bytes", nil, atLeast(1), "> 0"},
		{"protobase_storage_wal_files", nil, atLeast(1), ">= 1"},
		{"protobase_storage_memtable_bytes", nil, atLeast(1), "> 0"},
		{"protobase_storage_write_stalls_total", nil, eq(0), "0"},
		{"protobase_storage_disk_full", nil, eq(0), "0"},
		{"protobase_storage_disk_full_refused_total", nil, eq(0), "0"},
		{"protobase_index_builds", nil, eq(0), "0"},
		{"protobase_backups_in_progress", nil, eq(0), "0"},
		{"protobase_watches", nil, eq(1), "1"},
		{"protobase_watch_changes_total", nil, eq(110), "110"},
	} {
		v, ok := metricValue(fams, c.name, c.labels)
		if !ok {
			t.Errorf("no %s%v", c.name, c.labels)
			continue
		}
		if !c.check(v) {
			t.Errorf("%s%v = %v, want %s", c.name, c.labels, v, c.want)
		}
	}
	for _, h := range latencyHistograms {
		checkQuantiles(t, fams, h)
	}
	checkMetricDocs(t, fams)
}

// latencyHistograms are the histograms of the write path, group commit,
// Search, Get and Watch, with the bound the workload's p99 stays under.
type latencyHistogram struct {
	name   string
	labels map[string]string
	bound  float64
}

var latencyHistograms = []latencyHistogram{
	{"protobase_write_batch_seconds", nil, 30},
	{"protobase_write_apply_seconds", nil, 30},
	{"protobase_write_commit_wait_seconds", nil, 30},
	{"protobase_write_fsync_seconds", nil, 30},
	{"protobase_write_group_commit_batches", nil, 100},
	{"protobase_write_group_commit_records", nil, 10000},
	{"protobase_search_query_seconds", map[string]string{"access": "pk_point"}, 30},
	{"protobase_search_query_seconds", map[string]string{"access": "index_range"}, 30},
	{"protobase_search_query_seconds", map[string]string{"access": "full_scan"}, 30},
	{"protobase_get_seconds", nil, 30},
	{"protobase_watch_lag_seconds", nil, 30},
}

// searchAndGet runs Search queries of three access paths (a request of
// primary-key lookups, an index range, a full scan) and two Gets.
func searchAndGet(t *testing.T, ts *testServer) {
	t.Helper()
	s, err := ts.C.NewSearch(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var qs []*pb.Query
	for i := 1; i <= 20; i++ {
		qs = append(qs, &pb.Query{Type: "shop.User", Where: mustParse(t, "id = "+itoa(i))})
	}
	qs = append(qs, &pb.Query{Type: "shop.User", Where: mustParse(t, `email = "u7"`)},
		&pb.Query{Type: "shop.User", Where: mustParse(t, `email contains "9"`)})
	rs, err := s.Batch(qs)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range rs {
		if _, err := r.All(); err != nil {
			t.Fatalf("query %d: %v", i, err)
		}
	}
	for _, id := range []int{3, 4} {
		if recs, err := ts.C.Get(t.Context(), "shop.User", id); err != nil || len(recs) != 1 {
			t.Fatalf("get %d: %d records, %v", id, len(recs), err)
		}
	}
}

// checkQuantiles checks that histogram h has observations and that its
// p50 and p99, as histogram_quantile reads them from the buckets, are
// ordered, above zero and under h's bound.
func checkQuantiles(t *testing.T, fams map[string]*dto.MetricFamily, h latencyHistogram) {
	t.Helper()
	hist := histogram(fams, h.name, h.labels)
	if hist == nil || hist.GetSampleCount() == 0 {
		t.Errorf("%s%v: no observations after the workload", h.name, h.labels)
		return
	}
	p50, p99 := quantile(hist, 0.5), quantile(hist, 0.99)
	t.Logf("%s%v: %d observations, p50 %.3g, p99 %.3g", h.name, h.labels, hist.GetSampleCount(), p50, p99)
	if !(p50 > 0 && p99 >= p50 && p99 < h.bound) {
		t.Errorf("%s%v: p50 %v, p99 %v over %d observations; want 0 < p50 <= p99 < %v", h.name, h.labels, p50, p99, hist.GetSampleCount(), h.bound)
	}
}

// histogram returns the histogram of name whose labels include labels.
func histogram(fams map[string]*dto.MetricFamily, name string, labels map[string]string) *dto.Histogram {
next:
	for _, m := range fams[name].GetMetric() {
		for k, v := range labels {
			found := false
			for _, lp := range m.GetLabel() {
				found = found || lp.GetName() == k && lp.GetValue() == v
			}
			if !found {
				continue next
			}
		}
		return m.GetHistogram()
	}
	return nil
}

// quantile is PromQL's histogram_quantile: linear within the bucket the
// rank falls in, from 0 for the first.
func quantile(h *dto.Histogram, q float64) float64 {
	rank := q * float64(h.GetSampleCount())
	lower, below := 0.0, 0.0
	for _, b := range h.GetBucket() {
		c := float64(b.GetCumulativeCount())
		if c >= rank {
			if math.IsInf(b.GetUpperBound(), 1) {
				return lower
			}
			return lower + (b.GetUpperBound()-lower)*(rank-below)/(c-below)
		}
		lower, below = b.GetUpperBound(), c
	}
	return lower
}

// checkMetricDocs holds docs/operations.md and the Grafana dashboard to the
// series served: the doc lists every protobase_ and grpc_server_ family,
// and the dashboard queries none that does not exist.
func checkMetricDocs(t *testing.T, fams map[string]*dto.MetricFamily) {
	t.Helper()
	doc, err := os.ReadFile("../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	for name := range fams {
		if !strings.HasPrefix(name, "protobase_") && !strings.HasPrefix(name, "grpc_server_") {
			continue
		}
		short := strings.TrimPrefix(name, "protobase_storage_block_cache")
		if !strings.Contains(string(doc), "`"+name) && !strings.Contains(string(doc), "`..."+short) {
			t.Errorf("docs/operations.md does not list %s", name)
		}
	}
	dash, err := os.ReadFile("../docs/grafana-dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Panels []struct {
			Title   string
			Targets []struct{ Expr string }
		}
	}
	if err := json.Unmarshal(dash, &d); err != nil {
		t.Fatalf("dashboard: %v", err)
	}
	series := regexp.MustCompile(`\b(?:protobase|grpc_server|go|process)_[a-z0-9_]+`)
	for _, p := range d.Panels {
		for _, tg := range p.Targets {
			for _, name := range series.FindAllString(tg.Expr, -1) {
				base := strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(name, "_bucket"), "_count"), "_sum")
				if fams[name] == nil && fams[base] == nil {
					t.Errorf("dashboard panel %q queries %s, which the server does not serve", p.Title, name)
				}
			}
		}
	}
}

func eq(want float64) func(float64) bool      { return func(v float64) bool { return v == want } }
func atLeast(want float64) func(float64) bool { return func(v float64) bool { return v >= want } }

func scrape(t *testing.T, url string) map[string]*dto.MetricFamily {
	t.Helper()
	r, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Body.Close()
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(r.Body)
	if err != nil {
		t.Fatal(err)
	}
	return fams
}

// metricValue returns the value of the series of name whose labels include
// labels: a counter's or gauge's value, a histogram's observation count.
func metricValue(fams map[string]*dto.MetricFamily, name string, labels map[string]string) (float64, bool) {
	fam, ok := fams[name]
	if !ok {
		return 0, false
	}
next:
	for _, m := range fam.GetMetric() {
		have := map[string]string{}
		for _, lp := range m.GetLabel() {
			have[lp.GetName()] = lp.GetValue()
		}
		for k, v := range labels {
			if have[k] != v {
				continue next
			}
		}
		switch {
		case m.Counter != nil:
			return m.GetCounter().GetValue(), true
		case m.Gauge != nil:
			return m.GetGauge().GetValue(), true
		case m.Histogram != nil:
			return float64(m.GetHistogram().GetSampleCount()), true
		}
	}
	return 0, false
}
