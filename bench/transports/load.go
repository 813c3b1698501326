package transports

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"math/bits"
	"math/rand/v2"
	"net"
	"strconv"
	"sync"
	"time"
)

// The lab's built-in wrk: keep-alive HTTP/1.1 connections, each issuing
// GET /records/{random id} back to back, with every latency recorded in a
// log-linear histogram. It speaks just enough HTTP/1.1 for the front
// (status line, headers, Content-Length body) over a bufio pair per
// connection, because net/http's client costs several allocations and
// kilobytes per request: on a 2-core machine a heavy client would steal
// the CPU the servers under test need (wrk is C for the same reason).

// histSubBits sets the histogram's precision: every power of two is split
// into 1<<histSubBits buckets, so a recorded value is off by less than
// 1/(1<<histSubBits) (0.8%) of itself. Values below 1<<(histSubBits+1)
// ns are exact.
const histSubBits = 7

const (
	histSub = 1 << histSubBits
	// histBuckets covers every uint64: the largest shift is 63-histSubBits.
	histBuckets = (64-histSubBits)*histSub + histSub
)

// latencyHist is an HDR-style histogram of durations in nanoseconds:
// exact below 256 ns, then 128 buckets per power of two. Recording is an
// index computation and an increment, with no allocation.
//
// Invariant: n is the sum of counts; when n > 0, min ≤ every recorded
// value ≤ max and sum is their exact total.
type latencyHist struct {
	counts   [histBuckets]uint64
	n        uint64
	sum      float64 // ns; float64 so that hours of samples cannot overflow
	min, max uint64
}

// histIndex returns the bucket of v: v itself below 2*histSub, else the
// top histSubBits+1 bits of v (its mantissa, in [histSub, 2*histSub))
// offset by histSub buckets per shift.
func histIndex(v uint64) int {
	if v < 2*histSub {
		return int(v)
	}
	shift := bits.Len64(v) - histSubBits - 1
	return shift*histSub + int(v>>shift)
}

// histRange returns the smallest and largest value of bucket i.
func histRange(i int) (lo, hi uint64) {
	if i < 2*histSub {
		return uint64(i), uint64(i)
	}
	shift := i/histSub - 1
	mant := uint64(i - shift*histSub)
	return mant << shift, (mant+1)<<shift - 1
}

// record adds one latency (negative durations count as 0).
func (h *latencyHist) record(d time.Duration) {
	v := uint64(max(d, 0))
	h.counts[histIndex(v)]++
	if h.n == 0 || v < h.min {
		h.min = v
	}
	h.max = max(h.max, v)
	h.n++
	h.sum += float64(v)
}

// merge adds o's samples to h.
func (h *latencyHist) merge(o *latencyHist) {
	if o.n == 0 {
		return
	}
	for i, c := range o.counts {
		h.counts[i] += c
	}
	if h.n == 0 || o.min < h.min {
		h.min = o.min
	}
	h.max = max(h.max, o.max)
	h.n += o.n
	h.sum += o.sum
}

// mean returns the exact average, or 0 without samples.
func (h *latencyHist) mean() time.Duration {
	if h.n == 0 {
		return 0
	}
	return time.Duration(math.Round(h.sum / float64(h.n)))
}

// percentile returns the value below or at which p percent of the samples
// fall (the sample of rank ⌈p/100·n⌉, as HdrHistogram and wrk define it),
// as the middle of its bucket clamped to [min, max] (exactly min and max
// at the extremes); 0 without samples.
func (h *latencyHist) percentile(p float64) time.Duration {
	if h.n == 0 {
		return 0
	}
	rank := uint64(math.Ceil(p / 100 * float64(h.n)))
	rank = min(max(rank, 1), h.n)
	switch rank { // the extremes are known exactly
	case 1:
		return time.Duration(h.min)
	case h.n:
		return time.Duration(h.max)
	}
	var seen uint64
	for i, c := range h.counts {
		seen += c
		if seen >= rank {
			lo, hi := histRange(i)
			v := lo + (hi-lo)/2
			return time.Duration(min(max(v, h.min), h.max))
		}
	}
	return time.Duration(h.max) // unreachable while the invariant holds
}

// loadResult is what one load run did.
type loadResult struct {
	requests int64         // responses received, all 200
	bytes    int64         // response bytes read, headers included (as wrk counts)
	elapsed  time.Duration // from the first request sent to the last response read
	hist     *latencyHist
}

// latencySummary is one run's latency figures.
type latencySummary struct {
	avg, p50, p99, max time.Duration
}

func (r *loadResult) latency() latencySummary {
	return latencySummary{avg: r.hist.mean(), p50: r.hist.percentile(50), p99: r.hist.percentile(99), max: time.Duration(r.hist.max)}
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
			host: cfg.addr, hist: new(latencyHist),
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
	res := &loadResult{hist: new(latencyHist)}
	end := start
	for i, c := range conns {
		if errs[i] != nil {
			return nil, fmt.Errorf("connection %d: %w", i, errs[i])
		}
		res.requests += c.requests
		res.bytes += c.bytes
		res.hist.merge(c.hist)
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
	hist     *latencyHist
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
		c.hist.record(time.Since(now))
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
