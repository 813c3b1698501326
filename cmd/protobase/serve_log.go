package main

import (
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"
)

// announcer writes the lines serve prints on stdout once it serves (where
// it listens): as text, or with --log-format json as one JSON object a
// line, as the log is, so that every line the server writes parses.
type announcer struct {
	w    io.Writer
	json bool
	log  *slog.Logger // json only
}

func newAnnouncer(w io.Writer, format string) announcer {
	if !strings.EqualFold(format, "json") {
		return announcer{w: w}
	}
	opts := &slog.HandlerOptions{ReplaceAttr: durationsInMillis}
	return announcer{w: w, json: true, log: slog.New(slog.NewJSONHandler(w, opts))}
}

// line prints text, or with JSON an info object of msg and attrs.
func (a announcer) line(text, msg string, attrs ...any) {
	if a.json {
		a.log.Info(msg, attrs...)
		return
	}
	fmt.Fprintln(a.w, text)
}

// durationsInMillis writes a time.Duration as a number of milliseconds in
// a field whose name says so (KEY_ms): slog's own handlers write it as
// "1.5ms" in text and as bare nanoseconds in JSON.
func durationsInMillis(_ []string, a slog.Attr) slog.Attr {
	if a.Value.Kind() != slog.KindDuration {
		return a
	}
	d := a.Value.Duration()
	return slog.Float64(a.Key+"_ms", float64(d.Round(time.Microsecond).Microseconds())/1000)
}
