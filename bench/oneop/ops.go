package oneop

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"sync/atomic"

	"google.golang.org/grpc"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/protobase/protobase/bench"
	"github.com/protobase/protobase/client"
	pb "github.com/protobase/protobase/gen/protobase/v1"
)

// The operations of the Protobase rows, each through the Go client as an
// application calls it, one operation per round trip.

// keys draws the keys of one client's reads, uniformly over the loaded
// records, from a seed of its own so that clients read different keys.
func keys(records, cl int) func() int64 {
	rng := rand.New(rand.NewPCG(uint64(cl)+1, 0x6f6e656f70))
	return func() int64 { return rng.Int64N(int64(records)) }
}

// ids hands out the ids of new records: every write inserts a record
// that did not exist, as a row INSERT does.
type ids struct{ next atomic.Int64 }

func (n *ids) take() int64 { return n.next.Add(1) - 1 }

// getOp reads one record by primary key with a unary Get.
func getOp(c *client.Client, records, cl int) func(ctx context.Context) error {
	key := keys(records, cl)
	return func(ctx context.Context) error {
		id := key()
		recs, err := c.Get(ctx, bench.ItemType, id)
		if err != nil {
			return fmt.Errorf("get %d: %w", id, err)
		}
		if len(recs) != 1 || recs[0] == nil {
			return fmt.Errorf("get %d: no record", id)
		}
		return nil
	}
}

// openGet is the get row: unary Gets, nothing to open.
func openGet(c *client.Client, records int) opener {
	return func(_ context.Context, cl int) (session, error) {
		return session{do: getOp(c, records, cl), close: func() error { return nil }}, nil
	}
}

// queryOp reads one record by primary key with a unary Query (a
// condition on the key), as an application that filters by key calls it.
func queryOp(c *client.Client, records, cl int) func(ctx context.Context) error {
	key := keys(records, cl)
	return func(ctx context.Context) error {
		id := key()
		page, err := c.Query(ctx, bench.LookupQuery(id), 0, "")
		if err != nil {
			return fmt.Errorf("query %d: %w", id, err)
		}
		if len(page.Records) != 1 {
			return fmt.Errorf("query %d: %d records, want 1", id, len(page.Records))
		}
		return nil
	}
}

// openQuery is the query row: unary Queries, nothing to open.
func openQuery(c *client.Client, records int) opener {
	return func(_ context.Context, cl int) (session, error) {
		return session{do: queryOp(c, records, cl), close: func() error { return nil }}, nil
	}
}

// openSearch is the search row: one Search stream per client, each query
// in a request of its own, its result read before the next is sent.
func openSearch(c *client.Client, records int) opener {
	return func(ctx context.Context, cl int) (session, error) {
		s, err := c.NewSearch(ctx)
		if err != nil {
			return session{}, err
		}
		key := keys(records, cl)
		do := func(context.Context) error {
			id := key()
			r, err := s.Query(bench.LookupQuery(id))
			if err != nil {
				return fmt.Errorf("search %d: %w", id, err)
			}
			recs, err := r.All()
			if err != nil {
				return fmt.Errorf("search %d: %w", id, err)
			}
			if len(recs) != 1 {
				return fmt.Errorf("search %d: %d records, want 1", id, len(recs))
			}
			return nil
		}
		return session{do: do, close: s.Close}, nil
	}
}

// writeOp inserts one new record on w and waits until the server says it
// is durable: one request asking for its acknowledgement per record.
func writeOp(w *client.Writer, next *ids, written *atomic.Uint64) func(context.Context) error {
	return func(context.Context) error {
		id := next.take()
		rec := &anypb.Any{TypeUrl: bench.TypeURLPrefix + bench.ItemType, Value: bench.AppendItem(nil, id)}
		if err := w.WriteAny(rec); err != nil {
			return fmt.Errorf("write %d: %w", id, err)
		}
		if err := w.Flush(); err != nil {
			return fmt.Errorf("write %d: %w", id, err)
		}
		written.Add(1)
		return nil
	}
}

// closeWriter closes w, which has nothing left to flush.
func closeWriter(w *client.Writer) func() error {
	return func() error {
		_, err := w.Close()
		return err
	}
}

// openWrite is the write row: one Write stream per client, inserting a
// record at a time, each acknowledged (durable) before the next.
func openWrite(c *client.Client, next *ids, written *atomic.Uint64) opener {
	return func(ctx context.Context, _ int) (session, error) {
		w, err := c.NewWriter(ctx, client.Insert, client.WriterOptions{})
		if err != nil {
			return session{}, err
		}
		return session{do: writeOp(w, next, written), close: closeWriter(w)}, nil
	}
}

// sharedWriter is the write shared row: one Write stream for every
// goroutine of a run, each inserting one record and flushing, as an
// application that shares one client.Writer does.
type sharedWriter struct {
	c       *client.Client
	next    *ids
	written *atomic.Uint64
	w       *client.Writer // opened by client 0's session, closed by it
}

// open opens the run's writer for client 0 and shares it with the rest
// (loop opens the sessions in order and closes them after every client
// has stopped).
func (s *sharedWriter) open(ctx context.Context, cl int) (session, error) {
	end := func() error { return nil }
	if cl == 0 {
		w, err := s.c.NewWriter(ctx, client.Insert, client.WriterOptions{})
		if err != nil {
			return session{}, err
		}
		s.w, end = w, closeWriter(w)
	}
	return session{do: writeOp(s.w, s.next, s.written), close: end}, nil
}

// openMix is the mix row: each client draws a Get or a durable insert
// with even odds for every operation.
func openMix(c *client.Client, records int, next *ids, written *atomic.Uint64) opener {
	return func(ctx context.Context, cl int) (session, error) {
		w, err := c.NewWriter(ctx, client.Insert, client.WriterOptions{})
		if err != nil {
			return session{}, err
		}
		read, write := getOp(c, records, cl), writeOp(w, next, written)
		coin := rand.New(rand.NewPCG(uint64(cl)+1, 0x6d6978))
		do := func(ctx context.Context) error {
			if coin.IntN(2) == 0 {
				return read(ctx)
			}
			return write(ctx)
		}
		return session{do: do, close: closeWriter(w)}, nil
	}
}

// openHealth is the unary ceiling: a health check, which the server
// answers without authentication, storage or the engine.
func openHealth(c *client.Client) opener {
	h := healthpb.NewHealthClient(c.Conn())
	return func(context.Context, int) (session, error) {
		do := func(ctx context.Context) error {
			resp, err := h.Check(ctx, &healthpb.HealthCheckRequest{})
			if err != nil {
				return fmt.Errorf("health check: %w", err)
			}
			if resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
				return fmt.Errorf("health check: %v", resp.GetStatus())
			}
			return nil
		}
		return session{do: do, close: func() error { return nil }}, nil
	}
}

// openEcho is the stream ceiling: Lab.Echo at batch 1, one stream per
// client, each one-query request answered (without storage) before the
// next is sent.
func openEcho(t *bench.Target, records int) opener {
	return func(ctx context.Context, cl int) (session, error) {
		ctx, cancel := context.WithCancel(ctx)
		st, err := t.Lab.Echo(ctx)
		if err != nil {
			cancel()
			return session{}, err
		}
		key := keys(records, cl)
		do := func(context.Context) error {
			if err := st.Send(&pb.SearchRequest{Queries: []*pb.Query{bench.LookupQuery(key())}}); err != nil {
				return bench.StreamError(st, "echo", err)
			}
			resp, err := st.Recv()
			if err != nil {
				return fmt.Errorf("echo: %w", err)
			}
			if len(resp.Done) != 1 || len(resp.Results) != 1 {
				return fmt.Errorf("echo: %d results and %d ends for one query", len(resp.Results), len(resp.Done))
			}
			return nil
		}
		end := func() error {
			defer cancel()
			return endStream(st, "echo")
		}
		return session{do: do, close: end}, nil
	}
}

// endStream closes the sending side of a stream whose queries have all
// been answered and checks that the server ends it with nothing more.
func endStream(st grpc.ClientStream, what string) error {
	if err := st.CloseSend(); err != nil {
		return fmt.Errorf("%s: close: %w", what, err)
	}
	switch err := st.RecvMsg(new(pb.SearchResponse)); {
	case err == nil:
		return fmt.Errorf("%s: a response after the last query's", what)
	case !errors.Is(err, io.EOF):
		return fmt.Errorf("%s: end of stream: %w", what, err)
	}
	return nil
}
