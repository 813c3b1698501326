package bench_test

import (
	"testing"
	"time"

	"github.com/protobase/protobase/bench"
	"github.com/protobase/protobase/bench/labtest"
)

// Single-record inserts keep at most 256 requests unacknowledged (an
// acknowledgement asked every 128, two outstanding), so that a run ends
// with few requests queued behind it: bytes
// alone let thousands queue, and a syncing server took tens of seconds to
// apply what a 150 ms run had sent.
func TestInsertStreamBoundsRequestsInFlight(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a server")
	}
	tg := labtest.ItemTarget(t, bench.TargetConfig{NoSync: true})
	var next int64
	var last uint64
	var acks int
	w := bench.InsertStreamAcked(tg, 1, bench.ItemWireBytes, func(buf []byte) ([]byte, int64) {
		next++
		return bench.AppendWriteRecords(buf, 2, bench.ItemType, next, 1)
	}, func(int64) bool { return next < 2000 }, nil, func(_ time.Duration, records uint64) {
		if records-last > 256 {
			t.Errorf("acknowledgement at %d records, %d after the one before", records, records-last)
		}
		last = records
		acks++
	})
	c, err := w(t.Context(), time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if c.Ops != 2000 || acks < 2000/128 {
		t.Fatalf("%d records, %d acknowledgements", c.Ops, acks)
	}
}
