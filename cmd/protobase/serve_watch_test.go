package main

import (
	"testing"

	"github.com/protobase/protobase/internal/exitstatus"
)

// --watch-tail-bytes takes a byte count, from the command line or the
// environment; anything else is a usage error naming it.
func TestServeWatchTailFlag(t *testing.T) {
	for _, v := range []string{"lots", "1.5", "99999999999999999999", ""} {
		r := cli(t, "", "serve", "--data", t.TempDir(), "--watch-tail-bytes", v)
		wantCode(t, r, exitstatus.Usage)
		wantContains(t, r.stderr, "watch-tail-bytes")
	}

	t.Setenv("PROTOBASE_WATCH_TAIL_BYTES", "0x")
	r := cli(t, "", "serve", "--data", t.TempDir())
	wantCode(t, r, exitstatus.Usage)
	wantContains(t, r.stderr, `$PROTOBASE_WATCH_TAIL_BYTES="0x"`)

	r = cli(t, "", "serve", "--help")
	wantContains(t, r.stdout, "--watch-tail-bytes", "[$PROTOBASE_WATCH_TAIL_BYTES]", "(default 33554432)")
}
