package oneop

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/protobuf/encoding/protodelim"
	"google.golang.org/protobuf/proto"

	pb "github.com/protobase/protobase/gen/protobase/v1"
	pbgrpc "github.com/protobase/protobase/gen/protobase/v1/protobasev1grpc"

	"github.com/protobase/protobase/bench"
	"github.com/protobase/protobase/bench/labtest"
)

// The quick run measures every row against an embedded server: each
// operation's throughput and its three latency percentiles, and the
// ratios to the ceilings. Run fails unless the server wrote exactly the
// records whose inserts were acknowledged, and every read found its
// record.
func TestQuickRun(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a server and measures")
	}
	x := &Experiment{Clients: 4, Records: 1000, RequestsDir: t.TempDir()}
	res, env := labtest.Run(t, x)
	labtest.CheckResult(t, x, res)
	checkRequests(t, x.RequestsDir, env.Targets()[0].Client.API(), x.Records)
	ops := labtest.Rows(res, "operations/s")
	for _, op := range []string{"get", "health", "query", "search", "echo", "write", "write shared", "mix"} {
		if r, ok := ops[op]; !ok || r.Median <= 0 {
			t.Errorf("row %q: %+v", op, r)
		}
		for _, p := range []string{"p50", "p99", "p999"} {
			r, ok := labtest.Rows(res, "µs, "+p)[op+" "+p]
			if !ok || r.Median <= 0 {
				t.Errorf("row %q: %+v", op+" "+p, r)
			}
		}
	}
	for _, want := range []string{"get ÷ health", "query ÷ health", "search ÷ echo"} {
		if !hasNote(res.Notes, want) {
			t.Errorf("no note %q in %q", want, res.Notes)
		}
	}
	if !env.Targets()[0].Sync {
		t.Error("the lab's embedded server does not sync: the write rows would not be durable")
	}
}

// Latencies are ordered within a run: p50 ≤ p99 ≤ p999.
func TestQuickRunPercentilesOrdered(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a server and measures")
	}
	x := &Experiment{Clients: 2, Records: 100}
	res, _ := labtest.Run(t, x)
	for _, op := range []string{"get", "write"} {
		p50 := labtest.Rows(res, "µs, p50")[op+" p50"].Median
		p99 := labtest.Rows(res, "µs, p99")[op+" p99"].Median
		p999 := labtest.Rows(res, "µs, p999")[op+" p999"].Median
		if p50 > p99 || p99 > p999 {
			t.Errorf("%s: p50 %v p99 %v p999 %v", op, p50, p99, p999)
		}
	}
}

func hasNote(notes []string, prefix string) bool {
	for _, n := range notes {
		if strings.HasPrefix(n, prefix) {
			return true
		}
	}
	return false
}

// Flags out of range are refused before anything starts.
func TestDefaultsRefuse(t *testing.T) {
	for _, x := range []*Experiment{{Clients: 0, Records: 10}, {Clients: 1001, Records: 10}, {Clients: 1, Records: -1}} {
		if err := x.defaults(false); err == nil {
			t.Errorf("%+v accepted", x)
		}
	}
}

// A --requests-dir that cannot be a directory (a file is in the way)
// fails the run with an error naming the flag, and writes nothing.
func TestRequestsDirRefused(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a server")
	}
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, dir := range []string{file, filepath.Join(file, "sub")} {
		x := &Experiment{Clients: 1, Records: 10, RequestsDir: dir}
		_, err := labtest.Env(t, labtest.Options()).Run(t.Context(), x)
		if err == nil || !strings.Contains(err.Error(), "--requests-dir") {
			t.Errorf("--requests-dir %s: %v", dir, err)
		}
	}
	if b, err := os.ReadFile(file); err != nil || string(b) != "x" {
		t.Errorf("the file in the way now holds %q (%v)", b, err)
	}
}

// A --postgres that is no connection string, or names a server that does
// not answer, fails the run with an error naming what failed and never
// the password.
func TestPostgresErrorsHideThePassword(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a server")
	}
	for _, dsn := range []string{"postgres://bench:s3cret@127.0.0.1:1/bench?sslmode=disable", "postgres://bench:s3cret@[::1/%zz"} {
		x := &Experiment{Clients: 1, Records: 10, Postgres: dsn}
		_, err := bench.Run(t.Context(), x, labtest.Options(), nil)
		if err == nil {
			t.Fatalf("%q: run succeeded", dsn)
		}
		if strings.Contains(err.Error(), "s3cret") || !strings.Contains(err.Error(), "postgres") && !strings.Contains(err.Error(), "PostgreSQL") {
			t.Errorf("%q: error %q", dsn, err)
		}
	}
}

// checkRequests replays the files --requests-dir wrote against the server
// that ran: every Get and Query finds its one loaded record, the health
// check answers, and the keys are spread over the loaded records.
func checkRequests(t *testing.T, dir string, api pbgrpc.ProtobaseClient, records int) {
	t.Helper()
	keys := map[string]bool{}
	for _, f := range []struct {
		name string
		msg  func() proto.Message
		n    int
	}{
		{getRequestsFile, func() proto.Message { return new(pb.GetRequest) }, requestsPerFile},
		{queryRequestsFile, func() proto.Message { return new(pb.QueryRequest) }, requestsPerFile},
		{healthRequestsFile, func() proto.Message { return new(healthpb.HealthCheckRequest) }, 1},
	} {
		data, err := os.ReadFile(filepath.Join(dir, f.name))
		if err != nil {
			t.Fatal(err)
		}
		r := bufio.NewReader(bytes.NewReader(data))
		n := 0
		for ; ; n++ {
			m := f.msg()
			if err := protodelim.UnmarshalFrom(r, m); errors.Is(err, io.EOF) {
				break
			} else if err != nil {
				t.Fatalf("%s: message %d: %v", f.name, n, err)
			}
			switch m := m.(type) {
			case *pb.GetRequest:
				resp, err := api.Get(t.Context(), m)
				if err != nil || len(resp.GetRecords()) != 1 || resp.GetRecords()[0] == nil {
					t.Fatalf("%s: %v: %v, %v", f.name, m, resp, err)
				}
				keys[m.GetKeys()[0].GetStringValue()] = true
			case *pb.QueryRequest:
				if resp, err := api.Query(t.Context(), m); err != nil || len(resp.GetRecords()) != 1 {
					t.Fatalf("%s: %v: %v, %v", f.name, m, resp, err)
				}
			}
		}
		if n != f.n {
			t.Errorf("%s: %d messages, want %d", f.name, n, f.n)
		}
	}
	if len(keys) < records/2 {
		t.Errorf("the Gets ask for %d distinct keys of %d", len(keys), records)
	}
}
