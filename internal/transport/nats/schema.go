package nats

import (
	pb "github.com/protobase/protobase/gen/protobase/v1"
	"github.com/protobase/protobase/internal/auth"
)

// SubjectSchemaApply serves ApplySchema (schema role), in either mode.
const SubjectSchemaApply = "schema.apply"

// schemaApply applies a schema change. As over gRPC, a scoped key's change
// is refused whole when its plan, the one that commits, would touch a
// record type outside the scope.
func (s *Service) schemaApply(r *request) {
	req := new(pb.ApplySchemaRequest)
	if err := s.decode(r, req); err != nil {
		s.fail(r, err)
		return
	}
	resp, err := s.e.ApplySchemaApproved(s.ctx, req, r.id.ApprovePlan)
	if err != nil {
		s.fail(r, auth.CheckPlanError(r.id, err))
		return
	}
	if resp.GetApplied() {
		p := resp.GetPlan()
		s.log.Info("audit: schema applied", "by", r.id.ActorName(), "version", resp.GetVersion(), "transport", "nats",
			"types_added", p.GetTypesAdded(), "types_changed", len(p.GetTypesChanged()), "types_dropped", len(p.GetTypesDropped()),
			"indexes_dropped", len(p.GetIndexesDropped()))
	}
	s.reply(r, resp)
}
