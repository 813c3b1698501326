// Package gateway serves the Protobase API as REST/JSON, on the routes of
// the google.api.http annotations of protobase.v1 (grpc-gateway), plus the
// OpenAPI description at /openapi.json.
//
// # One code path
//
// The gateway calls the same pbgrpc.ProtobaseServer the gRPC server serves
// (internal/transport/grpc), in process: unary calls through the
// grpc-gateway's generated in-process handlers, stream calls through
// httpStream, which implements the gRPC stream interfaces over the HTTP
// exchange. Validation, limits, batching semantics and every error code
// therefore come from one place, and a REST error carries the same status
// and details (protobase.v1.WriteError) as the gRPC one. The alternative,
// dialling our own gRPC port (what the generated stream handlers expect),
// would add a protobuf encode, an HTTP/2 hop and a second set of limits to
// every call, and it cannot report which batches of a write stream were
// applied when the JSON of a later one is malformed: the proxied stream is
// just cancelled.
//
// # JSON
//
// Records are google.protobuf.Any. They render through the runtime schema
// ({"@type": "type.googleapis.com/shop.User", "id": "1", ...}) and JSON
// input converts back with it (schemajson.Resolver, which follows
// ApplySchema without a restart). Converting JSON to a record encodes it
// deterministically, so equal JSON gives equal bytes.
//
// Client streams (the write streams, Search, Write) take newline-delimited
// JSON: one object per message, each at most MaxMessageBytes (413 and
// RESOURCE_EXHAUSTED beyond). Streamed responses (Scan, Search, Write,
// Watch) are newline-delimited {"result": message} lines, each flushed as
// it is sent, ending with an {"error": status} line on failure, as
// grpc-gateway renders streams.
//
// HTTP/1.1 and HTTP/2 (over TLS, or without it by prior knowledge) share one
// listener through net/http's own Protocols setting (see server.Start);
// bidirectional streams run full duplex on both.
//
// # Cross-site requests
//
// Before a request reaches the API, guard refuses what a web page could
// make a browser send: a Host that is a name not allowed (DNS rebinding),
// an Origin not allowed, a state-changing request without a JSON content
// type; it answers CORS preflights for the origins allowed and 405 with
// Allow for a wrong method (see guard.go).
package gateway

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	pb "github.com/protobase/protobase/gen/protobase/v1"
	pbgrpc "github.com/protobase/protobase/gen/protobase/v1/protobasev1grpc"
	"github.com/protobase/protobase/internal/apierror"
	"github.com/protobase/protobase/internal/apistatus"
	"github.com/protobase/protobase/internal/auth"
	"github.com/protobase/protobase/internal/engine"
	"github.com/protobase/protobase/internal/transport/schemajson"
)

const (
	contentTypeJSON   = "application/json"
	contentTypeNDJSON = "application/x-ndjson"
)

// Options configure a Gateway.
type Options struct {
	// Service is the API implementation, the one the gRPC server serves.
	Service pbgrpc.ProtobaseServer
	// Resolver converts records between JSON and bytes.
	Resolver *schemajson.Resolver
	// MaxMessageBytes bounds one JSON object of a request body (required).
	MaxMessageBytes int
	// Transcode, when set, holds the memory each JSON conversion takes
	// against the server's budget (engine.Engine.TranscodeHold).
	Transcode TranscodeHold
	// OpenAPI is served at /openapi.json when set; its paths also answer
	// OPTIONS and the Allow header of a 405.
	OpenAPI []byte
	// Verifier, when set, authenticates every API request by its
	// "Authorization: Bearer KEY" header (401 without a valid key) and
	// passes the identity to Service through the request context; the
	// service checks role and scope (403). The OpenAPI description stays
	// open.
	Verifier auth.Verifier
	// AllowedOrigins are the browser origins served, CORS included
	// (default: none); AllowedHosts the Host names served besides IP
	// literals and localhost. See guard.
	AllowedOrigins, AllowedHosts []string
}

// Gateway is the REST/JSON handler. It is safe for concurrent use.
type Gateway struct {
	svc   pbgrpc.ProtobaseServer
	codec *codec
	mux   *http.ServeMux
	auth  auth.Verifier // nil: no authentication
	guard *guard
}

var _ http.Handler = (*Gateway)(nil)

// New builds the gateway's routes.
func New(opts Options) (*Gateway, error) {
	if opts.Service == nil || opts.Resolver == nil || opts.MaxMessageBytes <= 0 {
		return nil, errors.New("gateway: Service, Resolver and MaxMessageBytes are required")
	}
	gd, err := newGuard(opts.AllowedOrigins, opts.AllowedHosts, opts.OpenAPI)
	if err != nil {
		return nil, err
	}
	g := &Gateway{svc: opts.Service, codec: newCodec(opts.Resolver, opts.MaxMessageBytes, opts.Transcode), mux: http.NewServeMux(), guard: gd, auth: opts.Verifier}
	gw := runtime.NewServeMux(
		// A form POST to a GET route is not a GET (nor is it JSON).
		runtime.WithDisablePathLengthFallback(),
		runtime.WithRoutingErrorHandler(func(ctx context.Context, mux *runtime.ServeMux, m runtime.Marshaler, w http.ResponseWriter, r *http.Request, code int) {
			if code == http.StatusMethodNotAllowed {
				g.methodNotAllowed(w, r)
				return
			}
			runtime.DefaultRoutingErrorHandler(ctx, mux, m, w, r, code)
		}),
		runtime.WithMarshalerOption(runtime.MIMEWildcard, g.codec),
		runtime.WithForwardResponseRewriter(withRequest),
		// The handlers call the service in process, after ServeHTTP has
		// authenticated the request: no HTTP header is wanted as gRPC
		// metadata. grpc-gateway's default forwards some, and logs an
		// error line for each it cannot (Grpc-Metadata-X-Forwarded-For, a
		// value not ASCII), which any client could then repeat at will.
		runtime.WithIncomingHeaderMatcher(func(string) (string, bool) { return "", false }),
		runtime.WithErrorHandler(func(_ context.Context, _ *runtime.ServeMux, _ runtime.Marshaler, w http.ResponseWriter, r *http.Request, err error) {
			g.writeError(w, r, err)
		}),
	)
	// The generated in-process handlers serve the unary calls and refuse
	// streams; the stream routes registered after them take precedence
	// (runtime.ServeMux tries the most recently added handler first).
	if err := pbgrpc.RegisterProtobaseHandlerServer(context.Background(), gw, g.svc); err != nil {
		return nil, fmt.Errorf("gateway: register handlers: %w", err)
	}
	routes := []struct {
		path string
		h    runtime.HandlerFunc
	}{
		{"/v1/records:insert", g.writes(g.svc.Insert)},
		{"/v1/records:update", g.writes(g.svc.Update)},
		{"/v1/records:upsert", g.writes(g.svc.Upsert)},
		{"/v1/records:remove", g.writes(g.svc.Remove)},
		{"/v1/records:write", g.write},
		{"/v1/search", g.search},
		{"/v1/scan", g.scan},
		{"/v1/watch", g.watch},
	}
	for _, rt := range routes {
		if err := gw.HandlePath(http.MethodPost, rt.path, rt.h); err != nil {
			return nil, fmt.Errorf("gateway: route %s: %w", rt.path, err)
		}
	}
	g.mux.Handle("/", gw)
	if spec := opts.OpenAPI; spec != nil {
		g.mux.HandleFunc("GET /openapi.json", func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", contentTypeJSON)
			_, _ = w.Write(spec)
		})
	}
	return g, nil
}

// ServeHTTP serves one request that guard admits. The body is wrapped so that its decoder
// can flag an oversized message for the error handler.
func (g *Gateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !g.admit(w, r) {
		return
	}
	if g.auth != nil && r.URL.Path != "/openapi.json" {
		id, err := auth.VerifyHeader(r.Context(), g.auth, r.Header.Get("Authorization"))
		if err != nil {
			g.writeError(w, r, err)
			return
		}
		r = r.WithContext(auth.NewContext(r.Context(), id))
	}
	if r.Body != nil {
		r.Body = &body{ReadCloser: r.Body, ctx: r.Context()}
	}
	// A unary answer holds its bytes of the result budget until written.
	ctx, slot := engine.WithAnswerSlot(r.Context())
	defer func() { slot.Take().Release() }()
	g.mux.ServeHTTP(w, r.WithContext(ctx))
}

// writes serves a client-streaming write call: newline-delimited batches
// in, one WriteResponse (or error) out.
func (g *Gateway) writes(call func(grpc.ClientStreamingServer[pb.WriteRequest, pb.WriteResponse]) error) runtime.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request, _ map[string]string) {
		st := newStream[pb.WriteRequest, pb.WriteResponse](g, w, r)
		st.finish(call(st), false)
	}
}

// write serves the bidirectional Write stream: each acknowledged batch
// answers with a line as soon as it is durable.
func (g *Gateway) write(w http.ResponseWriter, r *http.Request, _ map[string]string) {
	if !g.allowed(w, r, pbgrpc.Protobase_Write_FullMethodName) {
		return
	}
	fullDuplex(w)
	st := newStream[pb.WriteStreamRequest, pb.WriteStreamResponse](g, w, r)
	st.finish(g.svc.Write(st), true)
}

// search serves Search: batches of queries in, result lines out, while
// the body is still being read.
func (g *Gateway) search(w http.ResponseWriter, r *http.Request, _ map[string]string) {
	if !g.allowed(w, r, pbgrpc.Protobase_Search_FullMethodName) {
		return
	}
	fullDuplex(w)
	st := newStream[pb.SearchRequest, pb.SearchResponse](g, w, r)
	st.finish(g.svc.Search(st), true)
}

// scan serves Scan: one ScanRequest in, a line per result message out.
func (g *Gateway) scan(w http.ResponseWriter, r *http.Request, _ map[string]string) {
	st := newStream[pb.ScanRequest, pb.ScanResponse](g, w, r)
	req := new(pb.ScanRequest)
	if err := st.RecvMsg(req); err != nil && !errors.Is(err, io.EOF) {
		g.writeError(w, r, err)
		return
	}
	st.finish(g.svc.Scan(req, st), true)
}

// allowed refuses a caller whose key's role does not allow method before
// a full-duplex stream starts: refused there, net/http would not consume
// the unread body and would drop the connection, resetting the next
// request a client sends on it. The service checks again (and checks
// scopes) as for gRPC.
func (g *Gateway) allowed(w http.ResponseWriter, r *http.Request, method string) bool {
	if g.auth == nil {
		return true
	}
	need, _ := auth.MethodRole(method)
	if _, err := auth.Require(r.Context(), true, need); err != nil {
		g.writeError(w, r, err)
		return false
	}
	return true
}

// fullDuplex lets an HTTP/1.1 handler write the response while it still
// reads the body (net/http otherwise stops the body at the first write).
// HTTP/2 streams are full duplex already, and refuse the call harmlessly.
func fullDuplex(w http.ResponseWriter) {
	_ = http.NewResponseController(w).EnableFullDuplex()
}

// invalid turns a decode error into INVALID_ARGUMENT, or RESOURCE_EXHAUSTED
// for an oversized message.
func invalid(err error) error {
	code := apierror.InvalidArgument
	if errors.Is(err, errTooLarge) {
		code = apierror.ResourceExhausted
	}
	return apierror.Wrap(code, err)
}

// statusOf maps err to its status and HTTP code. Statuses come from
// apierror.Status, like gRPC's. Two gateway-specific cases: routing errors
// keep their HTTP code (404, 405), and a request whose body held an
// oversized message is RESOURCE_EXHAUSTED with 413, although the generated
// unary handlers report every decode error as INVALID_ARGUMENT.
func (g *Gateway) statusOf(r *http.Request, err error) (*status.Status, int) {
	var he *runtime.HTTPStatusError
	if errors.As(err, &he) {
		return apistatus.Status(he.Err), he.HTTPStatus
	}
	st := apistatus.Status(err)
	if b, ok := r.Body.(*body); ok && b.tooLarge.Load() {
		if st.Code() != codes.ResourceExhausted {
			p := st.Proto()
			p.Code = int32(codes.ResourceExhausted)
			st = status.FromProto(p)
		}
		return st, http.StatusRequestEntityTooLarge
	}
	return st, apistatus.HTTPStatus(st.Code())
}

// writeError writes a google.rpc.Status as JSON, details included.
func (g *Gateway) writeError(w http.ResponseWriter, r *http.Request, err error) {
	st, code := g.statusOf(r, err)
	w.Header().Set("Content-Type", contentTypeJSON)
	w.WriteHeader(code)
	_, _ = w.Write(g.marshalStatus(st))
	_, _ = w.Write([]byte{'\n'})
}

// writeStreamError ends a streamed response with an {"error": status}
// line, after the HTTP code when nothing was written yet.
func (g *Gateway) writeStreamError(w http.ResponseWriter, r *http.Request, err error, first bool) {
	st, code := g.statusOf(r, err)
	if first {
		w.Header().Set("Content-Type", contentTypeNDJSON)
		w.WriteHeader(code)
	}
	b := g.marshalStatus(st)
	line := make([]byte, 0, len(b)+len(`{"error":}`)+1)
	line = append(line, `{"error":`...)
	line = append(line, b...)
	line = append(line, '}', '\n')
	_, _ = w.Write(line)
}

func (g *Gateway) marshalStatus(st *status.Status) []byte {
	b, err := g.codec.Marshal(st.Proto())
	if err != nil {
		// A detail that does not render (it cannot happen with the
		// engine's details) must not hide the status itself.
		p := st.Proto()
		p.Details = nil
		b, _ = g.codec.Marshal(p)
	}
	return b
}

// writeMessage writes a successful unary-style response to r.
func (g *Gateway) writeMessage(w http.ResponseWriter, r *http.Request, m proto.Message) {
	b, err := g.codec.marshal(r.Context(), m)
	if err != nil {
		g.writeError(w, r, fmt.Errorf("render response as JSON: %w", err))
		return
	}
	w.Header().Set("Content-Type", contentTypeJSON)
	_, _ = w.Write(b)
	_, _ = w.Write([]byte{'\n'})
}
