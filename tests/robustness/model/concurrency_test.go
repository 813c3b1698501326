package model_test

import (
	"fmt"
	"sync"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/protobase/protobase/internal/testschema"
	"github.com/protobase/protobase/server"
	"github.com/protobase/protobase/server/servertest"
	"github.com/protobase/protobase/tests/robustness/harness"
)

// Concurrent streams racing to insert the same keys and unique values:
// each key and each email ends up owned by exactly one record, and the
// counts reported to the streams match what is stored.
func TestConcurrentWritersRaceOnKeys(t *testing.T) {
	ts := servertest.New(t, server.Config{})
	ts.MustApply(map[string]string{"shop.proto": testschema.Shop})
	const streams, keys = 8, 200
	var wg sync.WaitGroup
	var mu sync.Mutex
	won := 0
	for s := 0; s < streams; s++ {
		wg.Add(1)
		go func(s int) {
			defer wg.Done()
			for k := 0; k < keys; k += 10 {
				var recs []*anypb.Any
				for i := k; i < k+10; i++ {
					// Keys collide across streams; emails collide too.
					recs = append(recs, ts.Rec("shop.User", fmt.Sprintf(`{"id": %d, "name": "s%d", "email": "e%d@x"}`, i, s, i)))
				}
				resp, err := ts.Write(harness.Insert, recs)
				if err != nil {
					if status.Code(err) != codes.AlreadyExists {
						t.Errorf("stream %d: %v", s, err)
					}
					continue
				}
				mu.Lock()
				won += int(resp.Records)
				mu.Unlock()
			}
		}(s)
	}
	wg.Wait()
	users := ts.Records("shop.User")
	if len(users) != keys || won != keys {
		t.Fatalf("stored %d users, streams were told %d, want %d", len(users), won, keys)
	}
	// Every email is held by its own record and no other.
	for _, u := range users {
		id := servertest.FieldValue(u, "id").Int()
		_, err := ts.Write(harness.Insert, []*anypb.Any{ts.Rec("shop.User", fmt.Sprintf(`{"id": %d, "email": "e%d@x"}`, 1000+id, id))})
		servertest.WriteErr(t, err, codes.AlreadyExists)
	}
}
