package nats

import (
	"google.golang.org/protobuf/proto"

	pb "github.com/protobase/protobase/gen/protobase/v1"
	"github.com/protobase/protobase/internal/auth"
)

// SubjectSchemaApply serves ApplySchema (schema role), in either mode.
const SubjectSchemaApply = "schema.apply"

// schemaApply applies a schema change. As over gRPC, a scoped key's change
// is planned first (as a dry run) and refused whole when it would touch a
// record type outside the scope.
func (s *Service) schemaApply(r *request) {
	req := new(pb.ApplySchemaRequest)
	if err := s.decode(r, req); err != nil {
		s.fail(r, err)
		return
	}
	if r.id.Scoped() {
		dry := proto.CloneOf(req)
		dry.DryRun = true
		plan, err := s.e.ApplySchema(s.ctx, dry)
		if err == nil {
			err = auth.CheckPlan(r.id, plan.GetPlan())
		} else {
			err = auth.CheckPlanError(r.id, err)
		}
		if err != nil {
			s.fail(r, err)
			return
		}
	}
	resp, err := s.e.ApplySchema(s.ctx, req)
	if err != nil {
		s.fail(r, err)
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
