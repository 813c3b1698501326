package client

import (
	"errors"
	"io"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// The waits between tries to resume a watch: the first, and the most.
const (
	resumeFirstWait = 100 * time.Millisecond
	resumeMaxWait   = 5 * time.Second
)

// restart starts a new stream after the last position delivered when
// the failure err of the current one may pass (the server or the
// connection is away), after a wait that grows with each try since the
// last message received; it returns the error that ends the watch
// instead: err itself when resuming cannot help, is off, or gave up.
func (w *Watcher) restart(err error) error {
	if w.noResume || w.closed.Load() || w.ctx.Err() != nil || !resumable(err) {
		return err
	}
	// Every change of the messages received so far was delivered
	// (receive is called once they were): w.pos is after all of them,
	// or after a later progress mark.
	w.req.Start = StartAfter(w.pos)
	if w.failedAt.IsZero() {
		w.failedAt, w.wait = time.Now(), resumeFirstWait
	}
	for {
		if w.resumeFor > 0 && time.Since(w.failedAt)+w.wait > w.resumeFor {
			return err
		}
		t := time.NewTimer(w.wait)
		select {
		case <-w.ctx.Done():
			t.Stop()
			return status.FromContextError(w.ctx.Err()).Err()
		case <-t.C:
		}
		w.wait = min(2*w.wait, resumeMaxWait)
		// gRPC waits for its own backoff (up to two minutes) before
		// dialing a server that went away again; these waits are the
		// ones that count.
		w.c.conn.ResetConnectBackoff()
		if oerr := w.open(); oerr != nil {
			if !resumable(oerr) {
				return oerr
			}
			err = oerr
			continue
		}
		w.resumes.Add(1)
		return nil
	}
}

// resumable reports whether a watch failing with err may go on with a
// new stream: the server or the connection is away (UNAVAILABLE), or the
// stream ended without a status. Any other status says something a new
// stream would meet again, or that must not be skipped (OUT_OF_RANGE).
func resumable(err error) bool {
	if errors.Is(err, io.EOF) {
		return true
	}
	return status.Code(err) == codes.Unavailable
}

// Resumes is how many times the watch started a new stream after its
// stream failed. It may be called from any goroutine.
func (w *Watcher) Resumes() int64 { return w.resumes.Load() }
