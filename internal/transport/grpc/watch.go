package grpc

import (
	"google.golang.org/grpc"

	pb "github.com/protobase/protobase/gen/protobase/v1"
	"github.com/protobase/protobase/internal/auth"
	"github.com/protobase/protobase/internal/engine"
	"github.com/protobase/protobase/internal/grpcbuf"
)

// Watch implements pbgrpc.ProtobaseServer (read role). A scoped key may watch
// only types in its scope: naming another is PERMISSION_DENIED before
// anything is sent. With auth on, each message sent re-checks that the key
// is not revoked.
//
// The watch service (internal/watch) hands over each response as its
// wire bytes in a buffer of grpcbuf.Pool, sent as a grpcbuf.Frame that owns it: the codec gives the
// buffer to gRPC without a copy (Codec.Marshal), and the REST gateway's
// stream decodes the bytes (gateway/watch.go).
func (s *Service) Watch(req *pb.WatchRequest, st grpc.ServerStreamingServer[pb.WatchResponse]) error {
	id, err := s.require(st.Context(), auth.RoleRead)
	if err != nil {
		return err
	}
	for _, t := range req.GetTypes() {
		if err := id.CheckType(t); err != nil {
			return toStatus(err)
		}
	}
	var f grpcbuf.Frame
	hc := s.heldConnOf(st.Context())
	send := func(bp *[]byte, h engine.Hold) error {
		if err := id.Check(); err != nil { // nil id: auth is off
			grpcbuf.Pool.Put(bp)
			h.Release()
			return err
		}
		f.B, f.Owned = *bp, bp
		err := sendHeld(hc, st, &f, h)
		f.B, f.Owned = nil, nil
		return err
	}
	// A watch with nothing to send would check the key only at its next
	// message: end it when the key is revoked.
	ctx, stop := id.WithRevocation(st.Context())
	defer stop()
	if err := s.opts.Watches.Watch(ctx, req, send); err != nil {
		if rerr := id.Check(); rerr != nil {
			return toStatus(rerr)
		}
		return toStatus(err)
	}
	return nil
}
