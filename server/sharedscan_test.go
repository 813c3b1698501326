package server_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/protobase/protobase/client"
	pb "github.com/protobase/protobase/gen/protobase/v1"
	"github.com/protobase/protobase/server"
	"github.com/protobase/protobase/tests/robustness/harness"
)

// Scan ids of the shared scan test: the base records have ids 10*i, and
// concurrent batch b the ids 10*i+1 for the i with i%scanBatches == b, so
// that every batch has records in every part of a split scan.
const (
	scanBase    = 4000
	scanBatches = 8
)

// A parallel Scan on etcd reads its parts concurrently, at one revision:
// with batches written through another server meanwhile, each of
// several scans returns every base record exactly once and, of the
// batches, whole ones only, a prefix of those written (the writer sends
// them one after the other). The checker, run meanwhile, also reads at
// one revision: it finds the store consistent, with the records of a
// prefix of the batches. Once the writer is done, the scan and the checker
// agree with the model on every record.
func TestSharedScanSplits(t *testing.T) {
	be := harness.Backends[1] // etcd, one member
	cfg := be.Config(t)
	a := startServer(t, withDir(t, cfg))
	a.MustApply(map[string]string{"shop.proto": shopProto})
	b := startServer(t, withDir(t, cfg))
	user := func(ts *testServer, id int) *anypb.Any {
		return ts.Rec("shop.User", fmt.Sprintf(`{"id": %d, "email": "u%d@example.com"}`, id, id))
	}
	for lo := 0; lo < scanBase; lo += 1000 {
		var recs []*anypb.Any
		for i := lo; i < lo+1000; i++ {
			recs = append(recs, user(a, 10*i))
		}
		a.MustWrite(insert, recs)
	}
	batches := make([][]*anypb.Any, scanBatches)
	for i := range scanBase {
		batches[i%scanBatches] = append(batches[i%scanBatches], user(b, 10*i+1))
	}

	// The writer writes one batch as each round of reads starts, so that
	// every round overlaps a write.
	rounds, wrote := make(chan struct{}), make(chan error, 1)
	go func() {
		defer close(wrote)
		for _, recs := range batches {
			if _, ok := <-rounds; !ok {
				return
			}
			if _, err := b.Write(insert, recs); err != nil {
				wrote <- err
				return
			}
		}
	}()
	interleaved := false
	for round := range scanBatches {
		select {
		case rounds <- struct{}{}:
		case err := <-wrote:
			t.Fatalf("write: %v", err)
		}
		start := time.Now()
		for _, ordered := range []bool{false, true} {
			ids, inOrder := scanIDs(t, a, ordered)
			interleaved = interleaved || !inOrder
			checkSnapshot(t, fmt.Sprintf("scan %d (ordered %v)", round, ordered), ids, uint64(len(ids)))
		}
		scanned := time.Since(start)
		report, err := be.Check(t, cfg)
		if err != nil {
			t.Fatalf("check during the writes: %v", err)
		}
		harness.MustBeConsistent(t, report, fmt.Sprintf("during the writes, round %d", round))
		checkSnapshot(t, fmt.Sprintf("check %d", round), nil, report.Records)
		t.Logf("round %d: scans %v, check %v", round, scanned, time.Since(start)-scanned)
	}
	close(rounds)
	if err := <-wrote; err != nil {
		t.Fatalf("write: %v", err)
	}
	if !interleaved {
		t.Error("every unordered scan with parallelism 4 came in key order: the scan was not split")
	}
	ids, _ := scanIDs(t, a, true)
	if got := checkSnapshot(t, "the last scan", ids, uint64(len(ids))); got != scanBatches {
		t.Errorf("the last scan holds %d batches, want all %d", got, scanBatches)
	}
	harness.MustBeConsistent(t, mustCheckEtcd(t, cfg, uint64(len(ids))), "after the writes")
}

// scanIDs scans every shop.User through ts with parallelism 4 and returns
// their ids in the order they came, and whether that was key order.
func scanIDs(t *testing.T, ts *testServer, ordered bool) ([]int64, bool) {
	t.Helper()
	q := &pb.Query{Type: "shop.User"}
	if ordered {
		q.Order = &pb.Order{}
	}
	sc := ts.C.Scan(context.Background(), q, client.ScanOptions{Parallelism: 4, BatchSize: 100})
	defer sc.Close()
	var ids []int64
	for sc.Next() {
		ids = append(ids, recordID(t, sc.Record()))
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("scan: %v", err)
	}
	if sc.Count() != uint64(len(ids)) {
		t.Errorf("scan counted %d records and sent %d", sc.Count(), len(ids))
	}
	inOrder := slices.IsSorted(ids)
	if ordered && !inOrder {
		t.Error("a scan in key order sent its records out of order")
	}
	return ids, inOrder
}

// recordID reads field 1 (id) of a shop.User.
func recordID(t *testing.T, rec *anypb.Any) int64 {
	t.Helper()
	b := rec.GetValue()
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			t.Fatalf("record %x: bad tag", rec.GetValue())
		}
		b = b[n:]
		if num == 1 && typ == protowire.VarintType {
			v, _ := protowire.ConsumeVarint(b)
			return int64(v) //nolint:gosec // the test's ids are small
		}
		n = protowire.ConsumeFieldValue(num, typ, b)
		if n < 0 {
			t.Fatalf("record %x: bad field", rec.GetValue())
		}
		b = b[n:]
	}
	return 0 // id 0 is not encoded
}

// checkSnapshot checks that ids (when not nil) hold every base record once
// and, of the concurrent batches, whole ones that form a prefix of those
// written, and that count is that many records; it returns the batches.
func checkSnapshot(t *testing.T, what string, ids []int64, count uint64) int {
	t.Helper()
	per := make([]int, scanBatches)
	base := 0
	if ids != nil {
		seen := make(map[int64]bool, len(ids))
		for _, id := range ids {
			if seen[id] {
				t.Fatalf("%s: id %d came twice", what, id)
			}
			seen[id] = true
			switch {
			case id%10 == 0 && id/10 < scanBase:
				base++
			case id%10 == 1:
				per[(id/10)%scanBatches]++
			default:
				t.Fatalf("%s: id %d was never written", what, id)
			}
		}
		if base != scanBase {
			t.Fatalf("%s: %d base records, want %d", what, base, scanBase)
		}
	}
	size := func(k int) int { return (scanBase - k + scanBatches - 1) / scanBatches }
	whole := 0
	for whole < scanBatches && (ids == nil || per[whole] == size(whole)) {
		if ids == nil && uint64(scanBase+prefixSize(whole+1, size)) > count {
			break
		}
		whole++
	}
	for k := whole; ids != nil && k < scanBatches; k++ {
		if per[k] != 0 {
			t.Fatalf("%s: batch %d has %d of %d records (batches whole: %d)", what, k, per[k], size(k), whole)
		}
	}
	if want := uint64(scanBase + prefixSize(whole, size)); count != want {
		t.Fatalf("%s: %d records, not the %d of the base and of the first %d batches", what, count, want, whole)
	}
	return whole
}

func prefixSize(k int, size func(int) int) int {
	n := 0
	for i := range k {
		n += size(i)
	}
	return n
}

// mustCheckEtcd runs the checker and requires it to have read records.
func mustCheckEtcd(t *testing.T, cfg server.Config, records uint64) *server.CheckReport {
	t.Helper()
	report, err := server.CheckEtcd(t.Context(), cfg.Etcd)
	if err != nil {
		t.Fatal(err)
	}
	if report.Records != records {
		t.Errorf("the checker read %d records, the scan %d", report.Records, records)
	}
	return report
}
