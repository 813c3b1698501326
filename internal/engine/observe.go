package engine

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/protobase/protobase/internal/query"
)

// Observer receives the timings that latency histograms are built from.
// The engine calls it once per write batch, per durability point, per
// Search run, per Get and per watch response: never per record. Its
// methods must be cheap and safe for concurrent use.
type Observer interface {
	// WriteDurable reports a batch made durable: total runs from Apply's
	// start to the batch being known durable; apply is Apply's own time
	// less commitWait, the wait for the commit lock behind other
	// streams' batches; fsync runs from the batch's apply to it being
	// known durable (a stream that sends its next batch at once learns
	// it when it next waits).
	WriteDurable(total, apply, commitWait, fsync time.Duration)
	// GroupCommit reports the batches, and their records, that one
	// wait for the write-ahead log's fsync found made durable together
	// with the batch it waited for.
	GroupCommit(batches, records uint64)
	// Search reports queries of one Search request that ran together
	// with the access path access, each answered took after the run
	// started: a request's primary-key lookups run as one, any other
	// query alone.
	Search(access string, queries int, took time.Duration)
	// Get reports one Get request.
	Get(took time.Duration)
	// WatchSent reports a watch response sent lag after the commit of
	// the newest change it carries.
	WatchSent(lag time.Duration)
}

// timed reports whether a Search run takes the time: for the slow-query
// log, the Observer or spans.
func (e *Engine) timed() bool {
	return e.opts.SlowQuery > 0 || e.opts.Observer != nil || e.opts.Tracer != nil
}

// searchTimes are when a Search query, or a run of lookups, started
// and, for a query planned on its own, when its plan was ready; zero
// when the run is not timed.
type searchTimes struct{ start, planned time.Time }

// searchStart starts timing a query when something takes the time.
func (e *Engine) searchStart() searchTimes {
	if !e.timed() {
		return searchTimes{}
	}
	return searchTimes{start: time.Now()}
}

// plannedNow notes that the query's plan is ready.
func (t *searchTimes) plannedNow() {
	if !t.start.IsZero() {
		t.planned = time.Now()
	}
}

// observeSearch reports n queries of access path a timed by t, and adds
// their span under ctx's, with its planning and its store reads apart
// when the query was planned on its own.
func (e *Engine) observeSearch(ctx context.Context, a query.Access, n int, t searchTimes) {
	if t.start.IsZero() {
		return
	}
	traced := e.traced(ctx)
	if !traced {
		// The monotonic clock alone: half of time.Now's clock reads.
		if obs := e.opts.Observer; obs != nil {
			obs.Search(a.String(), n, time.Since(t.start))
		}
		return
	}
	end := time.Now()
	if obs := e.opts.Observer; obs != nil {
		obs.Search(a.String(), n, end.Sub(t.start))
	}
	qctx, s := e.opts.Tracer.Start(ctx, "protobase.query", trace.WithTimestamp(t.start),
		trace.WithAttributes(attribute.String("protobase.access", a.String()), attribute.Int("protobase.queries", n)))
	if !t.planned.IsZero() {
		e.span(qctx, "protobase.plan", t.start, t.planned)
		e.span(qctx, "protobase.read", t.planned, end)
	}
	s.End(trace.WithTimestamp(end))
}

// observeGet reports a Get that started at start.
func observeGet(obs Observer, start time.Time) { obs.Get(time.Since(start)) }

// traced reports whether ctx carries a span that records, for which
// the engine adds its own.
func (e *Engine) traced(ctx context.Context) bool {
	return e.opts.Tracer != nil && trace.SpanFromContext(ctx).IsRecording()
}

// span adds a finished span named name from start to end under ctx's.
func (e *Engine) span(ctx context.Context, name string, start, end time.Time, attrs ...attribute.KeyValue) context.Context {
	ctx, s := e.opts.Tracer.Start(ctx, name, trace.WithTimestamp(start), trace.WithAttributes(attrs...))
	s.End(trace.WithTimestamp(end))
	return ctx
}

// writeSpans adds a durable batch's spans: the batch from receipt to
// durable, with its apply, the commit wait within it, and its fsync.
func (e *Engine) writeSpans(t *batchTimes, durable time.Time) {
	ctx, s := e.opts.Tracer.Start(t.ctx, "protobase.write_batch", trace.WithTimestamp(t.start))
	actx := e.span(ctx, "protobase.apply", t.start, t.applied)
	if !t.waitStart.IsZero() {
		e.span(actx, "protobase.commit_wait", t.waitStart, t.waitStart.Add(t.wait))
	}
	e.span(ctx, "protobase.fsync", t.applied, durable)
	s.End(trace.WithTimestamp(durable))
}

// batchTimes are what Observer.WriteDurable and GroupCommit report of a
// batch: when Apply started and the batch was applied, how long it waited
// for the commit lock, and the engine's count of committed batches and
// records with it.
type batchTimes struct {
	start, applied   time.Time
	wait             time.Duration
	waitStart        time.Time
	commits, records uint64
	// ctx carries the call's recording span that the batch's spans are
	// children of; nil when the call is not traced.
	ctx context.Context
}
