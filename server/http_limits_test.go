package server_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	pb "github.com/protobase/protobase/gen/protobase/v1"
	"github.com/protobase/protobase/server"
)

// testHTTPLimits are small enough for tests to meet them in a fraction of
// a second.
var testHTTPLimits = server.HTTPLimits{
	ReadHeaderTimeout: 300 * time.Millisecond,
	BodyTimeout:       300 * time.Millisecond,
	MinBodyRate:       1000,
	WriteTimeout:      time.Second,
	IdleTimeout:       300 * time.Millisecond,
}

// dialHTTP opens a raw connection to the gateway.
func dialHTTP(t *testing.T, ts *testServer) net.Conn {
	t.Helper()
	conn, err := net.Dial("tcp", ts.Srv.HTTPAddr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// closedWithin reads conn until the server closes it and fails the test
// unless that happens within d. It returns what the server sent.
func closedWithin(t *testing.T, conn net.Conn, d time.Duration) string {
	t.Helper()
	_ = conn.SetReadDeadline(time.Now().Add(d))
	b, err := io.ReadAll(conn)
	if ne := net.Error(nil); errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("the server held the connection for %s; it sent %q", d, b)
	}
	return string(b)
}

func TestHTTPTrickledBodyIsCut(t *testing.T) {
	ts := startTransports(t, server.Config{HTTPLimits: testHTTPLimits})
	conn := dialHTTP(t, ts)
	body := `{"records": [{"@type": "type.googleapis.com/shop.User", "id": "1", "email": "1@x"}]}` + "\n"
	fmt.Fprintf(conn, "POST /v1/records:insert HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", len(body))
	// One byte every 100 ms: 10 bytes/s against a minimum of 1000.
	stop := make(chan struct{})
	trickled := make(chan int, 1)
	go func() {
		n := 0
		defer func() { trickled <- n }()
		for ; n < len(body); n++ {
			select {
			case <-stop:
				return
			case <-time.After(100 * time.Millisecond):
			}
			if _, err := conn.Write([]byte{body[n]}); err != nil {
				return
			}
		}
	}()
	got := closedWithin(t, conn, 5*time.Second)
	close(stop)
	if n := <-trickled; n >= len(body) {
		t.Fatalf("the whole body trickled in")
	}
	if !strings.Contains(got, "request body too slow") {
		t.Errorf("response %q does not say the body was too slow", got)
	}
	t.Logf("the server said:\n%s", got)
}

func TestHTTPTrickledBodyIsCutH2(t *testing.T) {
	ts := startTransports(t, server.Config{HTTPLimits: testHTTPLimits})
	c := restClients(t, ts)[1]
	pr, pw := io.Pipe()
	defer pw.Close()
	go func() {
		for _, b := range []byte(`{"op": "WRITE_OP_INSERT", "records": []}` + "\n") {
			time.Sleep(100 * time.Millisecond) // the trickle itself
			if _, err := pw.Write([]byte{b}); err != nil {
				return
			}
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.base+"/v1/records:write", pr)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-ndjson")
	resp, err := c.hc.Do(req)
	if err != nil {
		t.Fatalf("no answer: %v", err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if ctx.Err() != nil {
		t.Fatalf("the server held the stream for 5 s: %q %v", b, err)
	}
	if !strings.Contains(string(b), "request body too slow") {
		t.Errorf("HTTP %d %q (%v) does not say the body was too slow", resp.StatusCode, b, err)
	}
}

// TestHTTPSteadyStreamOutlivesTimeouts runs a Write stream for several
// times BodyTimeout and WriteTimeout, with pauses shorter than
// BodyTimeout: the limits bound rates and gaps, not a stream's length.
func TestHTTPSteadyStreamOutlivesTimeouts(t *testing.T) {
	ts := startTransports(t, server.Config{HTTPLimits: testHTTPLimits})
	for _, c := range restClients(t, ts) {
		t.Run(c.name(), func(t *testing.T) {
			pr, pw := io.Pipe()
			defer pw.Close()
			// A refused stream must fail the test, not hang it: the deadline
			// closes the body pipe a refusing server never reads.
			ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
			defer cancel()
			req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.base+"/v1/records:write", pr)
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Content-Type", "application/x-ndjson")
			base := 1000
			if c.h2 {
				base = 2000
			}
			line := func(i int) string {
				return fmt.Sprintf(`{"op": "WRITE_OP_INSERT", "ack": true, "records": [{"@type": "type.googleapis.com/shop.User", "id": "%d", "email": "%d@x", "name": %q}]}`+"\n",
					base+i, base+i, strings.Repeat("n", 200))
			}
			started := make(chan *http.Response, 1)
			go func() {
				resp, err := c.hc.Do(req)
				if err != nil {
					t.Error(err)
					close(started)
					return
				}
				started <- resp
			}()
			if _, err := io.WriteString(pw, line(0)); err != nil {
				t.Fatal(err)
			}
			resp, ok := <-started
			if !ok {
				return
			}
			defer resp.Body.Close()
			lines := bufio.NewScanner(resp.Body)
			start := time.Now()
			for i := 0; ; i++ {
				if !lines.Scan() {
					t.Fatalf("no acknowledgement of batch %d after %s: %v", i, time.Since(start), lines.Err())
				}
				msgs, st := c.lines(lines.Bytes(), func() proto.Message { return new(pb.WriteStreamResponse) })
				if st != nil || len(msgs) != 1 {
					t.Fatalf("batch %d: %s", i, lines.Bytes())
				}
				if time.Since(start) > 1500*time.Millisecond {
					break
				}
				time.Sleep(150 * time.Millisecond) // a pause, half of BodyTimeout
				if _, err := io.WriteString(pw, line(i+1)); err != nil {
					t.Fatalf("batch %d: %v", i+1, err)
				}
			}
			pw.Close()
			for lines.Scan() {
				if strings.Contains(lines.Text(), "error") {
					t.Errorf("stream ended with %s", lines.Text())
				}
			}
		})
	}
}

func TestHTTPHeaderAndIdleTimeouts(t *testing.T) {
	ts := startTransports(t, server.Config{HTTPLimits: testHTTPLimits})

	// Headers that never end.
	conn := dialHTTP(t, ts)
	fmt.Fprintf(conn, "GET /v1/schema HTTP/1.1\r\nHost: 127.0.0.1\r\n")
	closedWithin(t, conn, 5*time.Second)

	// A kept-alive connection with nothing more to ask.
	conn = dialHTTP(t, ts)
	fmt.Fprintf(conn, "GET /v1/schema HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
	got := closedWithin(t, conn, 5*time.Second)
	if !strings.HasPrefix(got, "HTTP/1.1 200 ") {
		t.Errorf("the request was not answered: %.100q", got)
	}
}

// TestHTTPNonReadingClientIsCut scans more than the socket buffers hold
// (about 34 MB of JSON: loopback buffers grow to several MB each way)
// to a client that reads nothing: the server's write waits WriteTimeout,
// then the stream ends short of the full result.
func TestHTTPNonReadingClientIsCut(t *testing.T) {
	skipLargeInRaceRun(t)
	ts := startTransports(t, server.Config{NoSync: true, HTTPLimits: testHTTPLimits})
	const n = 6000
	tags := strings.Repeat(`"tag", `, 800) + `"tag"`
	batch := make([]*anypb.Any, 0, 1000)
	for i := range n {
		batch = append(batch, ts.Rec("shop.User", fmt.Sprintf(`{"id": %d, "email": "%d@x", "tags": [%s]}`, i, i, tags)))
		if len(batch) == cap(batch) {
			ts.MustWrite(pb.WriteOp_WRITE_OP_INSERT, batch)
			batch = batch[:0]
		}
	}
	conn := dialHTTP(t, ts)
	body := `{"query": {"type": "shop.User"}}`
	fmt.Fprintf(conn, "POST /v1/scan HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
	// Not reading for three times WriteTimeout is the behaviour under test.
	// Under the race detector the server takes several times as long to
	// fill the socket buffers before its write can wait at all.
	idle, within := 3*testHTTPLimits.WriteTimeout, 10*time.Second
	if raceEnabled {
		idle, within = 5*idle, 3*within
	}
	time.Sleep(idle)
	got := closedWithin(t, conn, within)
	if k := strings.Count(got, `"email"`); k >= n {
		t.Errorf("the client received all %d records after not reading for %s", k, idle)
	} else {
		t.Logf("the client received %d records of %d (%d bytes)", k, n, len(got))
	}
}

func TestHTTPLimitsValidate(t *testing.T) {
	cfg := server.Config{DataDir: "d", HTTPLimits: server.HTTPLimits{MinBodyRate: -1}}
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "HTTPLimits.MinBodyRate must not be negative") {
		t.Errorf("Validate: %v", err)
	}
}
