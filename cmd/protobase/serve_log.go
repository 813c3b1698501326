package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/grpclog"

	"github.com/protobase/protobase/internal/lograte"
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

// grpcLog carries what grpc-go logs, and the REST gateway, which logs
// through grpc-go's logger, into serve's log: with --log-format json each
// of their lines is a JSON object too, not grpc-go's own text on the
// process's stderr. grpc-go takes its logger only before it runs (init);
// serve points it at its log while it runs. grpc-go shows only its errors
// by default; its informational lines and warnings (a connection that does
// not speak HTTP/2, say) are debug lines here.
//
// Their error lines are spaced: each kind (the line of grpc-go's or the
// gateway's code that logs it) at most once per lograte.Every, the next
// line saying how many it held back. A client can cause some of them with
// every request (a malformed Content-Type, a connection closed before its
// answer is written), and a line each would flood the log.
var grpcLog = new(grpcLogger)

func init() { grpclog.SetLoggerV2(grpcLog) }

// grpcLogger is a grpclog.LoggerV2 writing to the current serve's log, or,
// outside serve, errors alone to stderr as grpc-go's default logger does.
type grpcLogger struct {
	log   atomic.Pointer[slog.Logger]
	every time.Duration // the spacing of error lines; 0: lograte.Every

	mu sync.Mutex
	// errLines has a limiter per kind of error line: the line of code
	// that logs it (logSite). The kinds are places in the code, so the
	// map stays small.
	errLines map[codeLine]*lograte.Limiter
}

var grpcLogOutsideServe = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))

// use sends grpc-go's lines to log until done is called. The spacing of
// error lines starts afresh: log has had none of them.
func (g *grpcLogger) use(log *slog.Logger) (done func()) {
	g.mu.Lock()
	g.errLines = nil
	g.mu.Unlock()
	g.log.Store(log)
	return func() { g.log.CompareAndSwap(log, nil) }
}

func (g *grpcLogger) emit(level slog.Level, msg string, attrs ...any) {
	log := g.log.Load()
	if log == nil {
		log = grpcLogOutsideServe
	}
	log.Log(context.Background(), level, strings.TrimSuffix(msg, "\n"), append([]any{"component", "grpc"}, attrs...)...)
}

// emitError writes an error line unless one of its kind went out less
// than the spacing ago; the line says how many of its kind were held back
// since the last, when any were.
func (g *grpcLogger) emitError(msg func() string) {
	kind := logSite()
	g.mu.Lock()
	l := g.errLines[kind]
	if l == nil {
		if g.errLines == nil {
			g.errLines = map[codeLine]*lograte.Limiter{}
		}
		l = lograte.New(g.every)
		g.errLines[kind] = l
	}
	g.mu.Unlock()
	n, ok := l.Allow()
	switch {
	case !ok:
	case n > 1:
		g.emit(slog.LevelError, msg(), "held_back", n-1)
	default:
		g.emit(slog.LevelError, msg())
	}
}

// The LoggerV2 methods: informational lines and warnings are debug
// lines, errors error lines, spaced by kind.

func (g *grpcLogger) Info(args ...any)   { g.emit(slog.LevelDebug, fmt.Sprint(args...)) }
func (g *grpcLogger) Infoln(args ...any) { g.emit(slog.LevelDebug, fmt.Sprintln(args...)) }
func (g *grpcLogger) Infof(format string, args ...any) {
	g.emit(slog.LevelDebug, fmt.Sprintf(format, args...))
}
func (g *grpcLogger) Warning(args ...any)   { g.emit(slog.LevelDebug, fmt.Sprint(args...)) }
func (g *grpcLogger) Warningln(args ...any) { g.emit(slog.LevelDebug, fmt.Sprintln(args...)) }
func (g *grpcLogger) Warningf(format string, args ...any) {
	g.emit(slog.LevelDebug, fmt.Sprintf(format, args...))
}
func (g *grpcLogger) Error(args ...any) {
	g.emitError(func() string { return fmt.Sprint(args...) })
}

func (g *grpcLogger) Errorln(args ...any) {
	g.emitError(func() string { return fmt.Sprintln(args...) })
}

func (g *grpcLogger) Errorf(format string, args ...any) {
	g.emitError(func() string { return fmt.Sprintf(format, args...) })
}

// codeLine is a line of source code.
type codeLine struct {
	file string
	line int
}

// logSite is the line of code that logged: that of the first caller
// outside this logger and grpc-go's logging packages, whose component
// loggers call the logger through several frames of their own. A line,
// not a program counter: a function that logs and is inlined in several
// places is one kind.
func logSite() codeLine {
	var pcs [16]uintptr
	frames := runtime.CallersFrames(pcs[:runtime.Callers(2, pcs[:])])
	for {
		f, more := frames.Next()
		if !strings.Contains(f.Function, ".(*grpcLogger).") && !inGRPCLog(f.Function) {
			return codeLine{f.File, f.Line}
		}
		if !more {
			return codeLine{}
		}
	}
}

// inGRPCLog reports whether function fn is of grpc-go's logging packages
// (grpclog, its internal packages, internal/grpclog).
func inGRPCLog(fn string) bool {
	return strings.Contains(fn, "/grpclog.") || strings.Contains(fn, "/grpclog/")
}

// Fatal, Fatalln and Fatalf log an error and exit 1, as grpc-go's
// contract for them says.
func (g *grpcLogger) Fatal(args ...any) {
	g.emit(slog.LevelError, fmt.Sprint(args...))
	os.Exit(1)
}

func (g *grpcLogger) Fatalln(args ...any) {
	g.emit(slog.LevelError, fmt.Sprintln(args...))
	os.Exit(1)
}

func (g *grpcLogger) Fatalf(format string, args ...any) {
	g.emit(slog.LevelError, fmt.Sprintf(format, args...))
	os.Exit(1)
}

// V reports whether grpc-go's verbose lines of level l are wanted: those
// of level 0 only, as grpc-go's default.
func (g *grpcLogger) V(l int) bool { return l <= 0 }
