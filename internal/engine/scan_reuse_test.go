package engine_test

import (
	"bytes"
	"fmt"
	"runtime/debug"
	"slices"
	"strconv"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	pb "github.com/protobase/protobase/gen/protobase/v1"
	"github.com/protobase/protobase/internal/engine"
)

// scanData inserts n shop.User records in files of 500, so that a
// parallel Scan has parts, and returns the engine.
func scanData(t *testing.T, n int) *testEngine {
	t.Helper()
	te := newEngine(t)
	for start := 0; start < n; start += 500 {
		var batch []*anypb.Any
		for i := start; i < min(start+500, n); i++ {
			id := strconv.Itoa(i)
			batch = append(batch, te.Rec("shop.User", `{"id": `+id+`, "email": "u`+id+`@example.com", "name": "name `+strconv.Itoa(i%37)+`"}`))
		}
		te.MustWrite(engine.OpInsert, batch)
		if err := te.E.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	return te
}

// scanReused runs req through ScanStream with a Send that encodes (as
// gRPC's does), then scribbles over every value it was given: a response
// whose messages or values the engine reused before it was sent, or shared
// with another one still queued, comes out wrong. It returns the values
// decoded from the encoded responses.
func scanReused(t *testing.T, te *testEngine, req *pb.ScanRequest) [][]byte {
	t.Helper()
	var got [][]byte
	send := func(resp *pb.ScanResponse) error {
		b, err := proto.Marshal(resp)
		if err != nil {
			return err
		}
		for _, a := range resp.Records {
			for i := range a.Value {
				a.Value[i] = 0xff
			}
		}
		var m pb.ScanResponse
		if err := proto.Unmarshal(b, &m); err != nil {
			return err
		}
		for _, a := range m.Records {
			got = append(got, a.Value)
		}
		return nil
	}
	if err := te.E.ScanStream(t.Context(), req, encodingScan{send}); err != nil {
		t.Fatal(err)
	}
	return got
}

// TestScanReusedMessages: a Scan whose Send encodes builds its responses
// in reused messages and buffers, and every response still carries its
// own records, whatever the parallelism, batch size, order or limit.
func TestScanReusedMessages(t *testing.T) {
	te := scanData(t, 3000)
	all := te.stored("shop.User") // by a Scan that reuses nothing, in key order
	byBytes := slices.SortedFunc(slices.Values(all), bytes.Compare)
	for _, par := range []uint32{1, 4, 16} {
		for _, batch := range []uint32{1, 7, 100, 0} {
			for _, ordered := range []bool{false, true} {
				name := fmt.Sprintf("parallelism=%d/batch=%d/ordered=%v", par, batch, ordered)
				t.Run(name, func(t *testing.T) {
					q := &pb.Query{Type: "shop.User"}
					if ordered {
						q.Order = &pb.Order{}
					}
					got := scanReused(t, te, &pb.ScanRequest{Query: q, Parallelism: par, BatchSize: batch})
					want := all
					if !ordered {
						slices.SortFunc(got, bytes.Compare)
						want = byBytes
					}
					if !slices.EqualFunc(got, want, bytes.Equal) {
						t.Fatalf("%d records, want %d, or not the stored ones", len(got), len(all))
					}
				})
			}
		}
	}
	t.Run("limit", func(t *testing.T) {
		q := &pb.Query{Type: "shop.User", Order: &pb.Order{}, Limit: 1234}
		got := scanReused(t, te, &pb.ScanRequest{Query: q, Parallelism: 4, BatchSize: 100})
		if !slices.EqualFunc(got, all[:1234], bytes.Equal) {
			t.Fatalf("%d records, want the first 1234", len(got))
		}
	})
	t.Run("index", func(t *testing.T) {
		q := &pb.Query{Type: "shop.User", Order: &pb.Order{Index: "name"}}
		got := scanReused(t, te, &pb.ScanRequest{Query: q, Parallelism: 1, BatchSize: 50})
		if len(got) != len(all) {
			t.Fatalf("%d records by the name index, want %d", len(got), len(all))
		}
	})
}

// TestScanReuseAllocates: reusing its responses, a Scan of 3,000 records in
// 30 responses allocates a fraction of what it allocates building each
// response afresh (about four allocations per response: the message, its
// record list, a values buffer and Any messages).
func TestScanReuseAllocates(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts under the race detector say nothing")
	}
	te := scanData(t, 3000)
	req := &pb.ScanRequest{Query: &pb.Query{Type: "shop.User"}, BatchSize: 100}
	var buf []byte
	send := func(resp *pb.ScanResponse) error {
		var err error
		buf, err = proto.MarshalOptions{}.MarshalAppend(buf[:0], resp)
		return err
	}
	run := func(reuse bool) float64 {
		return testing.AllocsPerRun(5, func() {
			var sink engine.ScanSink = scanFunc(send)
			if reuse {
				sink = encodingScan{send}
			}
			if err := te.E.ScanStream(t.Context(), req, sink); err != nil {
				t.Fatal(err)
			}
		})
	}
	// A collection empties the pools the reusing scan draws from: none
	// runs while allocations are counted. And when the emitter falls
	// behind the part (a busy machine, other tests' packages), the part
	// takes fresh buffers instead of waiting for sent ones, by design: the
	// fewest allocations of a few attempts is what reuse gives.
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	fresh := run(false)
	reused := run(true)
	for range 4 {
		if reused <= fresh-60 {
			break
		}
		reused = min(reused, run(true))
	}
	t.Logf("allocations per scan: %v fresh, %v reused", fresh, reused)
	if reused > fresh-60 {
		t.Fatalf("a reusing scan allocates %v times, one building every response %v", reused, fresh)
	}
}
