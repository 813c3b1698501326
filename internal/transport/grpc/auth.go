package grpc

import (
	"context"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	reflectionv1 "google.golang.org/grpc/reflection/grpc_reflection_v1"
	reflectionv1alpha "google.golang.org/grpc/reflection/grpc_reflection_v1alpha"

	pbgrpc "github.com/protobase/protobase/gen/protobase/v1/protobasev1grpc"
	"github.com/protobase/protobase/internal/auth"
)

// Authentication on gRPC: the interceptors verify the authorization
// metadata once per call or stream, check the role the method needs
// (auth.MethodRole), and put the Identity in the context. The service
// methods then check scope per record and per query (they also serve the
// REST gateway, which authenticates in its own handler). Health needs no
// key.

// UnaryInterceptor authenticates unary calls; a no-op with auth off.
func (s *Service) UnaryInterceptor() grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		plainAnswers(ctx)
		derr := takeDecodeErr(req) // always taken: the codec's map must not keep it
		ctx, err := s.authenticate(ctx, info.FullMethod)
		if err != nil {
			return nil, toStatus(err)
		}
		if derr != nil {
			return nil, toStatus(derr)
		}
		if !answersHeld(info.FullMethod) {
			return handler(ctx, req)
		}
		call := new(unaryCall)
		call.Context = ctx
		resp, err := handler(call, req)
		return heldAnswer(s.heldConnOf(ctx), &call.r, resp, err, call.Slot().Take()), err
	}
}

// plainAnswers makes a call whose request came compressed answer
// uncompressed: gRPC answers in the request's compression, and a
// compressed answer is a copy of the marshalled one, which gRPC frees,
// with the release buffer behind it (sendHeld), as soon as it has the
// copy: the answer's bytes of the result budget would be given back while
// the copy waits, unread, in gRPC's queues.
func plainAnswers(ctx context.Context) {
	st, ok := grpc.ServerTransportStreamFromContext(ctx).(interface{ RecvCompress() string })
	if ok && st.RecvCompress() != "" && st.RecvCompress() != "identity" {
		_ = grpc.SetSendCompressor(ctx, "identity") // identity is always allowed
	}
}

// answersHeld reports whether a unary method's answers hold bytes of the
// result budget until written (engine.AnswerSlot).
func answersHeld(method string) bool {
	return method == pbgrpc.Protobase_Get_FullMethodName || method == pbgrpc.Protobase_Query_FullMethodName
}

// StreamInterceptor authenticates a stream once, when it opens; the
// service methods re-check revocation per message (one atomic load).
func (s *Service) StreamInterceptor() grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		plainAnswers(ss.Context())
		if !info.IsClientStream {
			ss = decodeStream{ss}
		}
		ctx, err := s.authenticate(ss.Context(), info.FullMethod)
		if err != nil {
			return toStatus(err)
		}
		if ctx == ss.Context() {
			return handler(srv, ss)
		}
		w := &authStream{ServerStream: ss, ctx: ctx}
		if id, _ := auth.FromContext(ctx); auth.IsReflection(info.FullMethod) && id.Scoped() {
			w.id, w.isRecord = id, s.isRecordType
		} else if !auth.IsReflection(info.FullMethod) && !strings.HasPrefix(info.FullMethod, "/protobase.v1.") {
			// Streams of other services (the lab) are checked for
			// revocation here; the protobase.v1 methods do it themselves.
			w.id = id
		}
		return handler(srv, w)
	}
}

func (s *Service) authenticate(ctx context.Context, method string) (context.Context, error) {
	if !s.opts.Auth {
		return ctx, nil
	}
	need, open := auth.MethodRole(method)
	if open {
		return ctx, nil
	}
	var header string
	if md, ok := metadata.FromIncomingContext(ctx); ok {
		if v := md.Get("authorization"); len(v) > 0 {
			header = v[0]
		}
	}
	id, err := auth.VerifyHeader(ctx, s.opts.Keys, header)
	if err != nil {
		return ctx, err
	}
	ctx = auth.NewContext(ctx, id)
	if _, err := auth.Require(ctx, true, need); err != nil {
		return ctx, err
	}
	if id.Scoped() && auth.WholeStore(method) {
		return ctx, auth.ErrScopedDenied(id, method)
	}
	return ctx, nil
}

func (s *Service) isRecordType(name string) bool {
	_, ok := s.e.Schema().Lookup(name)
	return ok
}

// authStream carries the authenticated context. For scoped reflection it
// hides the record types outside the scope: a symbol lookup of one is
// rewritten to a name that does not resolve (NOT_FOUND), and the file
// descriptors sent back lose those messages.
type authStream struct {
	grpc.ServerStream
	ctx      context.Context
	id       *auth.Identity
	isRecord func(string) bool // set for scoped reflection streams only
}

func (w *authStream) Context() context.Context { return w.ctx }

func (w *authStream) RecvMsg(m any) error {
	if err := w.id.Check(); err != nil {
		return toStatus(err)
	}
	if err := w.ServerStream.RecvMsg(m); err != nil || w.isRecord == nil {
		return err
	}
	switch r := m.(type) {
	case *reflectionv1.ServerReflectionRequest:
		if q, ok := r.MessageRequest.(*reflectionv1.ServerReflectionRequest_FileContainingSymbol); ok && w.hiddenSymbol(q.FileContainingSymbol) {
			q.FileContainingSymbol = "protobase.hidden"
		}
	case *reflectionv1alpha.ServerReflectionRequest: //nolint:staticcheck // see v1alphaRequest
		w.v1alphaRequest(r)
	}
	return nil
}

// v1alphaRequest and v1alphaResponse filter the deprecated v1alpha
// protocol, which the server still serves for older tools: left
// unfiltered, it would show a scoped key every type.
//
//nolint:staticcheck // v1alpha is deprecated, and served
func (w *authStream) v1alphaRequest(r *reflectionv1alpha.ServerReflectionRequest) {
	if q, ok := r.MessageRequest.(*reflectionv1alpha.ServerReflectionRequest_FileContainingSymbol); ok && w.hiddenSymbol(q.FileContainingSymbol) {
		q.FileContainingSymbol = "protobase.hidden"
	}
}

//nolint:staticcheck // v1alpha is deprecated, and served
func (w *authStream) v1alphaResponse(r *reflectionv1alpha.ServerReflectionResponse) {
	if fd := r.GetFileDescriptorResponse(); fd != nil {
		w.filter(fd.FileDescriptorProto)
	}
}

func (w *authStream) SendMsg(m any) error {
	if w.isRecord != nil {
		switch r := m.(type) {
		case *reflectionv1.ServerReflectionResponse:
			if fd := r.GetFileDescriptorResponse(); fd != nil {
				w.filter(fd.FileDescriptorProto)
			}
		case *reflectionv1alpha.ServerReflectionResponse: //nolint:staticcheck // see v1alphaRequest
			w.v1alphaResponse(r)
		}
	}
	return w.ServerStream.SendMsg(m)
}

func (w *authStream) filter(files [][]byte) {
	for i, b := range files {
		files[i] = auth.FilterFileDescriptor(w.id, b, w.isRecord)
	}
}

// hiddenSymbol reports whether sym is, or is inside, a record type outside
// the scope ("shop.User", "shop.User.name").
func (w *authStream) hiddenSymbol(sym string) bool {
	for i := len(sym); i > 0; i = strings.LastIndexByte(sym[:i], '.') {
		if name := sym[:i]; w.isRecord(name) && !w.id.AllowsType(name) {
			return true
		}
	}
	return false
}
