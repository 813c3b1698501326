package wire

import (
	"bytes"
	"math/rand/v2"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	pb "github.com/protobase/protobase/gen/protobase/v1"
)

// writeSearch writes m with the search writers as the engine uses them:
// results, completions and errors in three buffers joined in field order;
// a batch of one record without versions with AppendResult, any other
// with its records and versions written after MaxResultHeader bytes of room and its header at the end
// of that room once their length is known. ok is false for a shape the
// writers leave to the message path: a plan, or unknown fields at the
// top (nested messages are the engine's own and hold none).
func writeSearch(m proto.Message) (b []byte, ok bool) {
	sr, ok := m.(*pb.SearchResponse)
	if !ok || len(sr.ProtoReflect().GetUnknown()) > 0 {
		return nil, false
	}
	var out, dones, errs []byte
	for _, rb := range sr.Results {
		if rb.Plan != nil {
			return nil, false
		}
		if len(rb.Records) == 1 && len(rb.Versions) == 0 {
			a := rb.Records[0]
			out = AppendResult(out, rb.Query, AppendString(nil, AnyTypeURL, a.TypeUrl), a.Value)
			continue
		}
		start := len(out)
		out = append(out, make([]byte, MaxResultHeader)...)
		for _, a := range rb.Records {
			out = AppendRecord(out, AppendString(nil, AnyTypeURL, a.TypeUrl), a.Value)
		}
		out = AppendVersions(out, rb.Versions)
		var h [MaxResultHeader]byte
		hb := AppendResultHeader(h[:0], rb.Query, len(out)-start-MaxResultHeader)
		head := start + MaxResultHeader - len(hb)
		copy(out[head:], hb)
		out = append(out[:start], out[head:]...)
	}
	for _, d := range sr.Done {
		if d.Plan != nil {
			return nil, false
		}
		dones = AppendDone(dones, d.Query, d.Count)
	}
	for _, qe := range sr.Errors {
		errs = AppendQueryError(errs, qe)
	}
	return append(append(out, dones...), errs...), true
}

// The search writers write proto.Marshal's bytes for responses of random
// batches (of one record, of several and of none; query ids of zero,
// whose field is omitted, and of one to ten bytes), type URLs, records
// (empty ones among them), counts and errors.
func TestSearchWritersMatchProto(t *testing.T) {
	rnd := rand.New(rand.NewPCG(1, 2))
	urls := []string{"type.googleapis.com/shop.User", "u", "", "type.googleapis.com/" + string(bytes.Repeat([]byte("x"), 200))}
	record := func() *anypb.Any {
		rec := make([]byte, []int{0, 1, 100, 127, 128, 300, 20000}[rnd.IntN(7)])
		for i := range rec {
			rec[i] = byte(rnd.IntN(256))
		}
		return &anypb.Any{TypeUrl: urls[rnd.IntN(len(urls))], Value: rec}
	}
	for round := range 2000 {
		m := &pb.SearchResponse{}
		for range rnd.IntN(40) {
			id := rnd.Uint64N(1 << (rnd.IntN(7) * 10))
			switch rnd.IntN(10) {
			case 0:
				m.Errors = append(m.Errors, &pb.QueryError{Query: id, Code: rnd.Int32N(17), Message: "no such thing", Field: []string{"", "id"}[rnd.IntN(2)]})
			case 1, 2:
				m.Done = append(m.Done, &pb.QueryDone{Query: id, Count: rnd.Uint64N(1 << (rnd.IntN(7) * 10))})
			case 3:
				rb := &pb.ResultBatch{Query: id}
				for range []int{0, 2, 50}[rnd.IntN(3)] {
					rb.Records = append(rb.Records, record())
				}
				m.Results = append(m.Results, rb)
			default:
				m.Results = append(m.Results, &pb.ResultBatch{Query: id, Records: []*anypb.Any{record()}})
			}
		}
		got, ok := writeSearch(m)
		if want := marshal(t, m); !ok || !bytes.Equal(got, want) {
			t.Fatalf("round %d: written\n%x\nproto.Marshal\n%x", round, got, want)
		}
	}
}

// A header fits the room left for it, whatever the query id, for a batch
// of less than 32 GiB.
func TestResultHeaderFits(t *testing.T) {
	for _, id := range []uint64{0, 1, 1 << 63} {
		for _, n := range []int{0, 127, 128, 1<<35 - 12} {
			if h := AppendResultHeader(nil, id, n); len(h) > MaxResultHeader {
				t.Errorf("query %d, %d bytes of records: a header of %d bytes, room for %d", id, n, len(h), MaxResultHeader)
			}
		}
	}
}

// A query error whose message or field is not valid UTF-8, which
// proto.Marshal refuses, is written with the invalid bytes replaced: the
// response decodes, and the query has its error.
func TestAppendQueryErrorInvalidUTF8(t *testing.T) {
	qe := &pb.QueryError{Query: 7, Code: 13, Message: "read \xff\xfe failed", Field: "a\xc3"}
	b := AppendQueryError(nil, qe)
	var got pb.SearchResponse
	if err := proto.Unmarshal(b, &got); err != nil {
		t.Fatalf("%x: %v", b, err)
	}
	want := &pb.SearchResponse{Errors: []*pb.QueryError{{Query: 7, Code: 13, Message: "read \uFFFD failed", Field: "a\uFFFD"}}}
	if !proto.Equal(&got, want) {
		t.Fatalf("decoded %v, want %v", &got, want)
	}
	if qe.Message != "read \xff\xfe failed" || qe.Field != "a\xc3" {
		t.Fatalf("the caller's error changed: %v", qe)
	}
}

// The Position writers write proto.Marshal's bytes, within
// MaxPositionField, with the optional index absent, zero and largest.
func TestPositionWritersMatchProto(t *testing.T) {
	for _, c := range []uint64{0, 1, 300, 1<<64 - 1} {
		for _, index := range []uint32{0, 1, 1<<32 - 1} {
			for _, has := range []bool{false, true} {
				p := &pb.Position{Commit: c}
				if has {
					p.Index = proto.Uint32(index)
				}
				want := marshal(t, &pb.WatchResponse{Progress: p})
				got := AppendPosition(nil, WatchResponseProgress, c, index, has)
				if !bytes.Equal(got, want) || len(got) > MaxPositionField {
					t.Errorf("%v: written\n%x\nproto.Marshal\n%x", p, got, want)
				}
				if s := SizePosition(c, index, has); s != len(got)-2 {
					t.Errorf("%v: size %d, written %d", p, s, len(got)-2)
				}
			}
		}
	}
}
