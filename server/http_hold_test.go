package server_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/anypb"

	pb "github.com/protobase/protobase/gen/protobase/v1"
	"github.com/protobase/protobase/server"
)

// A REST call waiting for the result budget to convert JSON stops waiting
// when its client goes away, whether it waits to render its response or to
// parse its request: a Search stream that never reads holds most of the
// budget, so without the client's context the wait would last the
// budget's 10 s. Each case polls the server's goroutines until one waits
// in the conversion's hold, cancels the request, and wants that goroutine
// gone within 3 s, while the stream still holds the budget.
func TestHTTPTranscodeWaitEndsWithClient(t *testing.T) {
	// Responses of 256 KiB: a streamed answer reserves that much of the
	// budget before the gateway renders it.
	ts := startTransports(t, server.Config{MaxResultBufferBytes: 4 * mib, MaxResultBytes: 256 << 10, CacheBytes: 8 * mib, NoSync: true})
	ts.MustApply(map[string]string{"shop.proto": shopProto, "nums.proto": numsProto})
	ts.MustWrite(insert, []*anypb.Any{
		nums(2, 10_000), // 10 KiB, about 3 MiB to render as JSON
		ts.Rec("shop.User", `{"id": 1, "email": "big", "name": "`+strings.Repeat("n", 3*mib)+`"}`),
	})
	// A Search stream that never reads holds the 3 MiB user's response
	// of the budget until gRPC has written it, which the client's 64 KiB
	// window stops: 1 MiB is left, enough for the 10 KiB record and not
	// for its JSON.
	search, stopSearch := context.WithCancel(context.Background())
	defer stopSearch()
	st, err := nonReadingConn(t, ts.Srv.Addr()).Search(search)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Send(&pb.SearchRequest{Queries: []*pb.Query{{Type: "shop.User", Filter: "id = 1"}}}); err != nil {
		t.Fatal(err)
	}
	base := "http://" + ts.Srv.HTTPAddr()
	for _, c := range []struct {
		name, path, contentType, body, frame string
	}{
		{"response", "/v1/records:get", "application/json", `{"type": "nums.Nums", "keys": [2]}`, "gateway.(*codec).Marshal"},
		{"streamed response", "/v1/search", "application/x-ndjson", `{"queries": [{"type": "nums.Nums", "filter": "id = 2"}]}`, "gateway.(*httpStream["},
		{"request", "/v1/records:insert", "application/json",
			`{"records": [{"@type": "type.googleapis.com/nums.Nums", "id": "3", "v": [` + strings.Repeat("0,", 12_000) + `0]}]}`,
			"gateway.(*decoder).hold"},
	} {
		t.Run(c.name, func(t *testing.T) {
			waitInHold(t, base+c.path, c.contentType, c.body, c.frame)
		})
	}
	stopSearch()
	if code, body := restClients(t, ts)[0].post("/v1/records:get", `{"type": "nums.Nums", "keys": [2]}`); code != http.StatusOK {
		t.Fatalf("get once the search is cancelled: %d %.200s", code, body)
	}
}

// waitInHold posts body (of contentType) to url until a server goroutine waits in frame
// (a request answered meanwhile means the budget is not full yet: it tries
// again), then cancels the request and wants that wait to end within 3 s.
func waitInHold(t *testing.T, url, contentType, body, frame string) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); {
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() {
			req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
			if err == nil {
				var resp *http.Response
				req.Header.Set("Content-Type", contentType)
				if resp, err = http.DefaultClient.Do(req); err == nil {
					err = resp.Body.Close()
				}
			}
			done <- err
		}()
		waiting := pollGoroutines(frame, true, time.Second)
		cancel()
		if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
			t.Fatal(err)
		}
		if !waiting {
			continue // answered, or not yet at the hold: the budget is not full yet
		}
		if !pollGoroutines(frame, false, 3*time.Second) {
			t.Fatalf("a goroutine still waits in %s 3 s after its client went away", frame)
		}
		return
	}
	t.Fatalf("no request came to wait in %s while non-reading scans held the budget", frame)
}

// pollGoroutines polls the process's goroutines, up to d, until one of them
// waits for the result budget (acquireResult) in frame (want) or none does
// (!want), and reports whether that happened. The engine's own waits for
// the budget (before a response is handed to the gateway) do not count:
// they end with the request's context already.
func pollGoroutines(frame string, want bool, d time.Duration) bool {
	for deadline := time.Now().Add(d); ; {
		found := false
		for _, g := range strings.Split(goroutineStacks(), "\n\n") {
			if strings.Contains(g, frame) && strings.Contains(g, "engine.(*Engine).acquireResult") {
				found = true
				break
			}
		}
		if found == want {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(20 * time.Millisecond) // polling a condition, bounded by the deadline
	}
}
