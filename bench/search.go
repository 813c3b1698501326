package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"google.golang.org/grpc"

	labv1 "github.com/protobase/protobase/gen/protobase/lab/v1"
	pb "github.com/protobase/protobase/gen/protobase/v1"
)

// The search workloads shared by batching and patterns. Each sends
// pre-encoded SearchRequests of batch queries (frames, cycled) and counts
// what comes back with a searchTally; none allocates per query.

// SearchCounter accumulates what search workloads did across runs, so
// that an experiment (and its tests) can check the server's counters
// against it. Workloads of one experiment run one at a time.
type SearchCounter struct {
	Queries   uint64 // queries answered (or, for the sink, run)
	Responses uint64 // response messages the client received
}

// OpenSearch opens a bidirectional search stream (Search or Lab.Echo).
type OpenSearch func(ctx context.Context, opts ...grpc.CallOption) (grpc.BidiStreamingClient[pb.SearchRequest, pb.SearchResponse], error)

// SearchCheck says what every answered query must have returned.
type SearchCheck struct {
	// Records is the records each query finds (1 for a lookup or an echo).
	Records uint64
}

// AlternateSearch sends one request, reads until all its queries are
// answered, and repeats: the alternating pattern of seeds 000 and 001.
func AlternateSearch(open OpenSearch, frames []Frame, batch int, chk SearchCheck, ctr *SearchCounter) Workload {
	return searchRounds(open, frames, batch, 1, chk, ctr)
}

// SendAllSearch sends rounds of perRound requests, then reads every
// answer of the round: seed 001's send-all-then-receive-all. Rounds keep
// the unread answers within the flow-control windows (see DialOptions);
// an unbounded "all" would stall the stream on them.
func SendAllSearch(open OpenSearch, frames []Frame, batch, perRound int, chk SearchCheck, ctr *SearchCounter) Workload {
	return searchRounds(open, frames, batch, perRound, chk, ctr)
}

func searchRounds(open OpenSearch, frames []Frame, batch, perRound int, chk SearchCheck, ctr *SearchCounter) Workload {
	codec := CallCodec()
	return func(ctx context.Context, d time.Duration) (Count, error) {
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		st, err := open(ctx, codec)
		if err != nil {
			return Count{}, fmt.Errorf("open stream: %w", err)
		}
		var tally searchTally
		var sent uint64
		cyc := FrameCycle{Frames: frames}
		start := time.Now()
		deadline := start.Add(d)
		for {
			for i := 0; i < perRound; i++ {
				if err := cyc.Send(st); err != nil {
					return Count{}, err
				}
				sent += uint64(batch)
			}
			for tally.answered() < sent {
				if err := st.RecvMsg(&tally); err != nil {
					return Count{}, fmt.Errorf("receive: %w", err)
				}
			}
			if !time.Now().Before(deadline) {
				break
			}
		}
		elapsed := time.Since(start)
		if err := st.CloseSend(); err != nil {
			return Count{}, fmt.Errorf("close: %w", err)
		}
		if err := st.RecvMsg(&tally); !errors.Is(err, io.EOF) {
			return Count{}, fmt.Errorf("end of stream: %w (or an unexpected response)", err)
		}
		if err := chk.verify(&tally, sent); err != nil {
			return Count{}, err
		}
		ctr.Queries += sent
		ctr.Responses += tally.responses
		return Count{Ops: int64(sent), Elapsed: elapsed}, nil
	}
}

func (c SearchCheck) verify(t *searchTally, sent uint64) error {
	switch {
	case t.errors > 0:
		return fmt.Errorf("%d of %d queries failed, first: %s", t.errors, sent, t.firstErr)
	case t.done != sent:
		return fmt.Errorf("%d queries answered, %d sent", t.done, sent)
	case t.records != c.Records*sent:
		return fmt.Errorf("%d queries found %d records, want %d", sent, t.records, c.Records*sent)
	}
	return nil
}

// StreamError turns a failed send into the stream's status, which says why.
func StreamError(st grpc.ClientStream, what string, err error) error {
	if errors.Is(err, io.EOF) {
		if rerr := st.RecvMsg(new(pb.SearchResponse)); rerr != nil && !errors.Is(rerr, io.EOF) {
			return fmt.Errorf("%s: %w", what, rerr)
		}
	}
	return fmt.Errorf("%s: %w", what, err)
}

// SinkSearch sends requests for d through Lab.Sink, which runs every query
// and sends nothing back until the client closes; then one summary comes
// back. Seed 001's send-all-with-no-response.
func SinkSearch(lab labv1.LabClient, frames []Frame, batch int, chk SearchCheck, ctr *SearchCounter) Workload {
	codec := CallCodec()
	return func(ctx context.Context, d time.Duration) (Count, error) {
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		st, err := lab.Sink(ctx, codec)
		if err != nil {
			return Count{}, fmt.Errorf("open sink: %w", err)
		}
		var sent uint64
		cyc := FrameCycle{Frames: frames}
		start := time.Now()
		deadline := start.Add(d)
		for i := 0; ; i++ {
			if err := cyc.Send(st); err != nil {
				return Count{}, err
			}
			sent += uint64(batch)
			// Checking the clock every 64 requests keeps it out of the loop.
			if i&63 == 63 && !time.Now().Before(deadline) {
				break
			}
		}
		sum, err := st.CloseAndRecv()
		if err != nil {
			return Count{}, fmt.Errorf("sink summary: %w", err)
		}
		// The summary comes once the server ran every query: the time to
		// it is the time the work took.
		elapsed := time.Since(start)
		switch {
		case sum.Errors > 0:
			return Count{}, fmt.Errorf("sink: %d of %d queries failed", sum.Errors, sent)
		case sum.Queries != sent:
			return Count{}, fmt.Errorf("sink ran %d queries, %d sent", sum.Queries, sent)
		case sum.Records != chk.Records*sent:
			return Count{}, fmt.Errorf("sink: %d queries found %d records, want %d", sent, sum.Records, chk.Records*sent)
		}
		ctr.Queries += sent
		ctr.Responses++ // the summary, the one message that came back
		return Count{Ops: int64(sent), Elapsed: elapsed}, nil
	}
}
