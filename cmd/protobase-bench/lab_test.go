package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/protobase/protobase/bench"
	"github.com/protobase/protobase/internal/auth"
	"github.com/protobase/protobase/internal/certs/certstest"
	"github.com/protobase/protobase/internal/exitstatus"
	"github.com/protobase/protobase/server"
)

// Bad command lines are usage errors (exit 2) that say what is wrong,
// and they are refused before anything is measured.
func TestBenchFlagErrors(t *testing.T) {
	dir := t.TempDir()
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"zero runs", []string{"batching", "--runs", "0"}, "runs must be at least 1"},
		{"negative duration", []string{"batching", "--duration", "-1s"}, "duration must be at least 1ms"},
		{"unparsable duration", []string{"batching", "--duration", "fast"}, "invalid argument"},
		{"unknown experiment", []string{"nope"}, `unknown command "nope"`},
		{"unwritable json", []string{"batching", "--json", filepath.Join(dir, "missing", "x.json")}, "--json"},
		{"unknown chart format", []string{"batching", "--chart", filepath.Join(dir, "x.gif")}, "unknown chart format"},
		{"bad batch", []string{"batching", "--quick", "--batches", "0"}, "out of range"},
		{"bad watchers", []string{"watch", "--quick", "--watchers", "1,0"}, "--watchers: 0 is out of range 1..1000"},
		{"bad watch batch", []string{"watch", "--quick", "--batch", "-5"}, "--batch: -5 is out of range 1..100000"},
		{"all without out", []string{"all", "--quick"}, "--out is required"},
		{"unknown store", []string{"ingest", "--store", "tikv"}, `--store "tikv": want pebble or etcd`},
		{"etcd without endpoints", []string{"ingest", "--store", "etcd"}, "needs --etcd-endpoints"},
		{"etcd blank endpoints", []string{"ingest", "--store", "etcd", "--etcd-endpoints", " , "}, "needs --etcd-endpoints"},
		{"endpoints without etcd", []string{"ingest", "--etcd-endpoints", "127.0.0.1:2379"}, "need --store etcd"},
		{"prefix without etcd", []string{"batching", "--etcd-prefix", "/x/"}, "need --store etcd"},
		{"bad endpoint", []string{"ingest", "--store", "etcd", "--etcd-endpoints", "host-without-port"}, "--etcd-endpoints"},
		{"hostile endpoint", []string{"ingest", "--store", "etcd", "--etcd-endpoints", "http://u:p@h:1/x"}, "--etcd-endpoints"},
		{"bad prefix", []string{"ingest", "--store", "etcd", "--etcd-endpoints", "127.0.0.1:2379", "--etcd-prefix", "x"}, "--etcd-prefix"},
		{"etcd with addr", []string{"--addr", "127.0.0.1:1", "ingest", "--store", "etcd", "--etcd-endpoints", "127.0.0.1:2379"}, "--store etcd is for the lab's embedded servers"},
		{"etcd for another experiment", []string{"fetch", "--store", "etcd", "--etcd-endpoints", "127.0.0.1:2379"}, "applies to ingest and batching"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := cli(t, tc.args...)
			if strings.HasPrefix(tc.name, "bad batch") || strings.HasPrefix(tc.name, "bad watch") {
				// Checked by the experiment itself: the operation fails.
				wantCode(t, r, exitstatus.Failed)
			} else {
				wantCode(t, r, exitstatus.Usage)
			}
			wantContains(t, r.stderr, tc.want)
		})
	}
}

// One experiment through the CLI with --json and --chart: the table goes
// to stdout, progress lines to stderr, both files are written, and the
// JSON holds what was measured: a row per mode and batch size with a
// positive rate inside its spread, and the server's point-lookup count
// equal to the lookup queries the client had answered.
func TestBenchBatchingCLI(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a server and measures")
	}
	dir := t.TempDir()
	js, svg := filepath.Join(dir, "b.json"), filepath.Join(dir, "b.svg")
	r := mustCLI(t, "batching", "--quick", "--records", "500", "--batches", "1,100",
		"--runs", "1", "--duration", "20ms", "--warmup", "0s", "--json", js, "--chart", svg)
	// Each batch size runs raw, transport and lookup in turn.
	names := []string{"raw batch=1", "transport batch=1", "lookup batch=1", "raw batch=100", "transport batch=100", "lookup batch=100"}
	wantContains(t, r.stdout, append(names, "queries/s")...)
	wantContains(t, r.stderr, "transport batch=100")
	b, err := os.ReadFile(js)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Experiment string   `json:"experiment"`
		Notes      []string `json:"notes"`
		Rows       []struct {
			Name             string
			Params           map[string]any
			Unit             string
			Median, Min, Max float64
			Runs             int
			Reference        *struct{ Value float64 }
		} `json:"rows"`
	}
	if err := json.Unmarshal(b, &doc); err != nil || doc.Experiment != "batching" || len(doc.Rows) != len(names) {
		t.Fatalf("json: %v %+v", err, doc)
	}
	for i, row := range doc.Rows {
		mode, batch := []string{"raw", "transport", "lookup"}[i%3], 1.0
		if i >= 3 {
			batch = 100
		}
		if row.Name != names[i] || row.Params["mode"] != mode || row.Params["batch"] != batch || row.Unit != "queries/s" ||
			row.Runs != 1 || row.Median <= 0 || row.Min > row.Median || row.Median > row.Max || row.Reference == nil {
			t.Errorf("row %d: %+v", i, row)
		}
	}
	var lookups, queries uint64
	for _, n := range doc.Notes {
		if _, err := fmt.Sscanf(n, "lookup rows: 500 records preloaded; the server made %d point lookups for %d queries answered", &lookups, &queries); err == nil {
			break
		}
	}
	if queries == 0 || lookups != queries {
		t.Fatalf("server made %d point lookups for %d lookup queries answered (notes %q)", lookups, queries, doc.Notes)
	}
	if fi, err := os.Stat(svg); err != nil || fi.Size() == 0 {
		t.Fatalf("chart: %v", err)
	}
}

// The lab against a secured server: TLS and API keys on, reached with
// --tls-ca and --api-key, or with $PROTOBASE_TLS_CA and $PROTOBASE_API_KEY
// as protobase takes them; the transports experiment's REST and NATS hops
// send the key too. Without the key the lab is refused.
func TestBenchSecuredServer(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a server and measures")
	}
	ca := certstest.NewCA(t, "test")
	cert := ca.Server(t, "server")
	admin, err := auth.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	srv, err := server.Start(t.Context(), server.Config{DataDir: t.TempDir(), GRPCAddr: "127.0.0.1:0", NoSync: true, Lab: true,
		Auth: true, AdminKey: admin, TLSCertFile: cert.CertFile, TLSKeyFile: cert.KeyFile,
		HTTPAddr: "127.0.0.1:0", NATS: true, NATSAddr: "127.0.0.1:0", NATSPrefix: bench.LabNATSPrefix})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Stop() })
	quick := []string{"--quick", "--runs", "1", "--duration", "20ms", "--warmup", "0s"}
	batching := append([]string{"batching", "--addr", srv.Addr(), "--tls-ca", ca.File, "--records", "500", "--batches", "1,100"}, quick...)

	r := cli(t, batching...)
	wantCode(t, r, exitstatus.Failed)
	wantContains(t, r.stderr, "Unauthenticated")

	r = mustCLI(t, append(batching, "--api-key", admin)...)
	wantContains(t, r.stdout, "lookup batch=100", "transport batch=100")

	t.Setenv("PROTOBASE_API_KEY", admin)
	t.Setenv("PROTOBASE_TLS_CA", ca.File)
	r = mustCLI(t, append([]string{"transports", "--addr", srv.Addr(), "--modes", "grpc,http2,nats",
		"--records", "200", "--connections", "2", "--http-addr", srv.HTTPAddr(), "--nats-url", srv.NATSURL()}, quick...)...)
	wantContains(t, r.stdout, "grpc", "http2", "nats")
	if strings.Contains(r.stdout, "skipped") {
		t.Fatalf("a mode was skipped:\n%s", r.stdout)
	}
}

// --api-key is for --addr: the embedded lab server has no keys.
func TestBenchAPIKeyNeedsAddr(t *testing.T) {
	r := cli(t, "batching", "--api-key", "pb_x")
	wantCode(t, r, exitstatus.Usage)
	wantContains(t, r.stderr, "--api-key is for a server given with --addr")
}

// all runs every experiment with the defaults its own command shows
// (it takes none of their flags) and writes the report, a JSON file and a
// chart per experiment.
func TestBenchAll(t *testing.T) {
	if testing.Short() {
		t.Skip("starts servers and measures")
	}
	dir := t.TempDir()
	r := mustCLI(t, "all", "--quick", "--runs", "1", "--duration", "20ms", "--warmup", "0s", "--out", dir)
	wantContains(t, r.stdout, "report: ")
	for _, x := range bench.Experiments() {
		for _, ext := range []string{".json", ".png"} {
			if fi, err := os.Stat(filepath.Join(dir, x.Name()+ext)); err != nil || fi.Size() == 0 {
				t.Errorf("%s%s: %v", x.Name(), ext, err)
			}
		}
	}
	md, err := os.ReadFile(filepath.Join(dir, "report.md"))
	if err != nil {
		t.Fatal(err)
	}
	wantContains(t, string(md), "Smoke")
}
