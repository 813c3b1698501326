package main

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/protobase/protobase/internal/store/etcd/etcdtest"
)

// `protobase scan --parallelism 4` against a server on etcd reads its
// parts in parallel (without --order their records interleave) and prints
// every record exactly once; with --order they come in key order.
func TestScanCommandEtcd(t *testing.T) {
	endpoint := etcdtest.Start(t, etcdtest.Roomy)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	addr, done := startServe(t, ctx, "--data", t.TempDir(), "--store", "etcd", "--etcd-endpoints", endpoint, "--etcd-prefix", "/scan/")
	defer func() { cancel(); <-done }()
	mustCLI(t, "", "--addr", addr, "schema", "apply", writeFile(t, t.TempDir(), "shop.proto", shopProto))
	const n = 4500 // four parts need 4,000 keys: a part of less than a page (1,000) saves nothing
	var in strings.Builder
	for i := 1; i <= n; i++ {
		fmt.Fprintf(&in, `{"id": %d, "email": "u%d@x"}`+"\n", i, i)
	}
	mustCLI(t, in.String(), "--addr", addr, "insert", "--type", "shop.User")

	want := make([]int, n)
	for i := range want {
		want[i] = i + 1
	}
	scan := func(order bool) (sorted bool) {
		args := []string{"--addr", addr, "scan", "-t", "shop.User", "--parallelism", "4"}
		if order {
			args = append(args, "--order", "pk")
		}
		got := intIDs(t, ids(t, mustCLI(t, "", args...).stdout))
		sorted = slices.IsSorted(got)
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Errorf("--order %v: %d records, not ids 1 to %d once each", order, len(got), n)
		}
		return sorted
	}
	if !scan(true) {
		t.Error("--order pk: the records did not come in key order")
	}
	// Parts read in parallel interleave, but how is up to the scheduler:
	// on a busy machine one part may be printed whole before the next
	// starts. Parts read one after another would come sorted every time.
	interleaved := false
	for range scanTries {
		if !scan(false) {
			interleaved = true
			break
		}
	}
	if !interleaved {
		t.Errorf("without --order the records came sorted in %d scans: the parts were not read in parallel", scanTries)
	}
	r := mustCLI(t, "", "--addr", addr, "scan", "-t", "shop.User", "--parallelism", "4", "--count")
	if strings.TrimSpace(r.stdout) != strconv.Itoa(n) {
		t.Errorf("scan --count printed %q, want %d", r.stdout, n)
	}
}

// scanTries is how many unordered scans TestScanCommandEtcd makes before
// it concludes that the parts were not read in parallel.
const scanTries = 5

func intIDs(t *testing.T, s []string) []int {
	t.Helper()
	out := make([]int, len(s))
	for i, v := range s {
		n, err := strconv.Atoi(v)
		if err != nil {
			t.Fatalf("id %q: %v", v, err)
		}
		out[i] = n
	}
	return out
}
