package harness

import (
	"context"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/protobase/protobase/client"
	pb "github.com/protobase/protobase/gen/protobase/v1"
	"github.com/protobase/protobase/server/servertest"
)

// Watcher is a watcher that lives across server kills and restarts: what
// it received over all its sessions, and the last progress it saw.
type Watcher struct {
	Req  *pb.WatchRequest
	Got  []*pb.Change
	Last *pb.Position
}

// NewWatcher is a watcher of req from the start of the log.
func NewWatcher(req *pb.WatchRequest) *Watcher { return &Watcher{Req: req, Last: &pb.Position{}} }

// Session watches from the last progress until the connection dies (or
// ctx ends).
func (w *Watcher) Session(ctx context.Context, c *client.Client) {
	req := proto.Clone(w.Req).(*pb.WatchRequest)
	req.Start = &pb.WatchStart{Start: &pb.WatchStart_After{After: w.Last}}
	st, err := c.API().Watch(ctx, req)
	if err != nil {
		return
	}
	for {
		resp, err := st.Recv()
		if err != nil {
			return
		}
		w.Got = append(w.Got, resp.Changes...)
		w.Last = resp.Progress
	}
}

// CatchUp resumes w on s until its progress reaches commit end.
func (w *Watcher) CatchUp(t *testing.T, s *servertest.Server, end uint64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	req := proto.Clone(w.Req).(*pb.WatchRequest)
	req.Start = &pb.WatchStart{Start: &pb.WatchStart_After{After: w.Last}}
	st, err := s.C.API().Watch(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	for w.Last.Index != nil || w.Last.GetCommit() < end {
		resp, err := st.Recv()
		if err != nil {
			t.Fatalf("catch up from %v to %d: %v", w.Last, end, err)
		}
		w.Got = append(w.Got, resp.Changes...)
		w.Last = resp.Progress
	}
}

// LastCommit is the commit a watch of types on s starts at by default: the
// last one, named by its first message (progress only).
func LastCommit(s *servertest.Server, types ...string) uint64 {
	s.T.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	st, err := s.C.API().Watch(ctx, &pb.WatchRequest{Types: types})
	if err != nil {
		s.T.Fatalf("watch: %v", err)
	}
	resp, err := st.Recv()
	if err != nil {
		s.T.Fatalf("watch first message: %v", err)
	}
	if len(resp.Changes) != 0 || resp.Progress == nil {
		s.T.Fatalf("first watch message = %v, want progress only", resp)
	}
	return resp.Progress.GetCommit()
}
