package server_test

import (
	"context"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	pb "github.com/protobase/protobase/gen/protobase/v1"
	natstransport "github.com/protobase/protobase/internal/transport/nats"
	"github.com/protobase/protobase/server"
)

// logRecorder is a slog.Handler keeping the messages logged at WARN and
// above, so that a test can count them.
type logRecorder struct {
	mu   sync.Mutex
	msgs []string
}

func (l *logRecorder) Enabled(_ context.Context, lv slog.Level) bool { return lv >= slog.LevelWarn }
func (l *logRecorder) WithAttrs([]slog.Attr) slog.Handler            { return l }
func (l *logRecorder) WithGroup(string) slog.Handler                 { return l }
func (l *logRecorder) Handle(_ context.Context, r slog.Record) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.msgs = append(l.msgs, r.Message)
	return nil
}

// count is the number of messages logged that contain s.
func (l *logRecorder) count(s string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, m := range l.msgs {
		if strings.Contains(m, s) {
			n++
		}
	}
	return n
}

// all is every message logged.
func (l *logRecorder) all() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.msgs...)
}

// scrapeWith reads /metrics at url, sending key when set.
func scrapeWith(t *testing.T, url, key string) map[string]*dto.MetricFamily {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	r, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Body.Close()
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(r.Body)
	if err != nil {
		t.Fatal(err)
	}
	return fams
}

// dropped is the name of the counter of requests dropped for their reply
// subject.
const dropped = "protobase_nats_requests_dropped_total"

// waitMetric waits until the series of ts's /metrics reaches at least
// want, and returns its value; the wait only bounds a failing test.
func waitMetric(t *testing.T, ts *testServer, key, name string, labels map[string]string, want float64) float64 {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		v, ok := metricValue(scrapeWith(t, "http://"+ts.Srv.MetricsAddr()+"/metrics", key), name, labels)
		if ok && v >= want {
			return v
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s%v = %v (served: %v), want at least %v", name, labels, v, ok, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// publishGet publishes a point lookup of user 1 on nc with the given reply
// subject and Authorization key ("" for none).
func publishGet(t *testing.T, ts *testServer, nc *nats.Conn, reply, key string) {
	t.Helper()
	msg := nats.NewMsg(natstransport.Subject(natstransport.DefaultPrefix, natstransport.SubjectGet))
	msg.Reply = reply
	msg.Data = mustMarshal(t, ts.Rec("shop.User", `{"id": 1}`))
	if key != "" {
		msg.Header.Set(natstransport.HeaderAuthorization, "Bearer "+key)
	}
	if err := nc.PublishMsg(msg); err != nil {
		t.Fatal(err)
	}
}

// With keys, the service answers only into the inbox of the key in the
// request's header: a read key cannot have a record delivered into another
// key's inbox, nor a reply published onto the API's subjects, and the
// drops are counted without a log line each.
func TestNATSRepliesOnlyToTheCallersInbox(t *testing.T) {
	logs := &logRecorder{}
	e := startAuthServer(t, server.Config{MetricsAddr: "127.0.0.1:0", Logger: slog.New(logs)})
	url, admin := e.ts.Srv.NATSURL(), e.keys["admin"]

	victim := connectNATS(t, url, natstransport.ClientOptions(e.keys["reader"])...)
	delivered := make(chan *nats.Msg, 1000)
	if _, err := victim.ChanSubscribe(natstransport.InboxPrefix(e.keys["reader"])+".>", delivered); err != nil {
		t.Fatal(err)
	}
	if err := victim.Flush(); err != nil {
		t.Fatal(err)
	}
	malloryKey := e.keys["user-reader"] // read, shop.User only
	mallory := connectNATS(t, url, natstransport.ClientOptions(malloryKey)...)

	// Into the victim's inbox, with mallory's own key or none.
	publishGet(t, e.ts, mallory, natstransport.InboxPrefix(e.keys["reader"])+".stolen", malloryKey)
	publishGet(t, e.ts, mallory, natstransport.InboxPrefix(e.keys["reader"])+".stolen.2", "")
	// Onto the API and the subjects NATS reserves, many times.
	const flood = 200
	for range flood {
		publishGet(t, e.ts, mallory, "protobase.insert", malloryKey)
	}
	publishGet(t, e.ts, mallory, "$SRV.PING", malloryKey)
	publishGet(t, e.ts, mallory, "$JS.API.STREAM.CREATE.x", malloryKey)
	// No reply subject at all.
	publishGet(t, e.ts, mallory, "", malloryKey)
	if err := mallory.Flush(); err != nil {
		t.Fatal(err)
	}

	waitMetric(t, e.ts, admin, dropped, map[string]string{"reason": "outside_inbox"}, 1)
	waitMetric(t, e.ts, admin, dropped, map[string]string{"reason": "no_key"}, 1)
	waitMetric(t, e.ts, admin, dropped, map[string]string{"reason": "reserved"}, flood+2)
	waitMetric(t, e.ts, admin, dropped, map[string]string{"reason": "no_reply"}, 1)

	// Mallory's own requests are answered, and the victim got nothing.
	c := &natsClient{t: t, ts: e.ts, nc: mallory, prefix: natstransport.DefaultPrefix, key: malloryKey}
	var got anypb.Any
	c.mustCall(natstransport.SubjectGet, e.ts.Rec("shop.User", `{"id": 1}`), &got)
	if err := victim.Flush(); err != nil {
		t.Fatal(err)
	}
	if n := len(delivered); n != 0 {
		m := <-delivered
		t.Fatalf("%d replies delivered into another key's inbox, the first on %s: %q", n, m.Subject, m.Data)
	}
	if n := logs.count("nats:"); n > 4 {
		t.Fatalf("%d NATS warnings logged for %d dropped requests, want a few", n, flood+5)
	}
}

// Without keys every caller may subscribe under _INBOX. only: a reply
// subject elsewhere is no caller's inbox. A write published without a
// reply subject is not applied.
func TestNATSRepliesWithoutKeys(t *testing.T) {
	logs := &logRecorder{}
	ts := startTransports(t, server.Config{NoSync: true, MetricsAddr: "127.0.0.1:0", Logger: slog.New(logs)})
	nc := connectNATS(t, ts.Srv.NATSURL())
	publishGet(t, ts, nc, "elsewhere.reply", "")
	for range 100 {
		publishGet(t, ts, nc, "protobase.insert", "")
	}
	insert := nats.NewMsg(natstransport.Subject(natstransport.DefaultPrefix, natstransport.SubjectInsert))
	insert.Data = mustMarshal(t, &pb.WriteRequest{Records: []*anypb.Any{ts.Rec("shop.User", `{"id": 7}`)}})
	if err := nc.PublishMsg(insert); err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	waitMetric(t, ts, "", dropped, map[string]string{"reason": "outside_inbox"}, 1)
	waitMetric(t, ts, "", dropped, map[string]string{"reason": "reserved"}, 100)
	waitMetric(t, ts, "", dropped, map[string]string{"reason": "no_reply"}, 1)
	if n := ts.Count("shop.User"); n != 0 {
		t.Fatalf("%d users stored by a write published without a reply subject", n)
	}
	newNATSClient(t, ts, ts.Srv.NATSURL(), false).mustCall(natstransport.SubjectSchemaGet, &pb.GetSchemaRequest{}, new(pb.GetSchemaResponse))
	if n := logs.count("nats:"); n > 3 {
		t.Fatalf("%d NATS warnings logged for 102 dropped requests, want a few", n)
	}
}

// On a NATS server Protobase did not configure, it cannot know the
// callers' inboxes: it refuses reply subjects on the API and the reserved
// ones, and answers any other.
func TestNATSExternalRefusesReservedReplies(t *testing.T) {
	ns, err := natstransport.RunEmbedded(natstransport.EmbedOptions{Addr: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ns.Shutdown(); ns.WaitForShutdown() })
	ts := startServer(t, server.Config{NoSync: true, NATSURL: ns.ClientURL(), MetricsAddr: "127.0.0.1:0", Lab: true})
	ts.MustApply(map[string]string{"shop.proto": shopProto})
	ts.MustWrite(insert, []*anypb.Any{ts.Rec("shop.User", `{"id": 1}`)})
	nc := connectNATS(t, ns.ClientURL())
	replies := make(chan *nats.Msg, 10)
	if _, err := nc.ChanSubscribe("custom.>", replies); err != nil {
		t.Fatal(err)
	}
	for _, reply := range []string{"protobase.insert", "protobase", "$SYS.REQ.SERVER.PING", "$SRV.STATS"} {
		publishGet(t, ts, nc, reply, "")
	}
	publishGet(t, ts, nc, "custom.reply", "")
	waitMetric(t, ts, "", dropped, map[string]string{"reason": "reserved"}, 4)
	select {
	case m := <-replies:
		var got anypb.Any
		if err := proto.Unmarshal(m.Data, &got); err != nil || !strings.HasSuffix(got.TypeUrl, "shop.User") {
			t.Fatalf("reply on %s: %v %v", m.Subject, &got, err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no reply on a subject outside the API")
	}
}
