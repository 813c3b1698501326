package gateway

import (
	"errors"
	"fmt"
	"io"
	"net/http"

	"google.golang.org/protobuf/proto"

	pb "github.com/protobase/protobase/gen/protobase/v1"
	"github.com/protobase/protobase/internal/apierror"
	"github.com/protobase/protobase/internal/grpcbuf"
)

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
// is cut, holding at most one response); a stopping server ends it
// (watch.Service.Stop, UNAVAILABLE).
func (g *Gateway) watch(w http.ResponseWriter, r *http.Request, _ map[string]string) {
	st := newStream[pb.WatchRequest, pb.WatchResponse](g, w, r)
	req := new(pb.WatchRequest)
	if err := st.RecvMsg(req); err != nil && !errors.Is(err, io.EOF) {
		g.writeError(w, r, err)
		return
	}
	switch err := st.RecvMsg(new(pb.WatchRequest)); {
	case err == nil:
		g.writeError(w, r, apierror.New(apierror.InvalidArgument, "a watch takes one WatchRequest object; the body holds more"))
		return
	case !errors.Is(err, io.EOF):
		g.writeError(w, r, err)
		return
	}
	st.finish(g.svc.Watch(req, watchStream{st}), true)
}

// watchStream renders the responses the gRPC service sends as wire bytes
// (a grpcbuf.Frame: the watch service encodes them itself) by decoding them
// first; JSON needs the message.
type watchStream struct {
	*httpStream[pb.WatchRequest, pb.WatchResponse]
}

func (s watchStream) SendMsg(m any) error {
	if f, ok := m.(*grpcbuf.Frame); ok {
		resp := new(pb.WatchResponse)
		if err := proto.Unmarshal(f.B, resp); err != nil {
			return fmt.Errorf("decode a watch response: %w", err)
		}
		m = resp
	}
	return s.httpStream.SendMsg(m)
}
