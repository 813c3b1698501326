package engine_test

import (
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/dynamicpb"
	"google.golang.org/protobuf/types/known/anypb"

	pb "github.com/protobase/protobase/gen/protobase/v1"
	"github.com/protobase/protobase/internal/engine"
)

// A parallel ordered Scan finishes, in order, when its parts read ahead
// into a result budget far smaller than the data: parts waiting for the
// budget never block the part being sent (the budget's waiters are served
// in turn, so a part queued before the sent one would wait on it forever).
func TestScanSmallResultBudget(t *testing.T) {
	te := openEngine(t, t.TempDir(), engine.Options{MaxResultBufferBytes: 256 << 10, MaxResultBytes: 128 << 10})
	te.Apply(map[string]string{"shop.proto": shopProto})
	rng := rand.New(rand.NewPCG(1, 2))
	// Eight storage files, so that the scan has parts to read ahead.
	const files, per = 8, 200
	for f := range files {
		var batch []*anypb.Any
		for i := range per {
			id := strconv.Itoa(f*per + i)
			var name strings.Builder
			for range 512 { // incompressible: storage files hold what they look like
				name.WriteString(strconv.FormatUint(rng.Uint64()>>8, 36))
			}
			batch = append(batch, te.Rec("shop.User", `{"id": `+id+`, "email": "u`+id+`", "name": "`+name.String()+`"}`))
		}
		te.MustWrite(engine.OpInsert, batch)
		if err := te.E.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	md := te.E.Schema().Types["shop.User"].Desc
	id := md.Fields().ByName("id")
	for _, desc := range []bool{false, true} {
		req := &pb.ScanRequest{Query: &pb.Query{Type: "shop.User", Order: &pb.Order{Descending: desc}}, Parallelism: 16}
		var n int
		prev := int64(-1)
		err := te.E.Scan(t.Context(), req, func(resp *pb.ScanResponse) error {
			for _, a := range resp.Records {
				m := dynamicpb.NewMessage(md)
				if err := proto.Unmarshal(a.GetValue(), m); err != nil {
					t.Fatal(err)
				}
				v := m.Get(id).Int()
				if prev >= 0 && (v < prev) != desc {
					t.Fatalf("descending %v: id %d after %d", desc, v, prev)
				}
				prev = v
				n++
			}
			return nil
		})
		if err != nil {
			t.Fatalf("descending %v: %v", desc, err)
		}
		if n != files*per {
			t.Fatalf("descending %v: %d records, want %d", desc, n, files*per)
		}
	}
}
