package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/grpclog"

	"github.com/protobase/protobase/internal/exitstatus"
)

// jsonLines parses every line of out as a JSON object, failing the test
// on one that is not.
func jsonLines(t *testing.T, name, out string) []map[string]any {
	t.Helper()
	var lines []map[string]any
	for _, ln := range strings.Split(strings.TrimSpace(out), "\n") {
		if ln == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(ln), &m); err != nil {
			t.Errorf("%s line %q is not JSON: %v", name, ln, err)
			continue
		}
		lines = append(lines, m)
	}
	return lines
}

// jsonServe is a serve run with --log-format json.
type jsonServe struct {
	*serveRun
	cancel context.CancelFunc
}

// startJSONServe runs serve on loopback ports with --log-format json and
// the extra args, and returns once its serving line gives its address.
func startJSONServe(t *testing.T, extra ...string) *jsonServe {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	t.Cleanup(cancel)
	addrOf := func(stdout string) string { return jsonField(t, stdout, "protobase serving", "addr") }
	args := append([]string{"--data", t.TempDir(), "--log-format", "json", "--sync=false"}, extra...)
	return &jsonServe{serveRun: runServe(t, ctx, addrOf, args...), cancel: cancel}
}

// jsonField is the string field of the first JSON line of out whose msg
// is msg; "" when there is none.
func jsonField(t *testing.T, out, msg, field string) string {
	t.Helper()
	for _, l := range jsonLines(t, "stdout", out) {
		if l["msg"] == msg {
			v, _ := l[field].(string)
			return v
		}
	}
	return ""
}

// stop stops serve and wants it to exit 0.
func (s *jsonServe) stop(t *testing.T) {
	t.Helper()
	s.cancel()
	if code := <-s.done; code != exitstatus.OK {
		t.Fatalf("serve exited %d\n%s", code, s.stderr.String())
	}
}

// With --log-format json every line serve writes is a JSON object: the
// lines saying where it serves (stdout) as well as the log (stderr), whose
// durations are in fields named for their unit.
func TestServeLogFormatJSON(t *testing.T) {
	s := startJSONServe(t, "--slow-query", "1ns", "--http-addr", "127.0.0.1:0", "--metrics-addr", "127.0.0.1:0",
		"--nats", "--nats-addr", "127.0.0.1:0")
	applyShop(t, s.addr)
	mustCLI(t, "{\"id\": 1, \"email\": \"a@x\"}\n{\"id\": 2, \"email\": \"b@x\"}\n", "--addr", s.addr, "insert", "--type", "shop.User")
	mustCLI(t, "", "--addr", s.addr, "search", "--type", "shop.User", "--where", "email = \"b@x\"")
	s.stop(t)

	msgs := map[string]map[string]any{}
	for _, l := range jsonLines(t, "stdout", s.stdout.String()) {
		msgs[l["msg"].(string)] = l
	}
	for _, msg := range []string{"protobase serving", "metrics", "REST/JSON", "NATS"} {
		if msgs[msg] == nil {
			t.Errorf("stdout has no %q line:\n%s", msg, s.stdout.String())
		}
	}
	slow := 0
	for _, l := range jsonLines(t, "stderr", s.stderr.String()) {
		if l["msg"] != "slow query" {
			continue
		}
		slow++
		if _, ok := l["took_ms"].(float64); !ok {
			t.Errorf("slow query line without took_ms: %v", l)
		}
	}
	if slow == 0 {
		t.Errorf("no slow query line:\n%s", s.stderr.String())
	}
}

// gRPC's own lines reach serve's log, as JSON objects with
// --log-format json: a connection to the gRPC port that does not speak
// HTTP/2 is a debug line of gRPC's.
func TestServeLogsGRPC(t *testing.T) {
	s := startJSONServe(t, "--log-level", "debug")
	conn, err := net.Dial("tcp", s.addr)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = conn.Write([]byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n"))
	_, _ = io.Copy(io.Discard, conn) // until gRPC closes it
	_ = conn.Close()
	grpcLine := func() map[string]any {
		for _, l := range jsonLines(t, "stderr", s.stderr.String()) {
			if l["component"] == "grpc" && strings.Contains(fmt.Sprint(l["msg"]), "ServerTransport") {
				return l
			}
		}
		return nil
	}
	var l map[string]any
	for deadline := time.Now().Add(5 * time.Second); l == nil && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond) // polling the log, bounded by the deadline
		l = grpcLine()
	}
	s.stop(t)
	if l == nil {
		t.Fatalf("no line of gRPC's on the log:\n%s", s.stderr.String())
	}
	if l["level"] != "DEBUG" {
		t.Errorf("gRPC's line %v: want level DEBUG", l)
	}
}

// HTTP headers a REST client sends are not forwarded as gRPC metadata, so
// none the gateway could not forward (one that would spoof a forwarded
// address, a value not ASCII) puts a line on the log: a client repeating
// them would otherwise write an error line per request.
func TestServeRESTHeadersNotLogged(t *testing.T) {
	s := startJSONServe(t, "--http-addr", "127.0.0.1:0")
	url := s.restURL(t)
	for range 3 {
		getSchema(t, url, map[string]string{"Grpc-Metadata-X-Forwarded-For": "192.0.2.1", "Grpc-Metadata-Note": "caf\u00e9"})
	}
	s.stop(t)
	for _, l := range jsonLines(t, "stderr", s.stderr.String()) {
		if strings.Contains(fmt.Sprint(l["msg"]), "HTTP header") {
			t.Errorf("a client's header put a line on the log: %v", l)
		}
	}
}

// restURL is the REST gateway's URL from serve's REST/JSON line.
func (s *jsonServe) restURL(t *testing.T) string {
	t.Helper()
	url := jsonField(t, s.stdout.String(), "REST/JSON", "url")
	if url == "" {
		t.Fatalf("no REST/JSON line:\n%s", s.stdout.String())
	}
	return url
}

// getSchema GETs /v1/schema over REST with the headers and wants 200.
func getSchema(t *testing.T, url string, headers map[string]string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, url+"/v1/schema", nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /v1/schema with %v: %s", headers, resp.Status)
	}
}

// An error line a client can cause with every request (the gateway's,
// for a Content-Type it cannot parse) reaches the log once per period,
// not once per request; the requests are answered.
func TestServeSpacesClientCausedErrorLines(t *testing.T) {
	s := startJSONServe(t, "--http-addr", "127.0.0.1:0")
	url := s.restURL(t)
	const requests = 20
	for i := range requests {
		getSchema(t, url, map[string]string{"Content-Type": fmt.Sprintf("text/plain; =%d", i)})
	}
	s.stop(t)
	var lines []map[string]any
	for _, l := range jsonLines(t, "stderr", s.stderr.String()) {
		if strings.Contains(fmt.Sprint(l["msg"]), "Content-Type") {
			lines = append(lines, l)
		}
	}
	// The period is 10 s: the requests, made in well under that, get one
	// line (two should a slow machine take longer).
	if len(lines) == 0 || len(lines) > 2 {
		t.Fatalf("%d lines about the Content-Type for %d requests, want 1:\n%s", len(lines), requests, s.stderr.String())
	}
	if l := lines[0]; l["level"] != "ERROR" || l["component"] != "grpc" {
		t.Errorf("line %v: want an ERROR line of component grpc", l)
	}
}

// A server that cannot start says so on its JSON log, and nothing else.
func TestServeLogFormatJSONStartFailure(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer lis.Close()
	r := cli(t, "", "serve", "--data", t.TempDir(), "--grpc-addr", lis.Addr().String(), "--log-format", "json")
	wantCode(t, r, exitstatus.Failed)
	lines := jsonLines(t, "stderr", r.stderr)
	if len(lines) == 0 || lines[len(lines)-1]["level"] != "ERROR" ||
		!strings.Contains(lines[len(lines)-1]["err"].(string), "address already in use") {
		t.Errorf("stderr %q: want a JSON error line naming the address in use", r.stderr)
	}
	if r.stdout != "" {
		t.Errorf("printed %q", r.stdout)
	}
}

// A time.Duration logged by any part of the server is written in
// milliseconds under a name that says so.
func TestLogDurationsInMillis(t *testing.T) {
	var out syncBuffer
	log, err := newLogger(&out, "json", 0)
	if err != nil {
		t.Fatal(err)
	}
	log.Info("x", "shutdown_timeout", 1500*time.Microsecond)
	l := jsonLines(t, "log", out.String())
	if len(l) != 1 || l[0]["shutdown_timeout_ms"] != 1.5 {
		t.Errorf("logged %s, want shutdown_timeout_ms 1.5", out.String())
	}
}

// grpc-go's error lines are spaced by the line of code that logs them:
// repeats of one are held back and counted on its next line, while
// another line of code gets its own line at once, also through grpc-go's
// component loggers, which reach the logger through frames of their own.
// Lines below error are not spaced.
func TestGRPCLoggerSpacesErrorsBySite(t *testing.T) {
	const period = 50 * time.Millisecond
	var buf bytes.Buffer
	g := &grpcLogger{every: period}
	defer g.use(slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug})))()
	siteA := func(msg string) { g.Errorf("site A %s", msg) }
	start := time.Now()
	for i := range 5 {
		siteA(fmt.Sprint(i))
	}
	g.Errorln("site B")
	for range 3 {
		g.Warningf("a warning")
	}
	if time.Since(start) >= period {
		t.Skip("the machine took longer than the period to log nine lines")
	}
	time.Sleep(period)
	siteA("again")

	var got []string
	for _, l := range jsonLines(t, "log", buf.String()) {
		got = append(got, fmt.Sprintf("%v %v held_back=%v", l["level"], l["msg"], l["held_back"]))
	}
	want := []string{
		"ERROR site A 0 held_back=<nil>",
		"ERROR site B held_back=<nil>",
		"DEBUG a warning held_back=<nil>",
		"DEBUG a warning held_back=<nil>",
		"DEBUG a warning held_back=<nil>",
		"ERROR site A again held_back=4",
	}
	if !slices.Equal(got, want) {
		t.Errorf("lines:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}

	// Through grpc-go's component logger, to the logger grpc-go has.
	buf.Reset()
	defer grpcLog.use(slog.New(slog.NewJSONHandler(&buf, nil)))()
	c := grpclog.Component("lograte")
	for range 5 {
		c.Errorf("component site C")
	}
	c.Errorf("component site D")
	var msgs []string
	for _, l := range jsonLines(t, "log", buf.String()) {
		msgs = append(msgs, fmt.Sprint(l["msg"]))
	}
	if want := []string{"[lograte] component site C", "[lograte] component site D"}; !slices.Equal(msgs, want) {
		t.Errorf("component lines %q, want %q", msgs, want)
	}
}
