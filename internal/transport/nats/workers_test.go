package nats

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"
	"google.golang.org/protobuf/reflect/protoregistry"

	pb "github.com/protobase/protobase/gen/protobase/v1"
	"github.com/protobase/protobase/internal/engine"
	"github.com/protobase/protobase/internal/keyspace"
	"github.com/protobase/protobase/internal/store/pebble"
	"github.com/protobase/protobase/internal/transport/schemajson"
)

const workersProto = `syntax = "proto3";
package t;
import "protobase/v1/options.proto";
message U {
  option (protobase.v1.record) = { primary_key: "id" };
  int64 id = 1;
}
`

// startWorkersService serves a real engine over an embedded NATS server
// with the given worker bound, and returns the client connection.
func startWorkersService(t *testing.T, workers int) (*Service, *nats.Conn) {
	t.Helper()
	st, err := pebble.Open(pebble.Options{Dir: t.TempDir(), Layout: keyspace.Layout{}})
	if err != nil {
		t.Fatal(err)
	}
	e, err := engine.Open(t.Context(), st, engine.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.ApplySchema(t.Context(), &pb.ApplySchemaRequest{Files: map[string]string{"t.proto": workersProto}}); err != nil {
		t.Fatal(err)
	}
	ns, err := RunEmbedded(EmbedOptions{Addr: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	snc, err := nats.Connect(ns.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	svc, err := Start(Options{Conn: snc, Engine: e, Workers: workers,
		Resolver: schemajson.New(func() *protoregistry.Files { return e.Schema().Compiled.Registry })})
	if err != nil {
		t.Fatal(err)
	}
	if err := snc.Flush(); err != nil { // the server has the subscriptions
		t.Fatal(err)
	}
	nc, err := nats.Connect(ns.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		nc.Close()
		if err := svc.Stop(); err != nil {
			t.Error(err)
		}
		snc.Close()
		ns.Shutdown()
		ns.WaitForShutdown()
		_ = e.Close()
		_ = st.Close()
	})
	return svc, nc
}

// blocker holds the reads marked with the header Test-Block until
// released, and records how many reads were past the worker pool at once.
type blocker struct {
	entered chan string
	release chan struct{}
	once    sync.Once
	mu      sync.Mutex
	in, max int
}

func newBlocker(t *testing.T, s *Service) *blocker {
	b := &blocker{entered: make(chan string, 16), release: make(chan struct{})}
	t.Cleanup(b.unblock) // before the service stops, which waits for them
	s.beforeRead = func(req micro.Request) {
		b.mu.Lock()
		b.in++
		b.max = max(b.max, b.in)
		b.mu.Unlock()
		if name := req.Headers().Get("Test-Block"); name != "" {
			b.entered <- name
			<-b.release
		}
		b.mu.Lock()
		b.in--
		b.mu.Unlock()
	}
	return b
}

func (b *blocker) unblock() { b.once.Do(func() { close(b.release) }) }

func queryMsg(block string) *nats.Msg {
	m := nats.NewMsg(Subject(DefaultPrefix, SubjectQuery))
	m.Header.Set(HeaderContentType, ContentTypeJSON)
	if block != "" {
		m.Header.Set("Test-Block", block)
	}
	m.Data = []byte(`{"query": {"type": "t.U"}}`)
	return m
}

// ask sends m and returns the reply's error header or the reply.
func ask(nc *nats.Conn, m *nats.Msg) string {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	r, err := nc.RequestMsgWithContext(ctx, m)
	if err != nil {
		return err.Error()
	}
	if e := r.Header.Get(micro.ErrorHeader); e != "" {
		return e
	}
	return string(r.Data)
}

// A read on a subject is served while another read on the same subject is
// held: requests of one subject no longer queue behind each other.
func TestReadsOnOneSubjectRunConcurrently(t *testing.T) {
	svc, nc := startWorkersService(t, 4)
	b := newBlocker(t, svc)
	slow := make(chan string, 1)
	go func() { slow <- ask(nc, queryMsg("slow")) }()
	<-b.entered // the slow query holds a worker
	if got := ask(nc, queryMsg("")); got != "{}" {
		t.Fatalf("fast query while a slow one is held: %q", got)
	}
	b.unblock()
	if got := <-slow; got != "{}" {
		t.Fatalf("slow query: %q", got)
	}
}

// Workers bounds the reads of an endpoint served at once; the others wait
// their turn and are all answered.
func TestReadWorkersBounded(t *testing.T) {
	svc, nc := startWorkersService(t, 2)
	b := newBlocker(t, svc)
	replies := make(chan string, 3)
	for _, name := range []string{"a", "b"} {
		go func() { replies <- ask(nc, queryMsg(name)) }()
		<-b.entered
	}
	go func() { replies <- ask(nc, queryMsg("")) }()
	// The third query has reached the service's connection when a flush
	// of it returns after the client's: it waits for a worker there.
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := svc.opts.Conn.Flush(); err != nil {
		t.Fatal(err)
	}
	b.unblock()
	for range 3 {
		if got := <-replies; got != "{}" {
			t.Fatalf("query: %q", got)
		}
	}
	if b.max > 2 {
		t.Fatalf("%d reads past a pool of 2 workers at once", b.max)
	}
}
