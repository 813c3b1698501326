package grpc

import (
	"google.golang.org/grpc"

	pb "github.com/protobase/protobase/gen/protobase/v1"
	"github.com/protobase/protobase/internal/auth"
	"github.com/protobase/protobase/internal/engine"
)

// Scan implements pbgrpc.ProtobaseServer; with auth on, each message sent
// re-checks that the key is not revoked.
func (s *Service) Scan(req *pb.ScanRequest, st grpc.ServerStreamingServer[pb.ScanResponse]) error {
	id, err := s.require(st.Context(), auth.RoleRead)
	if err != nil {
		return err
	}
	if err := id.CheckType(req.GetQuery().GetType()); err != nil {
		return toStatus(err)
	}
	sink := &scanSink{id: id, hc: s.heldConnOf(st.Context()), st: st}
	if err := s.e.ScanStream(st.Context(), req, sink); err != nil {
		return toStatus(err)
	}
	return nil
}

var _ engine.EncodingSink = (*scanSink)(nil) // see read.go

// scanSink sends a Scan's responses, re-checking the key (when auth is on)
// before each.
type scanSink struct {
	id *auth.Identity // nil: auth is off
	hc *heldConn
	st grpc.ServerStream
}

// Send implements engine.ScanSink.
func (s *scanSink) Send(m *pb.ScanResponse, h engine.Hold) error {
	if err := s.id.Check(); err != nil { // nil id: auth is off
		h.Release()
		return err
	}
	return sendHeld(s.hc, s.st, m, h)
}

// EncodesOnSend implements engine.EncodingSink: both gRPC's SendMsg (the
// server's codec) and the REST gateway's stream encode a response before
// they return, so the engine may reuse its messages once Send is back.
func (*scanSink) EncodesOnSend() {}
