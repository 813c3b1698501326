package server_test

import (
	"errors"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	natsserver "github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"
	"google.golang.org/protobuf/proto"

	pb "github.com/protobase/protobase/gen/protobase/v1"
	natstransport "github.com/protobase/protobase/internal/transport/nats"
	"github.com/protobase/protobase/server"
)

// flood publishes requests of about 8 MiB (the embedded server's
// max_payload) to subject on each of conns, as fast as they go, with key
// in the header and a reply subject in the publisher's own inbox, until
// stop is closed.
func flood(conns []*nats.Conn, subject, key string, stop <-chan struct{}) (wait func() int64) {
	var wg sync.WaitGroup
	var sent atomic.Int64
	payload := make([]byte, 8<<20-4<<10)
	for _, nc := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				msg := nats.NewMsg(subject)
				msg.Reply = nc.NewRespInbox()
				msg.Data = payload
				msg.Header.Set(natstransport.HeaderAuthorization, "Bearer "+key)
				if nc.PublishMsg(msg) != nil {
					return
				}
				sent.Add(1)
			}
		}()
	}
	return func() int64 { wg.Wait(); return sent.Load() }
}

// smallRequests makes point lookups and schema reads with key on nc until
// stop is closed, and returns how many were answered and the failures.
func smallRequests(t *testing.T, ts *testServer, nc *nats.Conn, key string, stop <-chan struct{}) (answered int, failures []string) {
	getKey := mustMarshal(t, ts.Rec("shop.User", `{"id": 1}`))
	for i := 0; ; i++ {
		select {
		case <-stop:
			return answered, failures
		default:
		}
		msg := nats.NewMsg(natstransport.Subject(natstransport.DefaultPrefix, natstransport.SubjectSchemaGet))
		if i%2 == 1 {
			msg = nats.NewMsg(natstransport.Subject(natstransport.DefaultPrefix, natstransport.SubjectGet))
			msg.Data = getKey
		}
		msg.Header.Set(natstransport.HeaderAuthorization, "Bearer "+key)
		reply, err := nc.RequestMsg(msg, 10*time.Second)
		switch {
		case err != nil:
			failures = append(failures, msg.Subject+": "+err.Error())
			if errors.Is(err, nats.ErrNoResponders) {
				time.Sleep(50 * time.Millisecond) // not a busy loop while the service is away
			}
		case reply.Header.Get(micro.ErrorCodeHeader) != "":
			failures = append(failures, msg.Subject+": "+reply.Header.Get(micro.ErrorHeader))
		default:
			answered++
		}
	}
}

// Four connections of a read key limited to one type publish 8 MiB
// requests as fast as they can, first to a write subject (which the key's
// login does not allow, so they never reach the service), then to one it
// may call; meanwhile another key's small requests are all answered, and
// the service's own connection is never dropped.
func TestNATSFloodFromAReadKey(t *testing.T) {
	if raceEnabled {
		t.Skip("under the race detector the flood's buffers take the process near 2 GB")
	}
	e := startAuthServer(t, server.Config{MetricsAddr: "127.0.0.1:0"})
	url, floodKey := e.ts.Srv.NATSURL(), e.keys["user-reader"]
	quiet := nats.ErrorHandler(func(*nats.Conn, *nats.Subscription, error) {})
	var flooders []*nats.Conn
	for range 4 {
		flooders = append(flooders, connectNATS(t, url, append(natstransport.ClientOptions(floodKey), quiet)...))
	}
	other := connectNATS(t, url, natstransport.ClientOptions(e.keys["reader"])...)
	before := e.state()
	for _, phase := range []struct {
		endpoint string
		d        time.Duration
	}{{natstransport.SubjectGet, 3 * time.Second}, {natstransport.SubjectInsert, 2 * time.Second}} {
		stop := make(chan struct{})
		time.AfterFunc(phase.d, func() { close(stop) })
		wait := flood(flooders, natstransport.Subject(natstransport.DefaultPrefix, phase.endpoint), floodKey, stop)
		answered, failures := smallRequests(t, e.ts, other, e.keys["reader"], stop)
		sent := wait()
		t.Logf("flood on %s: %d requests of 8 MiB published; %d small requests answered", phase.endpoint, sent, answered)
		if len(failures) > 0 {
			t.Fatalf("flood on %s: %d of %d small requests failed, the first: %s", phase.endpoint, len(failures), answered+len(failures), failures[0])
		}
		if answered == 0 {
			t.Fatalf("flood on %s: no small request answered", phase.endpoint)
		}
	}
	for i, nc := range flooders {
		if err := nc.LastError(); err == nil || !strings.Contains(err.Error(), "Permissions Violation") {
			t.Errorf("flooder %d published to the insert subject without a permissions violation (last error %v)", i, err)
		}
	}
	if after := e.state(); after != before {
		t.Fatalf("the flood changed the state:\n%s\nwant\n%s", after, before)
	}
	fams := scrapeWith(t, "http://"+e.ts.Srv.MetricsAddr()+"/metrics", e.keys["admin"])
	if v, ok := metricValue(fams, "protobase_nats_service_disconnects_total", nil); !ok || v != 0 {
		t.Fatalf("the service's connection was dropped %v times (served: %v)", v, ok)
	}
	// The flood on get, past the key's byte rate, was refused and its
	// connections closed at their source.
	for _, m := range []string{"protobase_nats_rate_refused_total", "protobase_nats_floods_total"} {
		if v, ok := metricValue(fams, m, nil); !ok || v == 0 {
			t.Errorf("%s is %v after the flood (served: %v)", m, v, ok)
		}
	}
	checkMetricDocs(t, fams)
}

// The service's own connection closed by the NATS server (as NATS closes a
// slow consumer) comes back by itself, logged and counted.
func TestNATSServiceConnectionComesBack(t *testing.T) {
	logs := &logRecorder{}
	ts := startTransports(t, server.Config{NoSync: true, MetricsAddr: "127.0.0.1:0", Logger: slog.New(logs)})
	nc := connectNATS(t, ts.Srv.NATSURL())
	schema := natstransport.Subject(natstransport.DefaultPrefix, natstransport.SubjectSchemaGet)
	if _, err := nc.Request(schema, nil, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	ns := server.EmbeddedNATS(ts.Srv)
	cz, err := ns.Connz(&natsserver.ConnzOptions{User: "protobase-service", Username: true})
	if err != nil || len(cz.Conns) != 1 {
		t.Fatalf("the service's connections: %v %v", cz, err)
	}
	if err := ns.DisconnectClientByID(cz.Conns[0].Cid); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		reply, err := nc.Request(schema, nil, 2*time.Second)
		if err == nil {
			var resp pb.GetSchemaResponse
			if err := proto.Unmarshal(reply.Data, &resp); err != nil || len(resp.Types) != 2 {
				t.Fatalf("schema after the reconnect: %v %v", &resp, err)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the service did not answer again after its connection was closed: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	waitMetric(t, ts, "", "protobase_nats_service_disconnects_total", nil, 1)
	waitMetric(t, ts, "", "protobase_nats_service_reconnects_total", nil, 1)
	if logs.count("connection to NATS was lost") != 1 || logs.count("connection to NATS is back") != 1 {
		t.Fatalf("warnings logged: %q", logs.all())
	}
}
