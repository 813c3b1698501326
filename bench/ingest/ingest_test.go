package ingest

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/protobase/protobase/bench"
	"github.com/protobase/protobase/bench/labtest"
	"github.com/protobase/protobase/client"
	pb "github.com/protobase/protobase/gen/protobase/v1"
	"github.com/protobase/protobase/internal/store/etcd/etcdtest"
	"github.com/protobase/protobase/server"
)

// The quick run measures every configuration on a syncing and a
// non-syncing server, each server applied exactly the records and batches
// the client sent and stores them all, and the MB/s rows are the
// records/s rows times the size of a record.
func TestQuickRunMatchesServerCounters(t *testing.T) {
	if testing.Short() {
		t.Skip("starts servers and measures")
	}
	g := &Experiment{Batches: []int{1, 100}}
	res, env := labtest.Run(t, g)
	labtest.CheckResult(t, g, res)

	rates, mbs := labtest.Rows(res, "records/s"), labtest.Rows(res, "MB/s")
	// An item's size depends on its id: its name holds id%100000, one to
	// five digits. The runs' ids lie within a few 100,000 of the last, so
	// a run's mean size lies between the sizes of names of one digit and
	// of five.
	last := g.nextID.Load()
	minBytes := float64(len(bench.AppendItem(nil, last-last%100000)))
	maxBytes := float64(len(bench.AppendItem(nil, last-last%100000+99999)))
	for _, sync := range []string{"on", "off"} {
		for _, indexes := range []int{0, 2} {
			for _, batch := range g.Batches {
				name := fmt.Sprintf("indexes=%d sync=%s batch=%d", indexes, sync, batch)
				rate, ok1 := rates[name]
				mb, ok2 := mbs[name]
				if !ok1 || !ok2 {
					t.Errorf("no records/s or MB/s row %q", name)
					continue
				}
				if per := mb.Median * 1e6 / rate.Median; per < minBytes-0.5 || per > maxBytes+0.5 {
					t.Errorf("%s: %.1f bytes per record, want %.0f to %.0f", name, per, minBytes, maxBytes)
				}
			}
		}
	}

	tgs := env.Targets()
	if len(tgs) != 2 || !tgs[0].Sync || tgs[1].Sync {
		t.Fatalf("want a syncing and a non-syncing server, got %d servers", len(tgs))
	}
	ctx := t.Context()
	for _, tg := range tgs {
		w := g.written[tg]
		st := labtest.Stats(t, tg)
		if w == nil || w.Records == 0 || st.Records != w.Records || st.Batches != w.Batches || st.WriteErrors != 0 {
			t.Fatalf("sync=%v: client sent %+v; server applied %d records in %d batches (%d errors)", tg.Sync, w, st.Records, st.Batches, st.WriteErrors)
		}
		var stored uint64
		for _, typ := range []string{bench.ItemType, bench.IndexedItemType} {
			sc := tg.Client.Scan(ctx, &pb.Query{Type: typ, Count: true}, client.ScanOptions{})
			for sc.Next() {
			}
			if err := sc.Err(); err != nil || sc.Count() == 0 {
				t.Fatalf("sync=%v: %d %s stored (%v)", tg.Sync, sc.Count(), typ, err)
			}
			stored += sc.Count()
		}
		if stored != w.Records {
			t.Fatalf("sync=%v: %d records stored, %d inserted", tg.Sync, stored, w.Records)
		}
	}
}

// With Options.Etcd the same run also measures a server on etcd: its rows
// are there, it applied exactly what the client sent, and its store is
// dropped when the run ends.
func TestQuickRunOnEtcd(t *testing.T) {
	if testing.Short() {
		t.Skip("starts servers, an etcd member, and measures")
	}
	opts := labtest.Options()
	opts.Etcd = server.EtcdConfig{Endpoints: []string{etcdtest.Start(t, etcdtest.Roomy)}, Prefix: "/lab-test/"}
	env := labtest.Env(t, opts)
	g := &Experiment{Batches: []int{100}}
	res, err := env.Run(t.Context(), g)
	if err != nil {
		t.Fatal(err)
	}
	labtest.CheckResult(t, g, res)
	rates := labtest.Rows(res, "records/s")
	for _, name := range []string{"indexes=0 store=etcd batch=100", "indexes=2 store=etcd batch=100", "indexes=0 sync=on batch=100",
		"bare etcd batch=100", "indexes=0 store=etcd servers=2 batch=100", "bare etcd clients=2 batch=100"} {
		if _, ok := rates[name]; !ok {
			t.Errorf("no row %q", name)
		}
	}
	if !slices.ContainsFunc(res.Notes, func(n string) bool { return strings.HasPrefix(n, "batch=100, indexes=0: the server on etcd ") }) {
		t.Errorf("no note of the ratios to the bare etcd client in %q", res.Notes)
	}
	tgs := env.Targets()
	if len(tgs) != 4 || tgs[2].Store != server.StoreEtcd || tgs[3].Store != server.StoreEtcd {
		t.Fatalf("want two Pebble servers and two on etcd, got %d", len(tgs))
	}
	for _, tg := range tgs[2:] {
		w, st := g.written[tg], labtest.Stats(t, tg)
		if w == nil || w.Records == 0 || st.Records != w.Records || st.WriteErrors != 0 {
			t.Fatalf("etcd: client sent %+v; server applied %d records (%d errors)", w, st.Records, st.WriteErrors)
		}
	}
	tg := tgs[2]
	if err := env.Close(); err != nil {
		t.Fatal(err)
	}
	labtest.EtcdEmpty(t, opts.Etcd, "/lab-test/")
	// Dropped: a server on the measured store's prefix finds no schema.
	if tg.Etcd == nil || !strings.HasPrefix(tg.Etcd.Prefix, "/lab-test/") || len(tg.Etcd.Prefix) <= len("/lab-test/") {
		t.Fatalf("etcd store %+v, want a fresh prefix below /lab-test/", tg.Etcd)
	}
	srv, err := server.Start(t.Context(), server.Config{DataDir: t.TempDir(), GRPCAddr: "127.0.0.1:0", Store: server.StoreEtcd, Etcd: *tg.Etcd})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Stop()
	c, err := client.Dial(srv.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	sc, err := c.GetSchema(t.Context())
	if err != nil || len(sc.Files) != 0 {
		t.Fatalf("after the run, the lab prefix holds a schema: %v %v", sc.GetFiles(), err)
	}
}
