package engine_test

import (
	"log/slog"
	"maps"
	"testing"

	"google.golang.org/protobuf/types/known/anypb"

	pb "github.com/protobase/protobase/gen/protobase/v1"
	"github.com/protobase/protobase/internal/engine"
	"github.com/protobase/protobase/internal/store/etcd/etcdtest"
)

// On a shared store every server starts a builder for a new index and one
// builds it while the other waits for the build's lock. Each server logs
// that its builder started, so each logs how it ended: the one that built
// the index that it did, the other, once it holds the lock, that the build
// ended on another server, with the index's state; when a schema change
// drops the index meanwhile, both that the build stopped.
func TestSharedBuildEndIsLogged(t *testing.T) {
	const (
		built     = "index built"
		elsewhere = "index build ended on another server"
		stopped   = "index build stopped: a schema change dropped or replaced the index"
	)
	ep := etcdtest.Start(t, etcdtest.Roomy)
	for _, c := range []struct {
		name string
		drop bool
	}{{"built", false}, {"dropped", true}} {
		t.Run(c.name, func(t *testing.T) {
			es, bufs := sharedBuildPair(t, ep, "/buildlog-"+c.name+"/")
			// The builder that takes the lock first waits at its first step
			// until both servers have started theirs (and the index is
			// dropped).
			gate := make(chan struct{})
			engine.SetBuildHook(t, func() { <-gate })
			applyTo(t, es[0], &pb.ApplySchemaRequest{Files: map[string]string{"shop.proto": shopProto}}) // adds the name index
			for i := range bufs {
				bufs[i].waitFor(t, "index build started")
			}
			if c.drop {
				applyTo(t, es[0], &pb.ApplySchemaRequest{Files: map[string]string{"shop.proto": noNameIndex}, AllowDrop: []string{"shop.User.name"}})
			}
			close(gate)
			ends := map[string]int{}
			for i := range bufs {
				end := bufs[i].waitFor(t, built, elsewhere, stopped, "index build failed")
				if end["type"] != "shop.User" || end["index"] != "name" || end["level"] != "INFO" {
					t.Errorf("server %d ended its build with %v, want an info line naming shop.User and name", i, end)
				}
				if end["msg"] == elsewhere && end["state"] != "ready" {
					t.Errorf("server %d: %v, want state ready", i, end)
				}
				ends[end["msg"].(string)]++
			}
			want := map[string]int{built: 1, elsewhere: 1}
			if c.drop {
				want = map[string]int{stopped: 2}
			}
			if !maps.Equal(ends, want) {
				t.Fatalf("the servers ended their builds with %v, want %v", ends, want)
			}
		})
	}
}

// sharedBuildPair opens two engines, each logging into its buffer, on one
// prefix of the etcd member at ep, with shop.User stored without its name
// index and holding one record.
func sharedBuildPair(t *testing.T, ep, prefix string) ([2]*engine.Engine, *[2]lockedBuffer) {
	t.Helper()
	var es [2]*engine.Engine
	bufs := new([2]lockedBuffer)
	for i := range es {
		es[i], _ = openSharedOn(t, ep, prefix, engine.Options{Logger: slog.New(slog.NewJSONHandler(&bufs[i], nil))})
	}
	applyTo(t, es[0], &pb.ApplySchemaRequest{Files: map[string]string{"shop.proto": noNameIndex}})
	w := es[0].NewWriter()
	defer w.Close()
	if err := w.Apply(t.Context(), engine.Batch{Op: engine.OpInsert, Records: []*anypb.Any{sharedUser(t, es[0], 1)}}); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Sync(); err != nil {
		t.Fatal(err)
	}
	return es, bufs
}
