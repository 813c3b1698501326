package batching

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/protobase/protobase/bench"
	"github.com/protobase/protobase/bench/labtest"
	"github.com/protobase/protobase/internal/store/etcd/etcdtest"
	"github.com/protobase/protobase/server"
)

// The quick run measures every configuration, and its lookup rows are
// real lookups: the server made exactly one point lookup, and ran one
// query, per lookup query the client had answered, read one record for
// each, and counted none of the transport rows' echoes. Every record was
// read once before the runs.
func TestQuickRunLooksUpEveryQuery(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a server and measures")
	}
	b := &Experiment{Records: 2000, Batches: []int{1, 1000}}
	res, env := labtest.Run(t, b)
	labtest.CheckResult(t, b, res)
	rows := labtest.Rows(res, "queries/s")
	for _, mode := range []string{"lookup", "transport", "raw"} {
		for _, batch := range b.Batches {
			if _, ok := rows[fmt.Sprintf("%s batch=%d", mode, batch)]; !ok {
				t.Errorf("no row for %s batch=%d in %v", mode, batch, rows)
			}
		}
	}
	st := labtest.Stats(t, env.Targets()[0])
	if b.ctr.Queries == 0 || b.echoes.Queries == 0 || b.raws.Queries == 0 {
		t.Fatalf("client had %d lookups, %d echoes and %d raw echoes answered", b.ctr.Queries, b.echoes.Queries, b.raws.Queries)
	}
	if st.PointLookups != b.ctr.Queries || st.Queries != b.ctr.Queries || st.RecordsRead != b.ctr.Queries || st.QueryErrors != 0 {
		t.Fatalf("client had %d lookups answered; server made %d point lookups for %d queries (%d errors) reading %d records",
			b.ctr.Queries, st.PointLookups, st.Queries, st.QueryErrors, st.RecordsRead)
	}
	if st.Records != uint64(b.Records) {
		t.Fatalf("server wrote %d records, %d loaded", st.Records, b.Records)
	}
	// Every record was read once before the runs, and the notes say so.
	if b.warmed < b.Records {
		t.Errorf("%d records read before the runs, %d loaded", b.warmed, b.Records)
	}
	if !slices.ContainsFunc(res.Notes, func(n string) bool { return strings.Contains(n, "every record was read once") }) {
		t.Errorf("no note on the records read before the runs in %q", res.Notes)
	}
	// The embedded server's store was compacted after the load, and the
	// notes say so.
	if !slices.ContainsFunc(res.Notes, func(n string) bool { return strings.Contains(n, "compacted after loading") }) {
		t.Errorf("no note on the compaction after loading in %q", res.Notes)
	}
}

// With Options.Etcd the same run adds "lookup etcd" rows from a server on
// etcd, which made one point lookup per lookup query answered (Run checks
// the count; here, that the rows and the server are there), and beside
// each the rows of a bare etcd client, of two servers and of two bare
// clients, with a note of their ratios; the bare clients' prefixes are
// dropped at the end.
func TestQuickRunOnEtcd(t *testing.T) {
	if testing.Short() {
		t.Skip("starts servers, an etcd member, and measures")
	}
	opts := labtest.Options()
	opts.Etcd = server.EtcdConfig{Endpoints: []string{etcdtest.Start(t, etcdtest.Roomy)}}
	env := labtest.Env(t, opts)
	b := &Experiment{Records: 500, Batches: []int{1, 100}}
	res, err := env.Run(t.Context(), b)
	if err != nil {
		t.Fatal(err)
	}
	labtest.CheckResult(t, b, res)
	rows := labtest.Rows(res, "queries/s")
	for _, batch := range b.Batches {
		for _, mode := range []string{"lookup etcd", "bare etcd", "lookup etcd servers=2", "bare etcd clients=2"} {
			if _, ok := rows[fmt.Sprintf("%s batch=%d", mode, batch)]; !ok {
				t.Errorf("no row for %s batch=%d in %v", mode, batch, rows)
			}
		}
		note := fmt.Sprintf("batch=%d: lookups through the server on etcd ", batch)
		if !slices.ContainsFunc(res.Notes, func(n string) bool { return strings.HasPrefix(n, note) }) {
			t.Errorf("no note %q in %q", note, res.Notes)
		}
	}
	tgs := env.Targets()
	if len(tgs) != 3 || tgs[1].Store != server.StoreEtcd || tgs[2].Etcd.Prefix != tgs[1].Etcd.Prefix || b.etcdCtr.Queries == 0 || b.peerCtr.Queries == 0 {
		t.Fatalf("want a Pebble server and two on one etcd store that answered lookups; %d servers, %d and %d queries",
			len(tgs), b.etcdCtr.Queries, b.peerCtr.Queries)
	}
	if err := env.Close(); err != nil {
		t.Fatal(err)
	}
	labtest.EtcdEmpty(t, opts.Etcd, bench.EtcdBenchPrefix)
}
