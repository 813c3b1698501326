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
