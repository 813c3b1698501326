package grpc

import (
	"google.golang.org/grpc"

	pb "github.com/protobase/protobase/gen/protobase/v1"
	"github.com/protobase/protobase/internal/auth"
)

// Watch implements pb.ProtobaseServer (read role). A scoped key may watch
// only types in its scope: naming another is PERMISSION_DENIED before
// anything is sent. With auth on, each message sent re-checks that the key
// is not revoked.
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
	send := st.Send
	if id != nil {
		send = func(m *pb.WatchResponse) error {
			if err := id.Check(); err != nil {
				return err
			}
			return st.Send(m)
		}
	}
	if err := s.e.Watch(st.Context(), req, send); err != nil {
		return toStatus(err)
	}
	return nil
}
