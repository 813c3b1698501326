package concurrency

import (
	"testing"

	"github.com/protobase/protobase/bench/labtest"
	"github.com/protobase/protobase/server"
)

// The quick run measures every workload on the embedded server. Run fails
// unless the counter ends holding exactly the increments acknowledged, and
// unless every conditional update held (a refused batch ends its
// workload): the versions the workload tracked from acknowledgements were
// the records' versions. Transactions may conflict and retry.
func TestQuickRun(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a server and measures")
	}
	g := &Experiment{Batch: 100, Streams: 2, Clients: 4}
	res, _ := labtest.Run(t, g)
	labtest.CheckResult(t, g, res)
	want := map[string]string{
		"update store=" + server.StorePebble:                         "records/s",
		"update conditional store=" + server.StorePebble:             "records/s",
		"patch 1 of 10 fields store=" + server.StorePebble:           "records/s",
		"counter add store=" + server.StorePebble:                    "increments/s",
		"counter update store=" + server.StorePebble:                 "updates/s",
		"2 writes store=" + server.StorePebble:                       "operations/s",
		"transaction 2 reads + 2 writes store=" + server.StorePebble: "transactions/s",
	}
	for name, unit := range want {
		if r, ok := labtest.Rows(res, unit)[name]; !ok || r.Median <= 0 {
			t.Errorf("row %q (%s): %+v", name, unit, r)
		}
	}
}
