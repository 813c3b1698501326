package server_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"runtime"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	pb "github.com/protobase/protobase/gen/protobase/v1"
	"github.com/protobase/protobase/server"
)

// restWatch is a Watch over REST: the response's lines as they come.
type restWatch struct {
	c      *restClient
	resp   *http.Response
	lines  *bufio.Scanner
	cancel context.CancelFunc
}

// openRESTWatch posts body to /v1/watch and returns the open stream once
// the response's header arrived.
func (c *restClient) openWatch(body string, header http.Header) *restWatch {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	c.t.Cleanup(cancel)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.base+"/v1/watch", strings.NewReader(body))
	if err != nil {
		c.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for k, v := range header {
		req.Header[k] = v
	}
	// The client's whole-exchange timeout would cut a watch.
	hc := *c.hc
	hc.Timeout = 0
	resp, err := hc.Do(req)
	if err != nil {
		c.t.Fatalf("POST /v1/watch: %v", err)
	}
	c.t.Cleanup(func() { resp.Body.Close() })
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 16<<20)
	return &restWatch{c: c, resp: resp, lines: sc, cancel: cancel}
}

// next reads the next line: a message, or the final status.
func (w *restWatch) next() (*pb.WatchResponse, *statusLine) {
	w.c.t.Helper()
	if !w.lines.Scan() {
		w.c.t.Fatalf("the watch ended without a status line: %v", w.lines.Err())
	}
	if st := parseStatusLine(w.lines.Bytes()); st != nil {
		return nil, st
	}
	msgs, _ := w.c.lines(w.lines.Bytes(), func() proto.Message { return new(pb.WatchResponse) })
	if len(msgs) != 1 {
		w.c.t.Fatalf("line %q", w.lines.Bytes())
	}
	return msgs[0].(*pb.WatchResponse), nil
}

// changes reads lines until n changes came.
func (w *restWatch) changes(n int) []*pb.Change {
	w.c.t.Helper()
	var out []*pb.Change
	for len(out) < n {
		m, st := w.next()
		if st != nil {
			w.c.t.Fatalf("the watch ended after %d of %d changes: %v %s", len(out), n, st.code, st.msg)
		}
		out = append(out, m.GetChanges()...)
	}
	return out
}

type statusLine struct {
	code codes.Code
	msg  string
}

// parseStatusLine decodes an {"error": status} line, or returns nil for
// any other line. It needs no schema: the server may be gone.
func parseStatusLine(b []byte) *statusLine {
	var line struct {
		Error *struct {
			Code    codes.Code `json:"code"`
			Message string     `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal(b, &line) != nil || line.Error == nil {
		return nil
	}
	return &statusLine{code: line.Error.Code, msg: line.Error.Message}
}

// waitHandlersGone waits until no goroutine runs the gateway's watch
// handler: the server let go of every REST watch.
func waitHandlersGone(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		if !strings.Contains(goroutineStacks(), "gateway.(*Gateway).watch(") {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("a REST watch handler still runs 20 s after its client went away")
		}
		time.Sleep(10 * time.Millisecond) // polling a state
	}
}

// goroutineStacks is the stack of every goroutine of the process.
func goroutineStacks() string {
	buf := make([]byte, 1<<20)
	n := runtime.Stack(buf, true)
	for n == len(buf) {
		buf = make([]byte, 2*len(buf))
		n = runtime.Stack(buf, true)
	}
	return string(buf[:n])
}

func TestHTTPWatch(t *testing.T) {
	ts := startTransports(t, server.Config{NoSync: true})
	for i, c := range restClients(t, ts) {
		t.Run(c.name(), func(t *testing.T) {
			w := c.openWatch(`{"types": ["shop.User"], "oldRecords": true, "filter": "email contains \"@keep\""}`, nil)
			if w.resp.StatusCode != http.StatusOK || w.resp.Header.Get("Content-Type") != "application/x-ndjson" {
				t.Fatalf("HTTP %d, Content-Type %q", w.resp.StatusCode, w.resp.Header.Get("Content-Type"))
			}
			// The first line names the start: nothing before it is sent.
			first, st := w.next()
			if st != nil || len(first.GetChanges()) != 0 || first.GetProgress() == nil {
				t.Fatalf("first line: %v %v", first, st)
			}
			id := 100 * (i + 1)
			user := func(id int, email string) *anypb.Any {
				return ts.Rec("shop.User", fmt.Sprintf(`{"id": %d, "email": %q}`, id, email))
			}
			ts.MustWrite(pb.WriteOp_WRITE_OP_INSERT, []*anypb.Any{user(id, fmt.Sprintf("%d@keep", id)), user(id+1, fmt.Sprintf("%d@drop", id+1))})
			ts.MustWrite(pb.WriteOp_WRITE_OP_UPSERT, []*anypb.Any{user(id, fmt.Sprintf("%d.2@keep", id))})
			got := w.changes(2)
			if len(got) != 2 || got[0].GetOp() != pb.ChangeOp_CHANGE_OP_INSERT || got[1].GetOp() != pb.ChangeOp_CHANGE_OP_UPDATE ||
				!proto.Equal(got[1].GetRecord(), user(id, fmt.Sprintf("%d.2@keep", id))) || !proto.Equal(got[1].GetOldRecord(), user(id, fmt.Sprintf("%d@keep", id))) ||
				got[0].GetPosition().GetCommit() >= got[1].GetPosition().GetCommit() {
				t.Fatalf("changes %v", got)
			}
			// Each message is a line of its own, written when it is sent:
			// the reader got these while the stream stays open.
			w.cancel()
			waitHandlersGone(t)
		})
	}
}

// Malformed and refused watches are answered before any line, with the
// HTTP code of their status.
func TestHTTPWatchMalformed(t *testing.T) {
	ts := startTransports(t, server.Config{NoSync: true, MaxMessageBytes: 64 << 10})
	c := restClients(t, ts)[0]
	cases := []struct {
		name, body string
		http       int
		code       codes.Code
		msg        string
	}{
		{"truncated", `{"types": [`, 400, codes.InvalidArgument, ""},
		{"not an object", `["shop.User"]`, 400, codes.InvalidArgument, ""},
		{"unknown field", `{"types": ["shop.User"], "bogus": 1}`, 400, codes.InvalidArgument, "bogus"},
		{"two requests", `{"types": ["shop.User"]} {"types": ["shop.User"]}`, 400, codes.InvalidArgument, "one WatchRequest"},
		{"empty body", ``, 400, codes.InvalidArgument, "types"},
		{"no types", `{}`, 400, codes.InvalidArgument, "types"},
		{"negative batch", `{"types": ["shop.User"], "batchSize": -1}`, 400, codes.InvalidArgument, ""},
		{"both filters", `{"types": ["shop.User"], "filter": "id = 1", "where": {"cmp": {"field": "id", "op": "OP_EQ", "value": {"int": "1"}}}}`, 400, codes.InvalidArgument, "filter"},
		{"bad filter", `{"types": ["shop.User"], "filter": "id >="}`, 400, codes.InvalidArgument, "filter"},
		{"unknown type", `{"types": ["shop.Nope"]}`, 404, codes.NotFound, "shop.Nope"},
		{"two starts", `{"types": ["shop.User"], "start": {"now": true, "oldest": true}}`, 400, codes.InvalidArgument, ""},
		{"future position", `{"types": ["shop.User"], "start": {"after": {"commit": "18446744073709551615"}}}`, 400, codes.OutOfRange, ""},
		{"index without commit", `{"types": ["shop.User"], "start": {"after": {"index": 3}}}`, 400, codes.InvalidArgument, ""},
		{"oversized", `{"types": ["` + strings.Repeat("x", 100<<10) + `"]}`, 413, codes.ResourceExhausted, ""},
	}
	for _, tc := range cases {
		code, b := c.post("/v1/watch", tc.body)
		if code != tc.http {
			t.Errorf("%s: HTTP %d, want %d: %.300s", tc.name, code, tc.http, b)
			continue
		}
		// Refused by the gateway: a status body; by the service: a
		// stream holding only its status line.
		st := parseStatusLine(b)
		if st == nil {
			s := c.restStatus(code, b, tc.http, tc.code)
			st = &statusLine{code: codes.Code(s.Code), msg: s.Message}
		}
		if st.code != tc.code || !strings.Contains(st.msg, tc.msg) {
			t.Errorf("%s: %v %q, want %v containing %q", tc.name, st.code, st.msg, tc.code, tc.msg)
		}
	}
	// Not JSON at all: refused by the gateway's guard.
	req, _ := http.NewRequest(http.MethodPost, c.base+"/v1/watch", strings.NewReader(`types=shop.User`))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err := c.hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnsupportedMediaType {
		t.Errorf("a form post: HTTP %d", resp.StatusCode)
	}
	// A watch is a POST: another method is 405 naming it.
	code, b := c.do(http.MethodGet, "/v1/watch", nil)
	if code != http.StatusMethodNotAllowed {
		t.Errorf("GET /v1/watch: HTTP %d %s", code, b)
	}
}

// Off loopback a REST watch needs a key of the read role whose scope
// holds every type watched.
func TestHTTPWatchAuth(t *testing.T) {
	e := startAuthServer(t, server.Config{})
	body := func(types ...string) string { return `{"types": ["` + strings.Join(types, `", "`) + `"]}` }
	for _, c := range []struct {
		key, body string
		http      int
	}{
		{"", body("shop.User"), 401},
		{"forged", body("shop.User"), 401},
		{"user-reader", body("shop.User", "shop.Order"), 403},
	} {
		code, b := e.rest(c.key, "POST", "/v1/watch", c.body)
		if code != c.http {
			t.Errorf("key %q, %s: HTTP %d %s, want %d", c.key, c.body, code, b, c.http)
		}
	}
	rc := &restClient{t: t, ts: e.ts, base: "http://" + e.ts.Srv.HTTPAddr(), hc: &http.Client{}}
	w := rc.openWatch(body("shop.User"), http.Header{"Authorization": {"Bearer " + e.keys["user-reader"]}})
	if m, st := w.next(); st != nil || w.resp.StatusCode != http.StatusOK || m.GetProgress() == nil {
		t.Fatalf("scoped reader: HTTP %d, first line %v %v", w.resp.StatusCode, m, st)
	}
	e.ts.MustWrite(pb.WriteOp_WRITE_OP_INSERT, []*anypb.Any{e.user(500)})
	if got := w.changes(1); got[0].GetType() != "shop.User" {
		t.Fatalf("changes %v", got)
	}
	// A revoked key's watch ends at its next message.
	if err := e.ts.C.RevokeKey(t.Context(), "user-reader"); err != nil {
		t.Fatal(err)
	}
	e.ts.MustWrite(pb.WriteOp_WRITE_OP_INSERT, []*anypb.Any{e.user(501)})
	for {
		_, st := w.next()
		if st != nil {
			if st.code != codes.Unauthenticated {
				t.Fatalf("after revocation the watch ended with %v %s", st.code, st.msg)
			}
			break
		}
	}
}

// A server that stops ends its REST watches with UNAVAILABLE, instead of
// waiting its whole grace period for them.
func TestHTTPWatchEndsWhenServerStops(t *testing.T) {
	ts := startTransports(t, server.Config{NoSync: true, ShutdownTimeout: 2 * time.Minute})
	for _, c := range restClients(t, ts) {
		w := c.openWatch(`{"types": ["shop.User"]}`, nil)
		if _, st := w.next(); st != nil {
			t.Fatalf("%s: %v", c.name(), st)
		}
		defer func() {
			m, st := w.next()
			if st == nil || st.code != codes.Unavailable || !strings.Contains(st.msg, "shutting down") {
				t.Errorf("%s: the watch ended with %v, %v; want UNAVAILABLE", c.name(), m, st)
			}
		}()
	}
	start := time.Now()
	if err := ts.Srv.Stop(); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > time.Minute {
		t.Errorf("Stop took %s: it waited for the watches", d)
	}
}

// A watch outlives every HTTP timeout while its client reads, quiet
// stretches longer than the timeouts included.
func TestHTTPWatchOutlivesTimeouts(t *testing.T) {
	ts := startTransports(t, server.Config{NoSync: true, HTTPLimits: testHTTPLimits})
	for i, c := range restClients(t, ts) {
		t.Run(c.name(), func(t *testing.T) {
			w := c.openWatch(`{"types": ["shop.User"]}`, nil)
			if _, st := w.next(); st != nil {
				t.Fatal(st)
			}
			pause := 3 * max(testHTTPLimits.WriteTimeout, testHTTPLimits.IdleTimeout, testHTTPLimits.BodyTimeout) / 2
			for k := range 2 {
				time.Sleep(pause) // quiet: the behaviour under test
				id := 1000*(i+1) + k
				ts.MustWrite(pb.WriteOp_WRITE_OP_INSERT, []*anypb.Any{ts.Rec("shop.User", fmt.Sprintf(`{"id": %d, "email": "%d@x"}`, id, id))})
				for {
					m, st := w.next()
					if st != nil {
						t.Fatalf("after %s: %v %s", time.Duration(k+1)*pause, st.code, st.msg)
					}
					if len(m.GetChanges()) > 0 {
						break
					}
				}
			}
		})
	}
}

// A client that stops reading is cut after WriteTimeout: the server holds
// one response for it meanwhile, and writers go on.
func TestHTTPWatchNonReadingClientIsCut(t *testing.T) {
	ts := startTransports(t, server.Config{NoSync: true, HTTPLimits: testHTTPLimits})
	conn := dialHTTP(t, ts)
	body := `{"types": ["shop.User"]}`
	fmt.Fprintf(conn, "POST /v1/watch HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
	// The first line says the watch began; then the client reads nothing.
	br := bufio.NewReader(conn)
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatalf("before the first line: %v", err)
		}
		if strings.Contains(line, `"progress"`) {
			break
		}
	}
	const n = 6000
	tags := strings.Repeat(`"tag", `, 300) + `"tag"`
	batch := make([]*anypb.Any, 0, 500)
	start := time.Now()
	for i := range n {
		batch = append(batch, ts.Rec("shop.User", fmt.Sprintf(`{"id": %d, "email": "%d@x", "tags": [%s]}`, i, i, tags)))
		if len(batch) == cap(batch) {
			ts.MustWrite(pb.WriteOp_WRITE_OP_INSERT, batch)
			batch = batch[:0]
		}
	}
	t.Logf("%d records (%d MB of JSON) written in %s while the watcher did not read", n, n*len(tags)/1e6, time.Since(start))
	time.Sleep(3 * testHTTPLimits.WriteTimeout) // not reading: the behaviour under test
	rest, _ := io.ReadAll(br)
	if k := strings.Count(string(rest), `"email"`); k >= n {
		t.Errorf("the client received all %d changes after not reading for %s", k, 3*testHTTPLimits.WriteTimeout)
	} else {
		t.Logf("the client received %d changes of %d before the cut", k, n)
	}
	waitHandlersGone(t)
}

// The same over HTTP/2, where flow control, not the socket, stops the
// server's writes: the stream is reset after WriteTimeout and the handler
// returns, while the connection and the writers go on.
func TestHTTPWatchNonReadingClientIsCutH2(t *testing.T) {
	ts := startTransports(t, server.Config{NoSync: true, HTTPLimits: testHTTPLimits})
	c := restClients(t, ts)[1]
	w := c.openWatch(`{"types": ["shop.User"]}`, nil)
	if _, st := w.next(); st != nil {
		t.Fatal(st)
	}
	tags := strings.Repeat(`"tag", `, 300) + `"tag"`
	batch := make([]*anypb.Any, 0, 500)
	for i := range 6000 {
		batch = append(batch, ts.Rec("shop.User", fmt.Sprintf(`{"id": %d, "email": "%d@x", "tags": [%s]}`, i, i, tags)))
		if len(batch) == cap(batch) {
			ts.MustWrite(pb.WriteOp_WRITE_OP_INSERT, batch)
			batch = batch[:0]
		}
	}
	// The client reads nothing more: the handler must end on its own.
	waitHandlersGone(t)
	// The client's connection still serves.
	c.mustPost("/v1/query", `{"query": {"type": "shop.User", "limit": "1"}}`, new(pb.QueryResponse))
}
