package gateway

import (
	"context"
	"errors"
	"io"
	"net/http"

	"google.golang.org/grpc/codes"

	pb "github.com/protobase/protobase/gen/protobase/v1"
	"github.com/protobase/protobase/internal/apierror"
)

// errStopping ends the REST watches still open when the server begins to
// stop. UNAVAILABLE says "try again": a watcher resumes, on this server
// once it is back or on another one, after the last position it received.
var errStopping = apierror.New(codes.Unavailable, "the server is stopping: watch again after the last position received")

// watch serves Watch: one WatchRequest in, a {"result": WatchResponse}
// line per message out, each flushed as it is sent, for as long as the
// client reads and the server runs.
//
// The body is read to its end before the watch starts, and a second
// object in it is INVALID_ARGUMENT. Reading it whole matters beyond
// strictness: net/http notices an HTTP/1.1 client that goes away (and
// cancels the request's context) only once the body is consumed, and a
// watch that sends nothing for seconds must not outlive its client.
// What bounds a watch that does not end is in server/http_limits.go: no
// total write timeout, WriteTimeout per line (a client that stops reading
// is cut, holding at most one response), and StopStreams at shutdown.
func (g *Gateway) watch(w http.ResponseWriter, r *http.Request, _ map[string]string) {
	st := newStream[pb.WatchRequest, pb.WatchResponse](g, w, r)
	req := new(pb.WatchRequest)
	if err := st.RecvMsg(req); err != nil && !errors.Is(err, io.EOF) {
		g.writeError(w, r, err)
		return
	}
	switch err := st.RecvMsg(new(pb.WatchRequest)); {
	case err == nil:
		g.writeError(w, r, apierror.New(codes.InvalidArgument, "a watch takes one WatchRequest object; the body holds more"))
		return
	case !errors.Is(err, io.EOF):
		g.writeError(w, r, err)
		return
	}
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	stop := context.AfterFunc(g.streams, cancel)
	defer stop()
	st.ctx = ctx
	err := g.svc.Watch(req, st)
	if g.streams.Err() != nil && r.Context().Err() == nil {
		err = errStopping
	}
	st.finish(err, true)
}

// StopStreams ends the streams that only the server can end, the REST
// watches, with UNAVAILABLE. The server calls it when it begins to stop
// (http.Server.RegisterOnShutdown): a graceful shutdown waits for running
// requests, and a watch never finishes by itself.
func (g *Gateway) StopStreams() { g.stopStreams() }
