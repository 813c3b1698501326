package engine_test

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/anypb"

	pb "github.com/protobase/protobase/gen/protobase/v1"
	"github.com/protobase/protobase/internal/engine"
)

// lockedBuffer is an io.Writer safe for the engine's background logging.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) lines(t *testing.T) []map[string]any {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []map[string]any
	for _, ln := range strings.Split(strings.TrimSpace(l.b.String()), "\n") {
		if ln == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(ln), &m); err != nil {
			t.Fatalf("log line %q: %v", ln, err)
		}
		out = append(out, m)
	}
	return out
}

// waitFor returns the first line whose message is one of msgs, polling
// the engine's background logging for up to 30 s.
func (l *lockedBuffer) waitFor(t *testing.T, msgs ...string) map[string]any {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); ; {
		for _, ln := range l.lines(t) {
			if msg, _ := ln["msg"].(string); slices.Contains(msgs, msg) {
				return ln
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no line %q within 30s: %v", msgs, l.lines(t))
		}
		time.Sleep(time.Millisecond) // polling the background logging, not waiting out a race
	}
}

// Log lines name types and indexes (never internal ids); a query slower
// than SlowQuery gets one line saying what it asked and how it ran.
func TestLogLines(t *testing.T) {
	var buf lockedBuffer
	log := slog.New(slog.NewJSONHandler(&buf, nil))
	te := openEngine(t, t.TempDir(), engine.Options{Logger: log, SlowQuery: time.Nanosecond})
	te.Apply(map[string]string{"shop.proto": noNameIndex})
	te.MustWrite(engine.OpInsert, []*anypb.Any{te.Rec("shop.User", `{"id": 1, "email": "a", "name": "x"}`)})
	te.Apply(map[string]string{"shop.proto": shopProto}) // adds the name index: a build
	if _, err := query(te.E, t.Context(), &pb.QueryRequest{Query: &pb.Query{Type: "shop.User"}}); err != nil {
		t.Fatal(err)
	}
	sent := false
	recv := func() (*pb.SearchRequest, error) {
		if sent {
			return nil, io.EOF
		}
		sent = true
		return &pb.SearchRequest{Queries: []*pb.Query{{Type: "shop.User"}, {Type: "shop.User"}}}, nil
	}
	if err := te.E.Search(t.Context(), recv, func(*pb.SearchResponse) error { return nil }); err != nil {
		t.Fatal(err)
	}
	waitIndexNamed(t, te, "name")
	buf.waitFor(t, "index built") // logged once the index is ready
	seen := map[string]map[string]any{}
	for _, l := range buf.lines(t) {
		msg := l["msg"].(string)
		if msg == "slow query" && l["call"] == "Search" {
			msg = "slow search"
		}
		seen[msg] = l
	}
	for msg, want := range map[string]map[string]any{
		"index build started": {"type": "shop.User", "index": "name"},
		"index built":         {"type": "shop.User", "index": "name", "records": 1.0},
		"slow query":          {"call": "Query", "type": "shop.User", "access": "full_scan", "records": 1.0},
		"slow search":         {"type": "shop.User"},
	} {
		got, ok := seen[msg]
		if !ok {
			t.Errorf("no %q line in %v", msg, seen)
			continue
		}
		for k, v := range want {
			if got[k] != v {
				t.Errorf("%q: %s = %v, want %v", msg, k, got[k], v)
			}
		}
	}
	if got := seen["schema applied"]["indexes_added"]; len(got.([]any)) != 1 || got.([]any)[0] != "shop.User.name" {
		t.Errorf("schema applied: indexes_added = %v, want [shop.User.name]", got)
	}
}

// A slow Scan's line says how many records it read as well as how many it
// returned, and gives its duration in a field named for its unit.
func TestSlowScanLogsRecordsRead(t *testing.T) {
	var buf lockedBuffer
	log := slog.New(slog.NewJSONHandler(&buf, nil))
	te := openEngine(t, t.TempDir(), engine.Options{Logger: log, SlowQuery: time.Nanosecond})
	te.Apply(map[string]string{"shop.proto": shopProto})
	te.MustWrite(engine.OpInsert, []*anypb.Any{
		te.Rec("shop.Member", `{"org": "o", "id": 1, "handle": "a"}`),
		te.Rec("shop.Member", `{"org": "o", "id": 2, "handle": "b"}`),
		te.Rec("shop.Member", `{"org": "p", "id": 3, "handle": "c"}`),
	})
	where := &pb.Expr{Expr: &pb.Expr_Cmp{Cmp: &pb.Comparison{
		Field: "handle", Op: pb.Op_OP_EQ, Value: &pb.Value{Kind: &pb.Value_String_{String_: "b"}}}}}
	req := &pb.ScanRequest{Query: &pb.Query{Type: "shop.Member", Where: where}}
	if err := te.E.Scan(t.Context(), req, func(*pb.ScanResponse) error { return nil }); err != nil {
		t.Fatal(err)
	}
	var line map[string]any
	for _, l := range buf.lines(t) {
		if l["msg"] == "slow query" && l["call"] == "Scan" {
			line = l
		}
	}
	if line == nil {
		t.Fatalf("no slow Scan line in %s", buf.b.String())
	}
	if line["records"] != 1.0 || line["records_read"] != 3.0 {
		t.Errorf("records = %v, records_read = %v; want 1 and 3 (%v)", line["records"], line["records_read"], line)
	}
	if ms, ok := line["took_ms"].(float64); !ok || ms < 0 {
		t.Errorf("took_ms = %v, want milliseconds (%v)", line["took_ms"], line)
	}
	if _, ok := line["took"]; ok {
		t.Errorf("took without a unit: %v", line)
	}
}

// A schema change that drops an index after its build's last step, before
// the build records the index ready, ends the build as stopped: one info
// line under the index's name, no line saying it was built, and the index
// stays dropped.
func TestBuildDroppedAfterLastStepLogsStopped(t *testing.T) {
	var buf lockedBuffer
	te := openEngine(t, t.TempDir(), engine.Options{Logger: slog.New(slog.NewJSONHandler(&buf, nil))})
	te.Apply(map[string]string{"shop.proto": noNameIndex})
	te.MustWrite(engine.OpInsert, []*anypb.Any{te.Rec("shop.User", `{"id": 1, "email": "a", "name": "x"}`)})
	dropped := make(chan error, 1)
	engine.SetBuildEndHook(t, func() {
		_, err := te.E.ApplySchema(t.Context(), &pb.ApplySchemaRequest{
			Files: map[string]string{"shop.proto": noNameIndex}, AllowDrop: []string{"shop.User.name"},
		})
		dropped <- err
	})
	te.Apply(map[string]string{"shop.proto": shopProto}) // adds the name index: a build
	if err := <-dropped; err != nil {
		t.Fatalf("drop the index at the end of its build: %v", err)
	}
	stopped := "index build stopped: a schema change dropped or replaced the index"
	last := buf.waitFor(t, "index built", "index build failed", stopped)
	if last["msg"] != stopped || last["level"] != "INFO" ||
		last["type"] != "shop.User" || last["index"] != "name" {
		t.Fatalf("the build ended with %v, want an info line that it stopped, naming shop.User and name", last)
	}
	gs, err := te.E.GetSchema(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for _, rt := range gs.Types {
		for _, ix := range rt.Indexes {
			if ix.Name == "name" {
				t.Fatalf("the dropped index is back: %v", ix)
			}
		}
	}
}
