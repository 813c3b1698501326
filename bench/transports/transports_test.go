package transports

import (
	"bufio"
	"errors"
	"io"
	"math"
	"net/http"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/protobase/protobase/bench"
	"github.com/protobase/protobase/bench/labtest"
)

// The wrk parser reads a report with --latency, errors and all (golden
// sample), and the seed's own report without it.
func TestParseWRK(t *testing.T) {
	out, err := os.ReadFile("testdata/wrk_latency.txt")
	if err != nil {
		t.Fatal(err)
	}
	got, err := parseWRK(out)
	if err != nil {
		t.Fatal(err)
	}
	want := wrkResult{
		requests: 76397, elapsed: 10100 * time.Millisecond, bytesRead: 26.67 * (1 << 20),
		reqPerSec: 7562.07, transferPerSec: 2.64 * (1 << 20),
		avg: 1340 * time.Microsecond, max: 36120 * time.Microsecond,
		p50: 1210 * time.Microsecond, p99: 3070 * time.Microsecond,
		non2xx: 5, socketErrors: 3, threads: 2, connects: 10,
	}
	if *got != want {
		t.Errorf("got  %+v\nwant %+v", *got, want)
	}

	out, err = os.ReadFile("testdata/wrk_seed_nats.txt")
	if err != nil {
		t.Fatal(err)
	}
	if got, err = parseWRK(out); err != nil {
		t.Fatal(err)
	}
	if got.requests != 16351 || got.avg != 6140*time.Microsecond || got.p50 != 0 || math.Abs(got.transferPerSec-583.90*1024) > 1e-6 {
		t.Errorf("seed report: %+v", *got)
	}

	for _, bad := range []string{
		"",
		"wrk: connection refused\n",
		strings.Replace(string(out), "6.14ms", "6.14ps", 1),
		strings.Replace(string(out), "5.71MB", "5.71", 1),
	} {
		if _, err := parseWRK([]byte(bad)); err == nil {
			t.Errorf("no error for %q", bad)
		}
	}
	if d, err := parseWRKDuration("1.02m"); err != nil || d != 61200*time.Millisecond {
		t.Errorf("1.02m = %v, %v", d, err)
	}
}

// Without wrk on PATH, --driver wrk fails clearly before anything starts.
func TestTransportsWRKMissing(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	x := &Experiment{Driver: "wrk", Connections: 10, Threads: 2}
	_, err := x.Run(t.Context(), labtest.Env(t, labtest.Options()))
	if !errors.Is(err, errNoWrk) {
		t.Fatalf("got %v, want %v", err, errNoWrk)
	}
}

// The load generator's response reader takes what the front sends and
// refuses what would make its counts wrong.
func TestReadResponse(t *testing.T) {
	ok := "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\ncontent-length: 5\r\n\r\nhello"
	n, err := readResponse(bufio.NewReader(strings.NewReader(ok + ok)))
	if err != nil || n != int64(len(ok)) {
		t.Fatalf("read %d bytes, %v; want %d", n, err, len(ok))
	}
	for _, bad := range []string{
		"HTTP/1.1 404 Not Found\r\nContent-Length: 9\r\n\r\nnot found",
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
		"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 1\r\n\r\nx",
		"HTTP/1.1 200 OK\r\n\r\n",
		"HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\nshort",
		"SSH-2.0\r\n\r\n",
	} {
		if _, err := readResponse(bufio.NewReader(strings.NewReader(bad))); err == nil {
			t.Errorf("no error for %q", bad)
		}
	}
	if _, err := readResponse(bufio.NewReader(strings.NewReader("HTTP/1.1 502 Bad Gateway\r\nContent-Length: 4\r\n\r\ngone"))); !errors.Is(err, errStatus) || !strings.Contains(err.Error(), "502: gone") {
		t.Errorf("502: %v", err)
	}
}

// Each mode goes where it claims: a request through the front is one
// point lookup on the direct engine for the direct modes and on the lab
// server for the hops (and none on the other), the REST hop speaks HTTP/2,
// the NATS hop sends NATS messages; and every mode serves the same bytes
// for the same id, and 404 for an id that is not stored.
func TestTransportsModesUseTheirHop(t *testing.T) {
	if testing.Short() {
		t.Skip("starts servers")
	}
	ctx := t.Context()
	env := labtest.Env(t, labtest.Options())
	x := &Experiment{Records: 100, Connections: 10, Threads: 2, Driver: "builtin"}
	if err := x.defaults(true); err != nil {
		t.Fatal(err)
	}
	lab, err := x.setup(ctx, env)
	if err != nil {
		t.Fatal(err)
	}

	var it labItem
	if err := decodeItem(bench.AppendItem(nil, 42), &it); err != nil {
		t.Fatal(err)
	}
	want := string(appendItemJSON(nil, &it))
	if !strings.HasPrefix(want, `{"id":42,"name":"name-42","email":"user42@example.com","created":1700000000042,`) {
		t.Fatalf("front JSON %s", want)
	}
	for _, mode := range allModes {
		t.Run(mode, func(t *testing.T) {
			f, skip, err := lab.newFetcher(mode)
			if err != nil || skip != "" {
				t.Fatal(err, skip)
			}
			fr, err := startFront(f)
			if err != nil {
				t.Fatal(err)
			}
			defer func() {
				if err := fr.close(); err != nil {
					t.Error(err)
				}
			}()
			hop0, direct0 := labtest.Stats(t, lab.hop).PointLookups, labtest.Stats(t, lab.direct).PointLookups
			if got := getBody(t, "http://"+fr.addr()+"/records/42", http.StatusOK); got != want {
				t.Errorf("body %s, want %s", got, want)
			}
			getBody(t, "http://"+fr.addr()+"/records/100000", http.StatusNotFound)
			hop, direct := labtest.Stats(t, lab.hop).PointLookups-hop0, labtest.Stats(t, lab.direct).PointLookups-direct0
			if isDirect(mode) && (direct != 2 || hop != 0) || !isDirect(mode) && (hop != 2 || direct != 0) {
				t.Errorf("point lookups: %d on the lab server, %d on the direct engine", hop, direct)
			}
			switch f := f.(type) {
			case *restFetcher:
				if f.h2.Load() != 2 {
					t.Errorf("%d of 2 REST answers came over HTTP/2", f.h2.Load())
				}
			case *natsFetcher:
				if st := f.nc.Stats(); st.OutMsgs != 2 || st.InMsgs != 2 {
					t.Errorf("NATS connection sent %d and received %d messages, want 2 and 2", st.OutMsgs, st.InMsgs)
				}
			}
		})
	}
}

func getBody(t *testing.T, url string, status int) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != status {
		t.Fatalf("GET %s: %s: %s", url, resp.Status, b)
	}
	return string(b)
}

// A run gives, per mode, requests/s beside the seed's, four latency rows
// and transfer, plus each hop's share of its no-hop baseline; and every
// request the load completed was one point lookup on the server the mode
// claims to use: the lab server for the hops, the direct engine for the
// no-hop modes.
func TestQuickRunMatchesServerCounters(t *testing.T) {
	if testing.Short() {
		t.Skip("starts servers and measures")
	}
	x := &Experiment{Records: 200, Connections: 4, Threads: 2, Driver: "builtin", Modes: []string{modeNATS, modeDirectGet, modeGRPC}}
	res, env := labtest.Run(t, x)
	labtest.CheckResult(t, x, res)
	var names []string
	for _, r := range res.Rows {
		names = append(names, r.Name)
		if (r.Unit == "req/s") != (r.Params["metric"] == "requests/s") || r.Unit == "req/s" && r.Reference == nil {
			t.Errorf("row %+v", r)
		}
	}
	var wantNames []string
	for _, mode := range []string{modeDirectGet, modeGRPC, modeNATS} {
		for _, metric := range []string{"requests/s", "latency avg", "latency p50", "latency p99", "latency max", "transfer/s"} {
			wantNames = append(wantNames, mode+" "+metric)
		}
		if mode == modeNATS { // grpc's baseline, direct, did not run
			wantNames = append(wantNames, mode+" share of "+baseline(mode))
		}
	}
	if !slices.Equal(names, wantNames) {
		t.Errorf("rows %q\nwant %q", names, wantNames)
	}
	tgs := env.Targets()
	if len(tgs) != 2 || !tgs[0].Embedded || tgs[1].NATSURL != "" {
		t.Fatalf("want the hop server and the direct engine, got %d servers", len(tgs))
	}
	hop, direct := labtest.Stats(t, tgs[0]), labtest.Stats(t, tgs[1])
	hopReqs := uint64(x.requests[modeNATS] + x.requests[modeGRPC])
	directReqs := uint64(x.requests[modeDirectGet])
	if x.requests[modeNATS] == 0 || x.requests[modeGRPC] == 0 || directReqs == 0 {
		t.Fatalf("requests by mode: %v", x.requests)
	}
	if hop.PointLookups != hopReqs || hop.RecordsRead != hopReqs || direct.PointLookups != directReqs || direct.RecordsRead != directReqs {
		t.Fatalf("hop modes completed %d requests, the lab server made %d point lookups reading %d records; direct modes %d, the direct engine %d reading %d",
			hopReqs, hop.PointLookups, hop.RecordsRead, directReqs, direct.PointLookups, direct.RecordsRead)
	}
	if hop.Records != uint64(x.Records) || direct.Records != uint64(x.Records) {
		t.Fatalf("servers wrote %d and %d records, %d loaded in each", hop.Records, direct.Records, x.Records)
	}
}
