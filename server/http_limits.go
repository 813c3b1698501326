package server

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"time"
)

// HTTPLimits bound how long a client may hold the REST gateway's
// connections and handlers. Zero fields take the defaults.
//
// No fixed total read or write timeout applies: NDJSON write and search
// streams may rightly run for hours, and a watch (POST /v1/watch) for as
// long as its client reads. Instead a request body must keep arriving at
// MinBodyRate while the server waits for it, and each write of a response
// must reach the client within WriteTimeout: a watcher that stops reading
// is cut after it, holding one response meanwhile. IdleTimeout applies
// between requests only, never to a running one, however quiet.
type HTTPLimits struct {
	// ReadHeaderTimeout bounds reading a request's headers, and the TLS
	// handshake of a new connection (default Config.HandshakeTimeout).
	ReadHeaderTimeout time.Duration
	// BodyTimeout is the longest the server waits for the next bytes of a
	// request body it is reading, and the most time a body's rate may owe
	// (default 30 s).
	BodyTimeout time.Duration
	// MinBodyRate is the rate, in bytes per second, a request body must
	// average over the time the server waits for it (default 1024). Each
	// byte earns 1/MinBodyRate seconds of waiting, up to BodyTimeout in
	// hand; a body that falls BodyTimeout behind is cut.
	MinBodyRate int
	// WriteTimeout bounds each write of a response: a client that stops
	// reading a streamed response is cut after it (default 30 s).
	WriteTimeout time.Duration
	// IdleTimeout closes a kept-alive connection that carries no request
	// for this long (default Config.IdleTimeout).
	IdleTimeout time.Duration
}

// withDefaults sets the zero fields; handshake and idle are the server's
// HandshakeTimeout and IdleTimeout, the defaults of the connection-level
// bounds, shared with the other listeners.
func (l HTTPLimits) withDefaults(handshake, idle time.Duration) HTTPLimits {
	if l.ReadHeaderTimeout <= 0 {
		l.ReadHeaderTimeout = handshake
	}
	if l.BodyTimeout <= 0 {
		l.BodyTimeout = 30 * time.Second
	}
	if l.MinBodyRate <= 0 {
		l.MinBodyRate = 1024
	}
	if l.WriteTimeout <= 0 {
		l.WriteTimeout = 30 * time.Second
	}
	if l.IdleTimeout <= 0 {
		l.IdleTimeout = idle
	}
	return l
}

// validate names the first negative field.
func (l HTTPLimits) validate() error {
	for _, f := range []struct {
		name     string
		negative bool
	}{
		{"HTTPLimits.ReadHeaderTimeout", l.ReadHeaderTimeout < 0},
		{"HTTPLimits.BodyTimeout", l.BodyTimeout < 0},
		{"HTTPLimits.MinBodyRate", l.MinBodyRate < 0},
		{"HTTPLimits.WriteTimeout", l.WriteTimeout < 0},
		{"HTTPLimits.IdleTimeout", l.IdleTimeout < 0},
	} {
		if f.negative {
			return configError(f.name, " must not be negative")
		}
	}
	return nil
}

// apply sets the connection-level limits on hs and wraps its handler with
// the per-request ones. net/http bounds a TLS handshake by
// ReadHeaderTimeout (hs sets no ReadTimeout or WriteTimeout), and an
// HTTP/2 client's preface by a fixed 10 s of its own.
func (l HTTPLimits) apply(hs *http.Server) {
	hs.ReadHeaderTimeout = l.ReadHeaderTimeout
	hs.IdleTimeout = l.IdleTimeout
	next := hs.Handler
	hs.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rc := http.NewResponseController(w)
		// A keep-alive connection keeps the deadline set after the last
		// request.
		_ = rc.SetWriteDeadline(time.Time{})
		if r.Body != nil && r.Body != http.NoBody {
			r.Body = &rateBody{body: r.Body, rc: rc, limits: l, budget: l.BodyTimeout}
		}
		next.ServeHTTP(&deadlineWriter{ResponseWriter: w, rc: rc, timeout: l.WriteTimeout}, r)
		// What the handler wrote last is flushed after it returns.
		_ = rc.SetWriteDeadline(time.Now().Add(l.WriteTimeout))
	})
}

// errSlowBody is the error of a body read cut by the minimum rate.
var errSlowBody = errors.New("request body too slow")

// rateBody enforces HTTPLimits' minimum body rate with read deadlines set
// before each Read. Only time spent waiting in Read counts: while the
// handler does not read (it is applying a batch, or writing results), the
// client owes nothing. Used by one reader at a time, like any body.
//
// A deadline is set only while a Read waits: one left behind would fire
// later (HTTP/1.1 reads the connection in the background once the body is
// done, and a failed read there cancels the request).
type rateBody struct {
	body   io.ReadCloser
	rc     *http.ResponseController
	limits HTTPLimits
	budget time.Duration // waiting the body may still do; at most BodyTimeout
	err    error         // the body was too slow: every later Read fails
}

func (b *rateBody) Read(p []byte) (int, error) {
	start := time.Now()
	// A deadline the transport cannot set (a test's recorder) leaves the
	// body unbounded rather than failing the request.
	_ = b.rc.SetReadDeadline(start.Add(b.budget))
	if b.err != nil {
		return 0, b.err
	}
	n, err := b.body.Read(p)
	if err != nil && errors.Is(err, os.ErrDeadlineExceeded) {
		// The deadline stays in the past, so that net/http does not wait
		// for the rest of the body either: the connection is closed
		// after the error response.
		b.err = fmt.Errorf("%w: below %d bytes/s for %s: %w", errSlowBody, b.limits.MinBodyRate, b.limits.BodyTimeout, err)
		return n, b.err
	}
	_ = b.rc.SetReadDeadline(time.Time{})
	b.budget -= time.Since(start)
	b.budget += time.Duration(n) * time.Second / time.Duration(b.limits.MinBodyRate)
	b.budget = min(b.budget, b.limits.BodyTimeout)
	return n, err
}

func (b *rateBody) Close() error { return b.body.Close() }

// deadlineWriter gives each write of a response WriteTimeout to reach the
// client. The deadline is cleared after each write: one left behind would
// reset an HTTP/2 stream while the handler computes its next line.
// http.ResponseController reaches the writer beneath through Unwrap.
type deadlineWriter struct {
	http.ResponseWriter
	rc      *http.ResponseController
	timeout time.Duration
}

func (w *deadlineWriter) Write(p []byte) (int, error) {
	_ = w.rc.SetWriteDeadline(time.Now().Add(w.timeout))
	defer w.rc.SetWriteDeadline(time.Time{}) //nolint:errcheck // as above
	return w.ResponseWriter.Write(p)
}

// Flush implements http.Flusher for handlers that assert it.
func (w *deadlineWriter) Flush() {
	_ = w.rc.SetWriteDeadline(time.Now().Add(w.timeout))
	_ = w.rc.Flush()
	_ = w.rc.SetWriteDeadline(time.Time{})
}

func (w *deadlineWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
