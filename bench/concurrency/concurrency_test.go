package concurrency

import (
	"testing"

	"github.com/protobase/protobase/bench/labtest"
	"github.com/protobase/protobase/server"
)

// The quick run measures every workload on the embedded server; the
// counter ends holding exactly the increments acknowledged (Run checks it
// and fails otherwise), and the server applied only what was sent, with
// no write refused: every condition held, as the versions the workload
// tracked from acknowledgements were the records' versions.
func TestQuickRun(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a server and measures")
	}
	g := &Experiment{Batch: 100, Streams: 2, Clients: 4}
	res, env := labtest.Run(t, g)
	labtest.CheckResult(t, g, res)
	want := map[string]string{
		"update store=" + server.StorePebble:               "records/s",
		"update conditional store=" + server.StorePebble:   "records/s",
		"patch 1 of 10 fields store=" + server.StorePebble: "records/s",
		"counter add store=" + server.StorePebble:          "increments/s",
		"counter update store=" + server.StorePebble:       "updates/s",
	}
	for name, unit := range want {
		if r, ok := labtest.Rows(res, unit)[name]; !ok || r.Median <= 0 {
			t.Errorf("row %q (%s): %+v", name, unit, r)
		}
	}
	for _, tg := range env.Targets() {
		if st := labtest.Stats(t, tg); st.WriteErrors != 0 {
			t.Errorf("the server refused %d writes", st.WriteErrors)
		}
	}
}
