package main

import (
	"fmt"
	"io"
	"sync/atomic"
	"time"

	"github.com/vbauerster/mpb/v8"
	"github.com/vbauerster/mpb/v8/decor"
)

// progress draws the progress of a write command on a terminal: the records
// read and their rate, and, when the input's size is known, the share of it
// read. A nil *progress draws nothing.
//
// The read loop only bumps atomic counters; a ticker hands them to the bar,
// so the cost per record does not depend on the drawing.
type progress struct {
	p       *mpb.Progress
	bar     *mpb.Bar
	start   time.Time
	records atomic.Int64
	bytes   atomic.Int64
	sized   bool
	stop    chan struct{}
	stopped chan struct{}
}

// newProgress starts drawing on w. size is the input's length in bytes, or
// 0 when unknown (a spinner is drawn instead of a bar).
func newProgress(w io.Writer, label string, size int64, autoRefresh bool) *progress {
	pr := &progress{start: time.Now(), sized: size > 0, stop: make(chan struct{}), stopped: make(chan struct{})}
	opts := []mpb.ContainerOption{mpb.WithOutput(w), mpb.WithWidth(100), mpb.WithRefreshRate(150 * time.Millisecond)}
	if autoRefresh {
		opts = append(opts, mpb.WithAutoRefresh())
	}
	pr.p = mpb.New(opts...)
	count := decor.Any(func(decor.Statistics) string {
		return fmt.Sprintf("%d records", pr.records.Load())
	}, decor.WCSyncSpaceR)
	rate := decor.Any(func(decor.Statistics) string {
		return fmt.Sprintf("%.0f records/s", pr.rate())
	}, decor.WCSyncSpace)
	if pr.sized {
		pr.bar = pr.p.New(0, mpb.BarStyle(),
			mpb.PrependDecorators(decor.Name(label+" ", decor.WCSyncSpaceR), count),
			mpb.AppendDecorators(decor.Percentage(decor.WCSyncSpace), rate))
		// Set after creation so that reaching it does not complete the bar:
		// finish does, whatever was read.
		pr.bar.SetTotal(size, false)
	} else {
		pr.bar = pr.p.New(0, mpb.SpinnerStyle(), mpb.BarWidth(1),
			mpb.PrependDecorators(decor.Name(label+" ", decor.WCSyncSpaceR), count),
			mpb.AppendDecorators(rate))
	}
	go pr.loop()
	return pr
}

func (pr *progress) loop() {
	defer close(pr.stopped)
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-pr.stop:
			pr.sync()
			return
		case <-t.C:
			pr.sync()
		}
	}
}

func (pr *progress) sync() {
	if pr.sized {
		pr.bar.SetCurrent(pr.bytes.Load())
	}
}

func (pr *progress) rate() float64 {
	secs := time.Since(pr.start).Seconds()
	if secs <= 0 {
		return 0
	}
	return float64(pr.records.Load()) / secs
}

// read counts n bytes of input read.
func (pr *progress) read(n int) {
	if pr != nil {
		pr.bytes.Add(int64(n))
	}
}

// record counts one record read.
func (pr *progress) record() {
	if pr != nil {
		pr.records.Add(1)
	}
}

// finish stops drawing: the bar completes when ok, else it is aborted.
func (pr *progress) finish(ok bool) {
	if pr == nil {
		return
	}
	close(pr.stop)
	<-pr.stopped
	if ok {
		pr.bar.SetTotal(-1, true)
	} else {
		pr.bar.Abort(false)
	}
	pr.p.Wait()
}
