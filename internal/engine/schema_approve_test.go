package engine_test

import (
	"errors"
	"sync/atomic"
	"testing"

	pb "github.com/protobase/protobase/gen/protobase/v1"
	"github.com/protobase/protobase/internal/engine"
	"github.com/protobase/protobase/internal/store/etcd/etcdtest"
)

const approveProto = `syntax = "proto3";
package inv;
import "protobase/v1/options.proto";
message Item {
  option (protobase.v1.record) = { primary_key: "id" };
  int64 id = 1;
}
`

// The plan a change's approval sees is the one that commits. Two servers
// share an etcd store: A plans a change (adding inv.Note) and has it
// approved; before it commits, B adds inv.Secret; A's commit finds the
// schema changed, plans again from B's, and asks again. A's request, the
// whole schema naming inv.Secret in allow_drop, now drops it, and the
// approval (a scoped key's check, in the transports) refuses that: a
// check made on a dry run before the change would have passed.
func TestApplySchemaApprovesThePlanCommitted(t *testing.T) {
	ep := etcdtest.Start(t, etcdtest.Roomy)
	open := func() *engine.Engine {
		e, err := engine.Open(t.Context(), etcdStore(t, ep, "/approve/"), engine.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { e.Close() })
		return e
	}
	a, b := open(), open()
	files := func(src string) map[string]string { return map[string]string{"inv.proto": src} }
	if _, err := a.ApplySchema(t.Context(), &pb.ApplySchemaRequest{Files: files(approveProto)}); err != nil {
		t.Fatal(err)
	}
	withSecret := approveProto + "message Secret {\n  option (protobase.v1.record) = { primary_key: \"id\" };\n  int64 id = 1;\n}\n"
	withNote := approveProto + "message Note {\n  option (protobase.v1.record) = { primary_key: \"id\" };\n  int64 id = 1;\n}\n"
	var fired atomic.Bool
	engine.SetPlannedHook(t, func() {
		if fired.CompareAndSwap(false, true) {
			if _, err := b.ApplySchema(t.Context(), &pb.ApplySchemaRequest{Files: files(withSecret)}); err != nil {
				t.Errorf("B's change: %v", err)
			}
		}
	})
	denied := errors.New("denied: the plan drops inv.Secret")
	var plans []*pb.SchemaPlan
	_, err := a.ApplySchemaApproved(t.Context(), &pb.ApplySchemaRequest{Files: files(withNote), AllowDrop: []string{"inv.Secret"}},
		func(p *pb.SchemaPlan) error {
			plans = append(plans, p)
			for _, d := range p.GetTypesDropped() {
				if d.GetType() == "inv.Secret" {
					return denied
				}
			}
			return nil
		})
	if !errors.Is(err, denied) || len(plans) != 2 {
		t.Fatalf("A's change: %v after %d plans; want the approval's refusal of the second plan", err, len(plans))
	}
	if _, ok := a.Schema().Types["inv.Secret"]; !ok {
		t.Fatal("inv.Secret dropped")
	}
	if _, ok := a.Schema().Types["inv.Note"]; ok {
		t.Fatal("inv.Note added by the refused change")
	}
}
