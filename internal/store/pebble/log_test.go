package pebble

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
)

// Pebble's own messages reach the store's slog logger, informational ones
// only at debug level.
func TestPebbleLogHonoursLevel(t *testing.T) {
	for _, tc := range []struct {
		level slog.Level
		want  bool
	}{{slog.LevelDebug, true}, {slog.LevelInfo, false}} {
		t.Run(tc.level.String(), func(t *testing.T) {
			var buf bytes.Buffer
			l := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: tc.level}))
			s, err := Open(Options{Dir: t.TempDir(), Layout: testLayout, Logger: l})
			if err != nil {
				t.Fatal(err)
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			// Pebble reports the WALs it found on every open.
			got := strings.Contains(buf.String(), "component=pebble")
			if got != tc.want {
				t.Fatalf("pebble messages logged: %v, want %v; log:\n%s", got, tc.want, buf.String())
			}
		})
	}
}
