// Package lograte owns the spacing of recurring log lines. An event that
// a client, a full disk or an absent cluster can repeat at will gets one
// line per period, saying how many events it stands for, instead of one
// line each: a line per request would bury every other line and fill the
// disk the log is on.
package lograte

import (
	"sync"
	"time"
)

// Every is the period of the server's recurring lines: each kind at most
// once per Every.
const Every = 10 * time.Second

// Limiter lets one event per period through to the log and counts the
// ones it holds back. The zero Limiter spaces its lines by Every. Safe
// for concurrent use.
type Limiter struct {
	every time.Duration // 0: Every

	mu   sync.Mutex
	next time.Time // zero: the next event passes
	seen uint64    // events since the last one let through
}

// New returns a Limiter that lets one event per every through.
func New(every time.Duration) *Limiter { return &Limiter{every: every} }

// Allow counts an event now; see AllowAt.
func (l *Limiter) Allow() (n uint64, ok bool) { return l.AllowAt(time.Now()) }

// AllowAt counts an event at now and reports whether it gets its line,
// and how many events that line stands for: this one and those held back
// since the last line. The first event always gets its line.
func (l *Limiter) AllowAt(now time.Time) (n uint64, ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.seen++
	if now.Before(l.next) {
		return 0, false
	}
	every := l.every
	if every <= 0 {
		every = Every
	}
	n, l.seen, l.next = l.seen, 0, now.Add(every)
	return n, true
}
