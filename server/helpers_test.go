package server_test

import (
	"testing"

	"github.com/protobase/protobase/internal/testschema"
	"github.com/protobase/protobase/server"
	"github.com/protobase/protobase/server/servertest"
)

const shopProto = testschema.Shop

// testServer is a real server on a loopback port with a real Pebble
// directory, and a client connected to it (servertest.Server).
type testServer struct{ *servertest.Server }

func startServer(t *testing.T, cfg server.Config) *testServer {
	t.Helper()
	return &testServer{servertest.New(t, cfg)}
}

// restart stops the server and starts a new one on the same directory.
func (ts *testServer) restart() *testServer { return &testServer{ts.Restart()} }

// skipLargeInRaceRun skips t in the race run (go test -race -short): t
// moves tens of MiB or a hundred thousand records through one server,
// which the race detector slows several times over while the goroutines
// that meet are those of smaller tests; the plain run tests it in full.
func skipLargeInRaceRun(t *testing.T) {
	t.Helper()
	if raceEnabled && testing.Short() {
		t.Skip("large data: left to the run without the race detector")
	}
}
