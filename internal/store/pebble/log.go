package pebble

import (
	"context"
	"fmt"
	"log/slog"
	"os"
)

// pebbleLogger adapts a *slog.Logger to pebble.Logger. Pebble's
// informational messages (flushes, compactions, WAL rotation) are frequent
// and only useful when debugging, so they log at debug level.
type pebbleLogger struct{ l *slog.Logger }

func newPebbleLogger(l *slog.Logger) pebbleLogger {
	if l == nil {
		l = slog.New(slog.DiscardHandler)
	}
	return pebbleLogger{l: l.With("component", "pebble")}
}

func (p pebbleLogger) Infof(format string, args ...any) {
	p.log(slog.LevelDebug, format, args)
}

func (p pebbleLogger) Errorf(format string, args ...any) {
	p.log(slog.LevelError, format, args)
}

// Fatalf logs and exits: Pebble's contract is that Fatalf does not return
// (continuing after, say, a failed WAL write would leave the commit
// pipeline wedged). The message goes to stderr when the logger would drop
// it, so that the process never dies without saying why.
func (p pebbleLogger) Fatalf(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	if p.l.Enabled(context.Background(), slog.LevelError) {
		p.l.Error(msg, "fatal", true)
	} else {
		fmt.Fprintln(os.Stderr, "pebble: FATAL: "+msg)
	}
	os.Exit(1)
}

func (p pebbleLogger) log(level slog.Level, format string, args []any) {
	ctx := context.Background()
	if p.l.Enabled(ctx, level) {
		p.l.Log(ctx, level, fmt.Sprintf(format, args...))
	}
}
