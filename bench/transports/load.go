package transports

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/protobase/protobase/bench"
)

// The lab's built-in wrk: keep-alive HTTP/1.1 connections, each issuing
// GET /records/{random id} back to back, with every latency recorded in a
// bench.LatencyHist. It speaks just enough HTTP/1.1 for the front
// (status line, headers, Content-Length body) over a bufio pair per
// connection, because net/http's client costs several allocations and
// kilobytes per request: on a 2-core machine a heavy client would steal
// the CPU the servers under test need (wrk is C for the same reason).

// loadResult is what one load run did.
type loadResult struct {
	requests int64         // responses received, all 200
	bytes    int64         // response bytes read, headers included (as wrk counts)
	elapsed  time.Duration // from the first request sent to the last response read
	hist     *bench.LatencyHist
}

// latencySummary is one run's latency figures.
type latencySummary struct {
	avg, p50, p99, max time.Duration
}

func (r *loadResult) latency() latencySummary {
	return latencySummary{avg: r.hist.Mean(), p50: r.hist.Percentile(50), p99: r.hist.Percentile(99), max: r.hist.Max()}
}

// loadConfig is a wrk-style load on one front.
type loadConfig struct {
	addr        string // host:port of the front
	connections int
	records     int    // ids are drawn uniformly from [0, records)
	seed        uint64 // seeds the id streams, one per connection
}

// runLoad opens cfg.connections connections to the front, and on each
// issues requests back to back until d has passed, then waits for the
// last answers. Any response but 200 fails the run: the front answers every
// id that was loaded, so anything else is a bug, not a data point.
func runLoad(ctx context.Context, cfg loadConfig, d time.Duration) (*loadResult, error) {
	conns := make([]*loadConn, cfg.connections)
	defer func() {
		for _, c := range conns {
			if c != nil {
				_ = c.nc.Close()
			}
		}
	}()
	var dialer net.Dialer
	for i := range conns {
		nc, err := dialer.DialContext(ctx, "tcp", cfg.addr)
		if err != nil {
			return nil, fmt.Errorf("connection %d: %w", i, err)
		}
		conns[i] = &loadConn{
			nc: nc, r: bufio.NewReaderSize(nc, 16<<10), w: bufio.NewWriterSize(nc, 4<<10),
			rng: rand.New(rand.NewPCG(cfg.seed, uint64(i))), records: cfg.records,
			host: cfg.addr, hist: new(bench.LatencyHist),
		}
	}
	// Closing the connections is what interrupts blocked reads on
	// cancellation; a clean run ends by the deadline instead.
	stop := context.AfterFunc(ctx, func() {
		for _, c := range conns {
			_ = c.nc.SetDeadline(time.Unix(1, 0))
		}
	})
	defer stop()

	start := time.Now()
	deadline := start.Add(d)
	var wg sync.WaitGroup
	errs := make([]error, len(conns))
	ends := make([]time.Time, len(conns))
	for i, c := range conns {
		wg.Go(func() { ends[i], errs[i] = c.run(deadline) })
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	res := &loadResult{hist: new(bench.LatencyHist)}
	end := start
	for i, c := range conns {
		if errs[i] != nil {
			return nil, fmt.Errorf("connection %d: %w", i, errs[i])
		}
		res.requests += c.requests
		res.bytes += c.bytes
		res.hist.Merge(c.hist)
		if ends[i].After(end) {
			end = ends[i]
		}
	}
	res.elapsed = end.Sub(start)
	return res, nil
}

// loadConn is one connection of a load run; one goroutine owns it.
type loadConn struct {
	nc       net.Conn
	r        *bufio.Reader
	w        *bufio.Writer
	rng      *rand.Rand
	records  int
	host     string
	req      []byte // the request being sent, rebuilt in place
	hist     *bench.LatencyHist
	requests int64
	bytes    int64
}

// run issues requests until deadline and returns when the last answer
// was read.
func (c *loadConn) run(deadline time.Time) (time.Time, error) {
	for {
		now := time.Now()
		if !now.Before(deadline) {
			return now, nil
		}
		c.req = appendRecordRequest(c.req[:0], c.host, c.rng.IntN(c.records))
		if _, err := c.w.Write(c.req); err != nil {
			return now, fmt.Errorf("send: %w", err)
		}
		if err := c.w.Flush(); err != nil {
			return now, fmt.Errorf("send: %w", err)
		}
		n, err := readResponse(c.r)
		if err != nil {
			return now, err
		}
		c.hist.Record(time.Since(now))
		c.requests++
		c.bytes += n
	}
}

// appendRecordRequest appends a keep-alive GET of record id.
func appendRecordRequest(dst []byte, host string, id int) []byte {
	dst = append(dst, "GET /records/"...)
	dst = strconv.AppendInt(dst, int64(id), 10)
	dst = append(dst, " HTTP/1.1\r\nHost: "...)
	dst = append(dst, host...)
	return append(dst, "\r\n\r\n"...)
}

// errStatus is a response other than 200 OK.
var errStatus = errors.New("unexpected HTTP status")

// readResponse reads one HTTP/1.1 response with a Content-Length body
// (what the front sends), discards the body, and returns the bytes read.
// Chunked bodies and Connection: close are refused: the front never sends
// them, and the load must not silently reconnect.
func readResponse(r *bufio.Reader) (int64, error) {
	line, err := r.ReadSlice('\n')
	if err != nil {
		return 0, fmt.Errorf("read status line: %w", err)
	}
	n := int64(len(line))
	status, ok := parseStatusLine(line)
	if !ok {
		return n, fmt.Errorf("malformed status line %q", bytes.TrimSpace(line))
	}
	length := int64(-1)
	for {
		h, err := r.ReadSlice('\n')
		if err != nil {
			return n, fmt.Errorf("read header: %w", err)
		}
		n += int64(len(h))
		h = bytes.TrimRight(h, "\r\n")
		if len(h) == 0 {
			break
		}
		k, v, ok := bytes.Cut(h, []byte(":"))
		if !ok {
			return n, fmt.Errorf("malformed header %q", h)
		}
		v = bytes.TrimSpace(v)
		switch {
		case bytes.EqualFold(k, []byte("Content-Length")):
			if length, err = strconv.ParseInt(string(v), 10, 64); err != nil || length < 0 {
				return n, fmt.Errorf("bad Content-Length %q", v)
			}
		case bytes.EqualFold(k, []byte("Transfer-Encoding")):
			return n, fmt.Errorf("unsupported Transfer-Encoding %q", v)
		case bytes.EqualFold(k, []byte("Connection")) && bytes.EqualFold(v, []byte("close")):
			return n, errors.New("the front closed the connection")
		}
	}
	if length < 0 {
		return n, errors.New("response without Content-Length")
	}
	if status != 200 {
		body := make([]byte, min(length, 200))
		_, _ = io.ReadFull(r, body)
		return n, fmt.Errorf("%w %d: %s", errStatus, status, bytes.TrimSpace(body))
	}
	if _, err := r.Discard(int(length)); err != nil {
		return n, fmt.Errorf("read body: %w", err)
	}
	return n + length, nil
}

// parseStatusLine returns the code of "HTTP/1.x NNN reason".
func parseStatusLine(line []byte) (int, bool) {
	if len(line) < 12 || !bytes.HasPrefix(line, []byte("HTTP/1.")) || line[8] != ' ' {
		return 0, false
	}
	code := 0
	for _, b := range line[9:12] {
		if b < '0' || b > '9' {
			return 0, false
		}
		code = code*10 + int(b-'0')
	}
	return code, true
}
