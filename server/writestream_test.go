package server_test

import (
	"fmt"
	"strings"
	"testing"

	"google.golang.org/protobuf/types/known/anypb"

	"github.com/protobase/protobase/server"
)

// TestInsertStreamWithinSmallWriteBudget sends an Insert stream more
// batches than a small write budget holds: the batch the server reads
// ahead waits for room that the stream's own unsynced batches hold, and
// the stream must make them durable to give it back rather than wait for
// itself until the budget's wait runs out. Every batch lands.
func TestInsertStreamWithinSmallWriteBudget(t *testing.T) {
	const batches, perBatch = 40, 100
	name := strings.Repeat("n", 2000)
	ts := startServer(t, server.Config{MaxInflightBytes: 700 << 10}) // three batches' records, and a bit
	ts.MustApply(map[string]string{"shop.proto": shopProto})
	var bs [][]*anypb.Any
	for b := range batches {
		var recs []*anypb.Any
		for i := range perBatch {
			id := b*perBatch + i
			recs = append(recs, ts.Rec("shop.User", fmt.Sprintf(`{"id": %d, "email": "u%d@x", "name": %q}`, id, id, name)))
		}
		bs = append(bs, recs)
	}
	resp, err := ts.Write(insert, bs...)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Batches != batches || resp.Records != batches*perBatch {
		t.Fatalf("response %v, want %d batches of %d records", resp, batches, perBatch)
	}
	if n := ts.Count("shop.User"); n != batches*perBatch {
		t.Fatalf("users %d, want %d", n, batches*perBatch)
	}
}
