package bench

import (
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/vbauerster/mpb/v8"
	"github.com/vbauerster/mpb/v8/decor"
)

// Progress shows what an experiment is doing. Env.Measure opens a task per
// configuration (one step per warm-up and measured run); experiments open
// their own for loading data.
type Progress interface {
	// Task starts a task of steps steps (0 when unknown).
	Task(label string, steps int) Task
}

// Task is one running task of a Progress.
type Task interface {
	// Step marks one step done.
	Step()
	// Done ends the task; note (may be empty) says how it ended.
	Done(note string)
}

// NoProgress shows nothing.
type NoProgress struct{}

// Task implements Progress.
func (NoProgress) Task(string, int) Task { return noTask{} }

type noTask struct{}

func (noTask) Step()       {}
func (noTask) Done(string) {}

// LineProgress writes one plain line per finished task, for logs and pipes.
type LineProgress struct {
	mu sync.Mutex // guards W
	W  io.Writer
}

// Task implements Progress.
func (p *LineProgress) Task(label string, _ int) Task {
	return &lineTask{p: p, label: label, start: time.Now()}
}

type lineTask struct {
	p     *LineProgress
	label string
	start time.Time
}

func (t *lineTask) Step() {}

func (t *lineTask) Done(note string) {
	t.p.mu.Lock()
	defer t.p.mu.Unlock()
	if note != "" {
		note = ": " + note
	}
	// Best effort: a broken progress stream must not fail the measurement.
	_, _ = fmt.Fprintf(t.p.W, "%s%s (%.1fs)\n", t.label, note, time.Since(t.start).Seconds())
}

// BarProgress draws an mpb bar per task on a terminal.
type BarProgress struct {
	p *mpb.Progress
}

// NewBarProgress draws on w until Wait.
func NewBarProgress(w io.Writer) *BarProgress {
	return &BarProgress{p: mpb.New(mpb.WithOutput(w), mpb.WithWidth(40), mpb.WithRefreshRate(150*time.Millisecond))}
}

// Task implements Progress.
func (p *BarProgress) Task(label string, steps int) Task {
	var note string
	var mu sync.Mutex // guards note
	bar := p.p.AddBar(int64(max(steps, 1)),
		mpb.PrependDecorators(decor.Name(label, decor.WCSyncSpaceR)),
		mpb.AppendDecorators(
			decor.Elapsed(decor.ET_STYLE_GO, decor.WCSyncSpace),
			decor.Any(func(decor.Statistics) string {
				mu.Lock()
				defer mu.Unlock()
				return note
			}, decor.WCSyncSpace),
		),
	)
	return &barTask{bar: bar, setNote: func(s string) { mu.Lock(); note = s; mu.Unlock() }}
}

// Wait waits for the bars to be drawn a last time.
func (p *BarProgress) Wait() { p.p.Wait() }

type barTask struct {
	bar     *mpb.Bar
	setNote func(string)
}

func (t *barTask) Step() { t.bar.Increment() }

func (t *barTask) Done(note string) {
	t.setNote(note)
	t.bar.SetTotal(-1, true)
}
