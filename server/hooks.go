package server

import (
	"github.com/protobase/protobase/internal/serverhook"
	"github.com/protobase/protobase/internal/store/pebble"
)

// The robustness tests run outside this package; what they need of a
// server that is not its API they reach through internal/serverhook,
// which no application can import.
func init() {
	serverhook.Flush = func(srv any) error { return srv.(*Server).eng.Flush() }
	serverhook.WithMemFS = func(cfg any, fs *pebble.MemFS) any {
		c := cfg.(Config)
		c.memFS = fs
		return c
	}
}
