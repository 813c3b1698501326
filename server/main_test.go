package server_test

import (
	"testing"

	"github.com/protobase/protobase/server"
	"github.com/protobase/protobase/server/servertest"
)

// TestMain lets servertest run a server in a child process of this test
// binary (the tests that kill one).
func TestMain(m *testing.M) { servertest.Main(m, server.Config{}) }
