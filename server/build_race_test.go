package server_test

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/anypb"

	"github.com/protobase/protobase/client"
	pb "github.com/protobase/protobase/gen/protobase/v1"
	"github.com/protobase/protobase/server"
)

// levelRecorder records every log line's level and message.
type levelRecorder struct {
	mu    sync.Mutex
	lines []string
}

func (l *levelRecorder) Enabled(context.Context, slog.Level) bool { return true }
func (l *levelRecorder) WithAttrs([]slog.Attr) slog.Handler       { return l }
func (l *levelRecorder) WithGroup(string) slog.Handler            { return l }
func (l *levelRecorder) Handle(_ context.Context, r slog.Record) error {
	line := r.Level.String() + " " + r.Message
	r.Attrs(func(a slog.Attr) bool { line += " " + a.String(); return true })
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, line)
	return nil
}

// with returns the lines holding s.
func (l *levelRecorder) with(s string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, line := range l.lines {
		if strings.Contains(line, s) {
			out = append(out, line)
		}
	}
	return out
}

const raceProto = `syntax = "proto3";
package race;
import "protobase/v1/options.proto";
message Item {
  option (protobase.v1.record) = { primary_key: "id" %s };
  int64 id = 1;
  string name = 2;
}
`

// An index dropped by a schema change while it is being built is an
// expected race: the build stops, logged at info, not at error.
func TestIndexDroppedWhileBuildingIsNotAnError(t *testing.T) {
	logs := &levelRecorder{}
	ts := startServer(t, server.Config{NoSync: true, Logger: slog.New(logs)})
	ts.MustApply(map[string]string{"race.proto": fmt.Sprintf(raceProto, "")})
	for b := range 40 {
		batch := make([]*anypb.Any, 0, 1000)
		for i := range 1000 {
			id := b*1000 + i
			batch = append(batch, ts.Rec("race.Item", fmt.Sprintf(`{"id": %d, "name": "n%d"}`, id, id)))
		}
		ts.MustWrite(pb.WriteOp_WRITE_OP_INSERT, batch)
	}
	// Each round adds an index and drops it at once; the build of 40
	// chunks is still running when the drop commits unless the machine
	// ran it faster than the next call.
	raced := false // a build ended otherwise than built
	for round := 0; round < 5 && !raced; round++ {
		name := fmt.Sprintf("index: { name: \"by_name_%d\" fields: \"name\" }", round)
		ts.MustApply(map[string]string{"race.proto": fmt.Sprintf(raceProto, name)})
		if _, err := ts.Apply(map[string]string{"race.proto": fmt.Sprintf(raceProto, "")},
			client.SchemaOptions{AllowDrop: []string{fmt.Sprintf("race.Item.by_name_%d", round)}}); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(30 * time.Second)
		for {
			ended := logs.with(fmt.Sprintf("index=by_name_%d", round))
			if n := len(ended); n >= 2 { // started, then built or stopped
				raced = !strings.Contains(ended[n-1], "index built")
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the build of round %d did not end within 30s: %q", round, ended)
			}
			time.Sleep(10 * time.Millisecond) // polling for the builder's outcome
		}
	}
	if !raced {
		t.Skip("every build finished before its index was dropped: the race was not met")
	}
	if errs := logs.with("ERROR"); len(errs) > 0 {
		t.Fatalf("an index dropped while built was logged at error: %q", errs)
	}
	got := logs.with("index build stopped")
	if !strings.HasPrefix(got[0], "INFO index build stopped: a schema change dropped or replaced the index type=race.Item index=by_name_") {
		t.Fatalf("logged %q, want an info line naming the type and index", got)
	}
}
