package auth

import (
	"errors"
	"fmt"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/descriptorpb"

	pb "github.com/protobase/protobase/gen/protobase/v1"
	"github.com/protobase/protobase/internal/schema"
)

// FilterSchema returns the part of a GetSchema response that id may see:
// the record types in its scope, their descriptors, and the source of the
// files that declare no record type outside the scope. Messages that are
// record types outside the scope are removed from the descriptors; helper
// messages (not record types) stay, since in-scope types may use them. An
// unscoped identity sees everything; a nil one (no keys) gets resp itself.
// Every identity learns its key's role (key_role), so that a client can
// offer only what the role allows.
func FilterSchema(id *Identity, resp *pb.GetSchemaResponse) *pb.GetSchemaResponse {
	if id == nil {
		return resp
	}
	if !id.Scoped() {
		return &pb.GetSchemaResponse{Version: resp.Version, Files: resp.Files, Types: resp.Types,
			Descriptors: resp.Descriptors, WriteLimits: resp.WriteLimits, KeyRole: id.Role.String()}
	}
	hidden := map[string]bool{}
	out := &pb.GetSchemaResponse{Version: resp.Version, Files: map[string]string{},
		WriteLimits: resp.WriteLimits, KeyScope: id.Scope.Types(), KeyRole: id.Role.String()}
	for _, t := range resp.Types {
		if id.AllowsType(t.Name) {
			out.Types = append(out.Types, t)
		} else {
			hidden[t.Name] = true
		}
	}
	if resp.Descriptors != nil {
		out.Descriptors = &descriptorpb.FileDescriptorSet{}
		for _, f := range resp.Descriptors.File {
			f, stripped := stripFile(f, hidden)
			out.Descriptors.File = append(out.Descriptors.File, f)
			if src, ok := resp.Files[f.GetName()]; ok && !stripped {
				out.Files[f.GetName()] = src
			}
		}
	}
	return out
}

// stripFile returns f without the messages named in hidden (at any
// nesting depth), and whether any was removed; f itself is not modified.
func stripFile(f *descriptorpb.FileDescriptorProto, hidden map[string]bool) (*descriptorpb.FileDescriptorProto, bool) {
	prefix := f.GetPackage()
	if prefix != "" {
		prefix += "."
	}
	kept, stripped := stripMessages(f.MessageType, prefix, hidden)
	if !stripped {
		return f, false
	}
	c := proto.Clone(f).(*descriptorpb.FileDescriptorProto)
	c.MessageType = kept
	return c, true
}

func stripMessages(ms []*descriptorpb.DescriptorProto, prefix string, hidden map[string]bool) ([]*descriptorpb.DescriptorProto, bool) {
	var out []*descriptorpb.DescriptorProto
	stripped := false
	for _, m := range ms {
		name := prefix + m.GetName()
		if hidden[name] {
			stripped = true
			continue
		}
		nested, s := stripMessages(m.NestedType, name+".", hidden)
		if s {
			m = proto.Clone(m).(*descriptorpb.DescriptorProto)
			m.NestedType = nested
			stripped = true
		}
		out = append(out, m)
	}
	return out, stripped
}

// FilterFileDescriptor strips the record types outside id's scope from one
// serialized FileDescriptorProto (a gRPC reflection answer). isRecord
// reports whether a full name is a record type. Bytes that do not decode
// are returned as they are: they are not from the runtime schema.
func FilterFileDescriptor(id *Identity, b []byte, isRecord func(string) bool) []byte {
	if !id.Scoped() {
		return b
	}
	f := &descriptorpb.FileDescriptorProto{}
	if proto.Unmarshal(b, f) != nil {
		return b
	}
	hidden := map[string]bool{}
	collectHidden(f.MessageType, packagePrefix(f), id, isRecord, hidden)
	if len(hidden) == 0 {
		return b
	}
	f, _ = stripFile(f, hidden)
	out, err := proto.Marshal(f)
	if err != nil {
		return nil
	}
	return out
}

func packagePrefix(f *descriptorpb.FileDescriptorProto) string {
	if p := f.GetPackage(); p != "" {
		return p + "."
	}
	return ""
}

func collectHidden(ms []*descriptorpb.DescriptorProto, prefix string, id *Identity, isRecord func(string) bool, hidden map[string]bool) {
	for _, m := range ms {
		name := prefix + m.GetName()
		if isRecord(name) && !id.AllowsType(name) {
			hidden[name] = true
		}
		collectHidden(m.NestedType, name+".", id, isRecord, hidden)
	}
}

// CheckPlanError is CheckPlan for a change the planner refused (err, from
// a dry run): a problem with a record type outside id's scope would tell
// the key that type's name and its records' count, so the change is then
// refused as touching types outside the scope, naming none. Any other
// error is returned as it is.
func CheckPlanError(id *Identity, err error) error {
	var pe *schema.PlanError
	if !id.Scoped() || !errors.As(err, &pe) {
		return err
	}
	for _, t := range pe.Types {
		if !id.AllowsType(t) {
			return permissionDenied(fmt.Sprintf("API key %q may not change record types outside its scope, which this change would drop or change", id.Name))
		}
	}
	return err
}

// ApprovePlan is CheckPlan as the engine's approval of the plans of id's
// schema change (engine.ApplySchemaApproved).
func (id *Identity) ApprovePlan(p *pb.SchemaPlan) error { return CheckPlan(id, p) }

// CheckPlan refuses a schema plan touching a record type outside id's
// scope: a scoped key may add, change and drop only its own types and
// their indexes.
func CheckPlan(id *Identity, p *pb.SchemaPlan) error {
	if !id.Scoped() || p == nil {
		return nil
	}
	var touched []string
	touched = append(touched, p.TypesAdded...)
	for _, c := range p.TypesChanged {
		touched = append(touched, c.Type)
	}
	for _, d := range p.TypesDropped {
		touched = append(touched, d.Type)
	}
	for _, ix := range append(append([]*pb.IndexChange(nil), p.IndexesAdded...), p.IndexesDropped...) {
		touched = append(touched, ix.Type)
	}
	for _, t := range touched {
		if !id.AllowsType(t) {
			return permissionDenied(fmt.Sprintf("API key %q may not change record type %s", id.Name, t))
		}
	}
	return nil
}
