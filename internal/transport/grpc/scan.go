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
	hc := s.heldConnOf(st.Context())
	send := func(m *pb.ScanResponse, h engine.Hold) error {
		if err := id.Check(); err != nil { // nil id: auth is off
			h.Release()
			return err
		}
		return sendHeld(hc, st, m, h)
	}
	// Both gRPC's SendMsg (the server's codec) and the REST gateway's
	// stream encode a response before they return: the engine may reuse
	// its messages once Send is back.
	sio := engine.ScanIO{Send: send, SendEncodes: true}
	if err := s.e.ScanStream(st.Context(), req, sio); err != nil {
		return toStatus(err)
	}
	return nil
}
