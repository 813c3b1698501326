package engine_test

import (
	"bytes"
	"fmt"
	"sync/atomic"
	"testing"

	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/anypb"

	pb "github.com/protobase/protobase/gen/protobase/v1"
	"github.com/protobase/protobase/internal/apierror"
	"github.com/protobase/protobase/internal/engine"
	"github.com/protobase/protobase/internal/store/etcd/etcdtest"
	"github.com/protobase/protobase/internal/testschema"
)

// TestSharedRefusalJudgedAtOneMoment: on a store shared by two servers, a
// transaction conditions on a user being absent (version 0) and inserts
// user id. Between its condition read and its record read the other
// server inserts user id, so the records refuse the insert. The refusal
// stands only when its conditions and that refusal held at one moment:
//   - "absent again": the other server removes user id before the refusal
//     is judged, so no moment saw the user absent (the condition) and
//     present (the refusal); checked again, the batch goes through.
//     Judged on its conditions read again alone, it would end
//     ALREADY_EXISTS, which a client takes for final;
//   - "present": the condition no longer holds: ABORTED, which a client
//     retries;
//   - "other key": the condition names another user, still absent: the
//     refusal stands, ALREADY_EXISTS.
func TestSharedRefusalJudgedAtOneMoment(t *testing.T) {
	ep := etcdtest.Start(t, etcdtest.Roomy)
	e, _ := openShared(t, ep)
	other, _ := openSharedOn(t, ep, "/pipe/", engine.Options{})
	write := func(op engine.Op, rec *anypb.Any) {
		t.Helper()
		w := other.NewWriter()
		defer w.Close()
		if err := w.Apply(t.Context(), engine.Batch{Op: op, Records: []*anypb.Any{rec}}); err != nil {
			t.Errorf("the other server's %v: %v", op, err)
		}
	}
	rt := e.Schema().Types[protoreflect.FullName("shop.User")]
	for i, c := range []struct {
		name      string
		condOn    int // the user the condition names, by its offset from id
		removes   bool
		want      apierror.Code // 0: applied
		refusedAt int32         // refusals judged
	}{
		{"absent again", 0, true, 0, 1},
		{"present", 0, false, apierror.Aborted, 1},
		{"other key", 1, false, apierror.AlreadyExists, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			id := 10 * (i + 1)
			var inserted, refused atomic.Int32
			engine.SetConditionsReadHook(t, func() {
				if inserted.Add(1) == 1 {
					write(engine.OpInsert, sharedUser(t, other, id))
				}
			})
			engine.SetRefusedHook(t, func() {
				if refused.Add(1) == 1 && c.removes {
					write(engine.OpRemove, sharedUser(t, other, id))
				}
			})
			mine, err := testschema.Record(rt.Desc, fmt.Sprintf(`{"id": %d, "email": "t%d@example.com", "name": "mine"}`, id, id))
			if err != nil {
				t.Fatal(err)
			}
			zero := uint64(0)
			w := e.NewWriter()
			defer w.Close()
			err = w.Apply(t.Context(), engine.Batch{Op: engine.OpInsert, Records: []*anypb.Any{mine},
				Conditions: []*pb.Condition{{Target: &pb.Condition_Key{Key: sharedUser(t, e, id+c.condOn)}, Version: &zero}}})
			if codeOf(err) != c.want {
				t.Fatalf("the transaction: %v; want code %v", err, c.want)
			}
			if refused.Load() != c.refusedAt {
				t.Fatalf("%d refusals judged, want %d", refused.Load(), c.refusedAt)
			}
			if c.want != 0 {
				return
			}
			got, err := e.Get(t.Context(), mine)
			if err != nil || got == nil || !bytes.Equal(got.Value, mine.Value) {
				t.Fatalf("user %d = %v, %v; want the transaction's", id, got, err)
			}
		})
	}
}
