package engine_test

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/anypb"

	pb "github.com/protobase/protobase/gen/protobase/v1"
	"github.com/protobase/protobase/internal/engine"
	"github.com/protobase/protobase/internal/engine/enginetest"
	"github.com/protobase/protobase/internal/testschema"
)

// TestGetSchemaReportsBuildProgress: while an index is built, GetSchema
// reports the records its build has indexed so far; once it is ready the
// figure is gone.
func TestGetSchemaReportsBuildProgress(t *testing.T) {
	te := enginetest.Open(t, t.TempDir(), engine.Options{})
	te.Apply(map[string]string{testschema.File: testschema.Shop})
	var batch []*anypb.Any
	for i := range 2500 {
		batch = append(batch, te.Rec("shop.User", fmt.Sprintf(`{"id": %d, "email": "u%d", "tags": ["t"]}`, i+1, i+1)))
	}
	te.MustWrite(engine.OpInsert, batch)

	// The first build step runs; the second waits until the test lets it.
	var gate sync.Mutex
	steps := 0
	second := make(chan struct{})
	engine.SetBuildHook(t, func() {
		steps++
		if steps == 2 {
			close(second)
			gate.Lock()
			defer gate.Unlock() // held only to wait for the test's turn
		}
	})
	gate.Lock()
	released := false
	defer func() {
		if !released {
			gate.Unlock()
		}
	}()
	withTags := strings.Replace(testschema.Shop, `index: { fields: "name" }`, `index: { fields: "name" }
    index: { fields: "tags" }`, 1)
	te.Apply(map[string]string{testschema.File: withTags})
	<-second
	tags := func() *pb.Index {
		t.Helper()
		resp, err := te.E.GetSchema(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		for _, rt := range resp.Types {
			for _, ix := range rt.Indexes {
				if rt.Name == "shop.User" && ix.Name == "tags" {
					return ix
				}
			}
		}
		t.Fatal("no index tags on shop.User")
		return nil
	}
	if ix := tags(); ix.State != pb.IndexState_INDEX_STATE_BUILDING || ix.RecordsIndexed != 1000 {
		t.Fatalf("after one build step: state %v, %d records indexed; want BUILDING, 1000 (one step)", ix.State, ix.RecordsIndexed)
	}
	gate.Unlock()
	released = true
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(time.Millisecond) {
		ix := tags()
		if ix.State == pb.IndexState_INDEX_STATE_READY {
			if ix.RecordsIndexed != 0 {
				t.Fatalf("a ready index reports %d records indexed", ix.RecordsIndexed)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("index tags still %v", ix.State)
		}
	}
}
