package grpc

import (
	"google.golang.org/grpc"

	pb "github.com/protobase/protobase/gen/protobase/v1"
	"github.com/protobase/protobase/internal/auth"
	"github.com/protobase/protobase/internal/engine"
)

// Export implements pbgrpc.ProtobaseServer (read role). A scoped key exports
// only types in its scope: naming another is PERMISSION_DENIED, naming
// none exports the scope's types, and the schema sent is the part the key
// sees in GetSchema. With auth on, each chunk re-checks that the key is
// not revoked.
func (s *Service) Export(req *pb.ExportRequest, st grpc.ServerStreamingServer[pb.ExportChunk]) error {
	id, err := s.require(st.Context(), auth.RoleRead)
	if err != nil {
		return err
	}
	opts := engine.ExportOptions{Types: req.GetTypes(), Versions: req.GetVersions()}
	hc := s.heldConnOf(st.Context())
	// A chunk of records holds its bytes of the result budget until gRPC
	// has written it (held.go).
	send := func(m *pb.ExportChunk, h engine.Hold) error {
		if err := id.Check(); err != nil {
			h.Release()
			return err
		}
		return sendHeld(hc, st, m, h)
	}
	if id != nil {
		opts.Allows = id.AllowsType
		opts.Filter = func(r *pb.GetSchemaResponse) *pb.GetSchemaResponse { return auth.FilterSchema(id, r) }
	}
	if err := s.e.Export(st.Context(), opts, send); err != nil {
		return toStatus(err)
	}
	return nil
}
