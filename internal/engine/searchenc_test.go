package engine

import (
	"bytes"
	"math/rand/v2"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	pb "github.com/protobase/protobase/gen/protobase/v1"
	"github.com/protobase/protobase/internal/anywire"
)

// A response written by lookupEnc is byte for byte proto.Marshal's
// encoding of the message the message path builds, for random query ids
// (zero among them, whose field is omitted), type URLs, records (empty
// ones among them), counts and errors, over reused buffers.
func TestLookupEncMatchesProto(t *testing.T) {
	rnd := rand.New(rand.NewPCG(1, 2))
	urls := []string{"type.googleapis.com/shop.User", "u", "", "type.googleapis.com/" + string(bytes.Repeat([]byte("x"), 200))}
	var w lookupEnc
	for round := range 2000 {
		w.reset()
		want := &pb.SearchResponse{}
		for range rnd.IntN(40) {
			id := rnd.Uint64N(1 << (rnd.IntN(6) * 10))
			switch rnd.IntN(10) {
			case 0:
				qe := &pb.QueryError{Query: id, Code: rnd.Int32N(17), Message: "no such thing", Field: []string{"", "id"}[rnd.IntN(2)]}
				w.fail(qe)
				want.Errors = append(want.Errors, qe)
			case 1, 2:
				count := uint64(rnd.IntN(2))
				w.done(id, count)
				want.Done = append(want.Done, &pb.QueryDone{Query: id, Count: count})
			default:
				url := urls[rnd.IntN(len(urls))]
				rec := make([]byte, []int{0, 1, 100, 127, 128, 300, 20000}[rnd.IntN(7)])
				for i := range rec {
					rec[i] = byte(rnd.IntN(256))
				}
				w.result(id, appendString(nil, anywire.FieldTypeURL, url), rec)
				w.done(id, 1)
				want.Results = append(want.Results, &pb.ResultBatch{Query: id, Records: []*anypb.Any{{TypeUrl: url, Value: rec}}})
				want.Done = append(want.Done, &pb.QueryDone{Query: id, Count: 1})
			}
		}
		wb, err := proto.Marshal(want)
		if err != nil {
			t.Fatal(err)
		}
		if got := w.finish(); !bytes.Equal(got, wb) || w.empty() != (len(wb) == 0) {
			t.Fatalf("round %d: encoded\n%x\nproto.Marshal\n%x", round, got, wb)
		}
	}
}
