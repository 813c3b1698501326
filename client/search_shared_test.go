package client_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/protobase/protobase/client"
	pb "github.com/protobase/protobase/gen/protobase/v1"
)

// checkRange reads the results of emailRange(lo, hi) and checks that they
// are the records lo..hi-1 in order.
func checkRange(r *client.Results, lo, hi int) error {
	recs, err := r.All()
	if err != nil {
		return fmt.Errorf("range %d..%d: %w", lo, hi, err)
	}
	if len(recs) != hi-lo {
		return fmt.Errorf("range %d..%d: %d records", lo, hi, len(recs))
	}
	for i, a := range recs {
		if id := userIDOf(a.Value); id != int64(lo+i) {
			return fmt.Errorf("range %d..%d: record %d has id %d", lo, hi, i, id)
		}
	}
	return nil
}

// userIDOf is the id of a shop.User record, or -1.
func userIDOf(v []byte) int64 {
	num, typ, n := protowire.ConsumeTag(v)
	if n < 0 || num != 1 || typ != protowire.VarintType {
		return -1
	}
	id, m := protowire.ConsumeVarint(v[n:])
	if m < 0 {
		return -1
	}
	return int64(id)
}

// sharedFind is one find of a goroutine sharing a Search stream: a
// lookup, a range, a failing query, or a lookup whose results are never
// read; it checks what it reads.
func sharedFind(s *client.Search, rng *rand.Rand, n int) error {
	switch k := rng.IntN(8); {
	case k < 4:
		id := rng.IntN(n)
		r, err := s.Query(&pb.Query{Type: "shop.User", Where: client.Eq("id", id)})
		if err != nil {
			return err
		}
		recs, err := r.All()
		if err != nil {
			return fmt.Errorf("lookup of %d: %w", id, err)
		}
		if len(recs) != 1 || userIDOf(recs[0].Value) != int64(id) {
			return fmt.Errorf("lookup of %d: %d records", id, len(recs))
		}
	case k < 6:
		lo := rng.IntN(n - 600)
		hi := lo + 1 + rng.IntN(600)
		r, err := s.Query(emailRange(lo, hi))
		if err != nil {
			return err
		}
		return checkRange(r, lo, hi)
	case k < 7:
		r, err := s.Query(&pb.Query{Type: "demo.NoSuchType"})
		if err != nil {
			return err
		}
		var qe *client.QueryError
		if _, err := r.All(); !errors.As(err, &qe) {
			return fmt.Errorf("query of an unknown type: %w, want a QueryError", err)
		}
	default:
		// Results never read must not hold up the other finds.
		_, err := s.Query(&pb.Query{Type: "shop.User", Where: client.Eq("id", rng.IntN(n))})
		return err
	}
	return nil
}

// TestSearchSharedByGoroutines runs finds from 16 goroutines on one
// Search stream, each waiting for its own results while the others wait
// for theirs, so that whichever goroutine receives a response delivers
// the others' results to them: every goroutine must read exactly its own
// query's results.
func TestSearchSharedByGoroutines(t *testing.T) {
	const n, goroutines, finds = 3000, 16, 150
	c := startSearchServer(t, n)
	s, err := c.NewSearch(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	errs := make(chan error, goroutines)
	for g := range goroutines {
		go func() {
			rng := rand.New(rand.NewPCG(uint64(g), 38))
			for range finds {
				if err := sharedFind(s, rng, n); err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		}()
	}
	for range goroutines {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestSearchUnreadResultsDoNotBlockSending sends requests, and results,
// larger than HTTP/2's flow-control windows (several MiB each way), reading
// no results until every request is sent: the server stops reading requests while it
// cannot send results, so the stream must receive them while a request is
// being sent, even though no goroutine waits for results. Then it reads
// them in reverse order.
func TestSearchUnreadResultsDoNotBlockSending(t *testing.T) {
	const n, requests, ranged = 3000, 300, 100
	c := startSearchServer(t, n)
	// A stream that stopped making progress ends with DeadlineExceeded
	// instead of hanging the test.
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	s, err := c.NewSearch(ctx)
	if err != nil {
		t.Fatal(err)
	}
	lookups := make([]*pb.Query, 1000)
	for i := range lookups {
		lookups[i] = &pb.Query{Type: "shop.User", Where: client.Eq("id", (i*7)%n)}
	}
	var sent [][]*client.Results
	for range requests {
		rs, err := s.Batch(append([]*pb.Query{emailRange(0, ranged)}, lookups...))
		if err != nil {
			t.Fatalf("after %d requests: %v", len(sent), err)
		}
		sent = append(sent, rs)
	}
	for i := len(sent) - 1; i >= 0; i-- {
		if err := checkRange(sent[i][0], 0, ranged); err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		for j, r := range sent[i][1:] {
			recs, err := r.All()
			if err != nil || len(recs) != 1 || userIDOf(recs[0].Value) != int64((j*7)%n) {
				t.Fatalf("request %d, lookup %d: %d records, %v", i, j, len(recs), err)
			}
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestSearchEndsEveryWaiter cancels a Search stream, and closes the
// connection under another, while 16 goroutines wait for results on it:
// every goroutine's find must end with an error (none waits forever), and
// the stream must leave no goroutine behind.
func TestSearchEndsEveryWaiter(t *testing.T) {
	const n, goroutines = 3000, 16
	addr, _ := startSearchServerAddr(t, n)
	for _, how := range []string{"cancel", "connection closed"} {
		t.Run(how, func(t *testing.T) {
			base := runtime.NumGoroutine()
			conn, err := client.Dial(addr)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			s, err := conn.NewSearch(ctx)
			if err != nil {
				t.Fatal(err)
			}
			var started, wg sync.WaitGroup
			started.Add(goroutines)
			errs := make(chan error, goroutines)
			for g := range goroutines {
				wg.Go(func() {
					rng := rand.New(rand.NewPCG(uint64(g), 7))
					var err error
					i := 0
					for ; err == nil; i++ {
						if i == 20 {
							started.Done()
						}
						err = sharedFind(s, rng, n)
					}
					if i <= 20 {
						started.Done()
					}
					errs <- err
				})
			}
			started.Wait()
			if how == "cancel" {
				cancel()
			} else {
				_ = conn.Close()
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				if code := status.Code(err); code != codes.Canceled && code != codes.Unavailable {
					t.Errorf("find after the stream ended: %v", err)
				}
			}
			if _, err := s.Query(&pb.Query{Type: "shop.User", Where: client.Eq("id", 1)}); err == nil {
				t.Error("a query was sent on an ended stream")
			}
			_ = s.Close()
			_ = conn.Close()
			// grpc-go ends its own goroutines of the stream and connection
			// shortly after they close.
			for i := 0; runtime.NumGoroutine() > base && i < 100; i++ {
				time.Sleep(50 * time.Millisecond)
			}
			if got := runtime.NumGoroutine(); got > base {
				buf := make([]byte, 1<<20)
				t.Errorf("%d goroutines, %d before the stream:\n%s", got, base, buf[:runtime.Stack(buf, true)])
			}
		})
	}
}
