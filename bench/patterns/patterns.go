// Package patterns is the lab's patterns experiment (seed 001): the three
// ways to use a bidirectional stream, for searches and for writes.
package patterns

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/pflag"

	"github.com/protobase/protobase/bench"
	pb "github.com/protobase/protobase/gen/protobase/v1"
)

func init() { bench.Register(func() bench.Experiment { return new(Experiment) }) }

// seed001 are seed 001's figures (op/s) by pattern, measured at batch 1
// on a search stream.
var seed001 = map[string]float64{"alternate": 9960, "send-all": 34197, "no-response": 71489}

const seed001Source = "seed 001 (gRPC throughput: communication patterns)"

// Pattern names, in the order the seed gives them.
const (
	patAlternate  = "alternate"
	patSendAll    = "send-all"
	patNoResponse = "no-response"
)

// roundOps is about how many queries or records send-all sends before
// reading their answers (see bench.SendAllSearch): enough that the answers
// arrive in bulk, few enough that a round fits a short run.
const roundOps = 1000

// roundRequests is the requests per send-all round at batch.
func roundRequests(batch int) int { return max(1, roundOps/batch) }

// Experiment is seed 001: the three ways to use a bidirectional stream,
// for searches (primary-key lookups) and for writes (the Write stream):
//
//   - alternate: send a request, wait for its answer (searches: the
//     results; writes: an acknowledgement), repeat;
//   - send-all: send a round of requests, then read all their answers;
//   - no-response: send requests and never read an answer (searches:
//     Lab.Sink; writes: no acknowledgement requested), then close and get
//     one final status.
//
// Writes upsert the same pre-encoded batches over and over, so that their
// cost does not grow with the data; they run on a server that does not
// fsync (an --addr server runs its own mode, which the output says), since
// the experiment is about the stream, not the disk.
type Experiment struct {
	Records int
	Batches []int

	// search and writes count what the workloads did (for the checks and
	// for tests): queries answered, writes applied, messages received.
	search bench.SearchCounter
	writes writeCounter
}

// writeCounter accumulates what write workloads did across runs.
type writeCounter struct {
	records uint64 // records sent (and applied)
	acks    uint64 // acknowledgements received
	noResp  uint64 // messages received on no-response streams: must stay 0
}

// Name implements bench.Experiment.
func (*Experiment) Name() string { return "patterns" }

// Describe implements bench.Experiment.
func (*Experiment) Describe() string {
	return "alternate vs send-all-then-receive-all vs send-all-no-response, for searches and writes (seed 001)"
}

// Flags implements bench.Experiment.
func (p *Experiment) Flags(fs *pflag.FlagSet) {
	fs.IntVar(&p.Records, "records", 0, "records preloaded for the searches (0: 100000, 10000 with --quick)")
	fs.IntSliceVar(&p.Batches, "batches", nil, "queries or records per request (default 1,100)")
}

// Run implements bench.Experiment.
func (p *Experiment) Run(ctx context.Context, env *bench.Env) (*bench.Result, error) {
	if p.Records == 0 {
		p.Records = 100000
		if env.Quick {
			p.Records = 10000
		}
	}
	if len(p.Batches) == 0 {
		p.Batches = []int{1, 100}
	}
	if p.Records < 1 {
		return nil, fmt.Errorf("--records must be at least 1, got %d", p.Records)
	}
	if err := bench.CheckBatches(p.Batches); err != nil {
		return nil, err
	}
	t, err := env.Target(ctx, bench.TargetConfig{})
	if err != nil {
		return nil, err
	}
	if err := t.LoadItems(ctx, env.Progress, p.Records); err != nil {
		return nil, err
	}
	wt := t
	if t.Embedded {
		if wt, err = env.Target(ctx, bench.TargetConfig{NoSync: true}); err != nil {
			return nil, err
		}
		if err := wt.EnsureSchema(ctx, bench.ItemSchema()); err != nil {
			return nil, err
		}
	}
	res := &bench.Result{Chart: &bench.Chart{
		Title: "Communication patterns on one bidirectional stream", Kind: bench.Bars,
		XLabel: "pattern (an operation: one query searched, or one record written)", YLabel: "operations/s", X: "pattern", Series: "config", LogY: true,
		Better: bench.HigherBetter,
	}}
	for _, api := range []string{"search", "write"} {
		for _, batch := range p.Batches {
			config := fmt.Sprintf("%s, batch %d", api, batch)
			for _, pat := range []string{patAlternate, patSendAll, patNoResponse} {
				w, unit, err := p.workload(t, wt, api, pat, batch)
				if err != nil {
					return nil, err
				}
				label := fmt.Sprintf("%s %s batch=%d", api, pat, batch)
				s, err := env.Measure(ctx, label, w)
				if err != nil {
					return nil, err
				}
				var ref *bench.Reference
				if v, ok := seed001[pat]; ok && api == "search" && batch == 1 {
					ref = &bench.Reference{Value: v, Source: seed001Source}
				}
				params := map[string]any{"api": api, "pattern": pat, "batch": batch, "config": config}
				res.Rows = append(res.Rows, bench.NewRow(label, params, unit, s.Ops, ref))
			}
		}
	}
	if p.writes.noResp != 0 {
		return nil, fmt.Errorf("no-response write streams received %d messages", p.writes.noResp)
	}
	sync := "without fsync"
	if wt.Sync {
		sync = "with fsync (the --addr server's own mode)"
	}
	res.Notes = append(res.Notes,
		fmt.Sprintf("searches are primary-key lookups over %d records; send-all sends rounds of about %d operations, then reads their answers", p.Records, roundOps),
		"writes upsert the same pre-encoded batches through the Write stream, "+sync+"; no-response asks for no acknowledgement and gets only the final status",
		"published figures: seed 001 measured the patterns on a search stream at batch 1")
	return res, nil
}

// workload returns the workload of one configuration and its unit:
// searches on t, writes on wt.
func (p *Experiment) workload(t, wt *bench.Target, api, pat string, batch int) (bench.Workload, string, error) {
	if api == "write" {
		frames, err := writeFrames(batch, pat != patNoResponse)
		if err != nil {
			return nil, "", err
		}
		return p.writeWorkload(wt, pat, frames, batch), "records/s", nil
	}
	frames, err := bench.SearchFrames(batch, p.Records)
	if err != nil {
		return nil, "", err
	}
	chk := bench.SearchCheck{Records: 1}
	switch pat {
	case patAlternate:
		return bench.AlternateSearch(t.API.Search, frames, batch, chk, &p.search), "queries/s", nil
	case patSendAll:
		return bench.SendAllSearch(t.API.Search, frames, batch, roundRequests(batch), chk, &p.search), "queries/s", nil
	}
	return bench.SinkSearch(t.Lab, frames, batch, chk, &p.search), "queries/s", nil
}

// writeFrames encodes WriteStreamRequests upserting batch items each, as
// many as cover ids 0..9999 (at least one), asking for an acknowledgement
// when ack is set.
func writeFrames(batch int, ack bool) ([]bench.Frame, error) {
	n := max(1, 10000/batch)
	frames := make([]bench.Frame, n)
	for i := range frames {
		var b []byte
		b = bench.AppendWriteOp(b, pb.WriteOp_WRITE_OP_UPSERT)
		b, _ = bench.AppendWriteRecords(b, 2, bench.ItemType, int64(i*batch), batch)
		if ack {
			b = bench.AppendAck(b)
		}
		frames[i] = bench.Frame(b)
	}
	return frames, nil
}

func (p *Experiment) writeWorkload(t *bench.Target, pat string, frames []bench.Frame, batch int) bench.Workload {
	codec := bench.CallCodec()
	perRound := 1
	if pat == patSendAll {
		perRound = roundRequests(batch)
	}
	return func(ctx context.Context, d time.Duration) (bench.Count, error) {
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		st, err := t.API.Write(ctx, codec)
		if err != nil {
			return bench.Count{}, fmt.Errorf("open write stream: %w", err)
		}
		ack := new(pb.WriteStreamResponse)
		var sent, acks uint64
		cyc := bench.FrameCycle{Frames: frames}
		start := time.Now()
		deadline := start.Add(d)
		for {
			for i := 0; i < perRound; i++ {
				if err := cyc.Send(st); err != nil {
					return bench.Count{}, err
				}
				sent++
			}
			if pat != patNoResponse {
				for acks < sent {
					if err := st.RecvMsg(ack); err != nil {
						return bench.Count{}, fmt.Errorf("receive acknowledgement: %w", err)
					}
					acks++
				}
			}
			if !time.Now().Before(deadline) {
				break
			}
		}
		if err := st.CloseSend(); err != nil {
			return bench.Count{}, fmt.Errorf("close: %w", err)
		}
		// The final status comes once every batch is applied: for
		// no-response, that is when the work is done.
		extra, err := bench.Drain(st, ack)
		if err != nil {
			return bench.Count{}, fmt.Errorf("write stream: %w", err)
		}
		elapsed := time.Since(start)
		if extra != 0 {
			return bench.Count{}, fmt.Errorf("%s: %d unexpected messages after the last acknowledgement", pat, extra)
		}
		if pat == patNoResponse {
			p.writes.noResp += acks + extra
		}
		p.writes.records += sent * uint64(batch)
		p.writes.acks += acks
		return bench.Count{Ops: int64(sent) * int64(batch), Elapsed: elapsed}, nil
	}
}
