package grpc

import (
	"google.golang.org/grpc"

	pb "github.com/protobase/protobase/gen/protobase/v1"
	"github.com/protobase/protobase/internal/auth"
	"github.com/protobase/protobase/internal/grpcbuf"
)

// Watch implements pb.ProtobaseServer (read role). A scoped key may watch
// only types in its scope: naming another is PERMISSION_DENIED before
// anything is sent. With auth on, each message sent re-checks that the key
// is not revoked.
//
// The engine hands over each response as its wire bytes, sent as a
// grpcbuf.Frame: the codec copies them as they are (Codec.Marshal), and
// the REST gateway's stream decodes them (gateway/watch.go).
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
	send := func(b []byte) error {
		if id != nil {
			if err := id.Check(); err != nil {
				return err
			}
		}
		f.B = b
		err := st.SendMsg(&f)
		f.B = nil
		return err
	}
	if err := s.e.Watch(st.Context(), req, send); err != nil {
		return toStatus(err)
	}
	return nil
}
