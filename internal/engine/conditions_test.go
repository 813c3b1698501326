package engine_test

import (
	"errors"
	"fmt"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	pb "github.com/protobase/protobase/gen/protobase/v1"
	"github.com/protobase/protobase/internal/apierror"
	"github.com/protobase/protobase/internal/engine"
)

// FuzzConditions applies batches with one hostile condition (any bytes
// that decode as a Condition) against the shop schema, as a pure check and
// with a record: the engine never panics, and every refusal is an
// *apierror.Error naming condition 0 with a reason: INVALID_ARGUMENT for a
// malformed condition, RESOURCE_EXHAUSTED past the read bound, ABORTED for
// one that does not hold.
func FuzzConditions(f *testing.F) {
	te := openEngine(f, f.TempDir(), engine.Options{MaxConditionReads: 3})
	te.Apply(map[string]string{"shop.proto": shopProto})
	te.MustWrite(engine.OpInsert, []*anypb.Any{
		te.Rec("shop.User", `{"id": 1, "name": "ann", "email": "a"}`),
		te.Rec("shop.User", `{"id": 2, "name": "bob", "email": "b"}`),
		te.Rec("shop.Member", `{"org": "acme", "id": 7, "handle": "h"}`),
	})
	u1 := te.Rec("shop.User", `{"id": 1, "name": "ann", "email": "a"}`)
	one := uint64(1)
	for _, c := range []*pb.Condition{
		{Target: &pb.Condition_Record{Record: 0}, Version: &one},
		{Target: &pb.Condition_Record{Record: 3}, Filter: `name = "ann"`},
		{Target: &pb.Condition_Key{Key: te.Rec("shop.Member", `{"org": "acme", "id": 7}`)}, Filter: `handle prefix "h" and id > 1`},
		{Target: &pb.Condition_Key{Key: &anypb.Any{TypeUrl: "type.googleapis.com/shop.User", Value: []byte{0x08, 0x80}}}, Version: &one},
		{Target: &pb.Condition_Query{Query: &pb.Query{Type: "shop.User", Filter: `email in ("a", "b")`, Limit: 1}}, Count: &one, MaxVersion: &one},
		{Target: &pb.Condition_Query{Query: &pb.Query{Type: "shop.User", Order: &pb.Order{Index: "name", Descending: true}}}, Count: &one},
		{Target: &pb.Condition_Query{Query: &pb.Query{Type: "shop.Member", Where: &pb.Expr{}}}, MaxVersion: &one},
		{Version: &one, Filter: "x"},
	} {
		b, err := proto.Marshal(c)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		c := new(pb.Condition)
		if proto.Unmarshal(data, c) != nil {
			return
		}
		w := te.E.NewWriter()
		defer w.Close()
		for _, recs := range [][]*anypb.Any{nil, {u1}} {
			err := w.Apply(t.Context(), engine.Batch{Op: engine.OpUpsert, Records: recs, Conditions: []*pb.Condition{c}})
			if err == nil {
				continue
			}
			var ae *apierror.Error
			if !errors.As(err, &ae) {
				t.Fatalf("condition %v: error %#v, want an *apierror.Error", c, err)
			}
			switch ae.Code {
			case apierror.InvalidArgument, apierror.ResourceExhausted, apierror.Aborted:
			default:
				t.Fatalf("condition %v: %v, want INVALID_ARGUMENT, RESOURCE_EXHAUSTED or ABORTED", c, err)
			}
			if ae.Write == nil || ae.Write.Condition == nil || *ae.Write.Condition != 0 || ae.Write.Reason == "" {
				t.Fatalf("condition %v: %v does not name condition 0 with a reason", c, err)
			}
			return // the stream ends at its first refused batch
		}
	})
}

// BenchmarkConditionalUpdate updates 1,000 users a batch, without
// conditions and with a version condition on every record (what a
// transaction that read each record commits), on one write stream.
func BenchmarkConditionalUpdate(b *testing.B) {
	for _, conditional := range []bool{false, true} {
		b.Run(map[bool]string{false: "unconditional", true: "version"}[conditional], func(b *testing.B) {
			te := newEngine(b)
			const n = 1000
			recs := make([]*anypb.Any, n)
			for i := range recs {
				recs[i] = te.Rec("shop.User", fmt.Sprintf(`{"id": %d, "name": "n%d", "email": "e%d@x"}`, i, i%37, i))
			}
			w := te.E.NewWriter()
			defer w.Close()
			if err := w.Apply(b.Context(), engine.Batch{Op: engine.OpInsert, Records: recs}); err != nil {
				b.Fatal(err)
			}
			versions := make([]uint64, n)
			conds := make([]*pb.Condition, n)
			for i := range conds {
				conds[i] = &pb.Condition{Target: &pb.Condition_Record{Record: uint32(i)}, Version: &versions[i]}
			}
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				batch := engine.Batch{Op: engine.OpUpdate, Records: recs}
				if conditional {
					for i := range versions {
						versions[i] = w.Position()
					}
					batch.Conditions = conds
				}
				if err := w.Apply(b.Context(), batch); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N*n)/b.Elapsed().Seconds(), "records/s")
		})
	}
}
