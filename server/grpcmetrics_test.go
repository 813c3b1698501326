package server_test

import (
	"testing"

	"google.golang.org/protobuf/types/known/anypb"

	pb "github.com/protobase/protobase/gen/protobase/v1"
	"github.com/protobase/protobase/server"
)

// TestGRPCMetricsSeries counts unary calls (one failing) and a Search
// stream: each of the standard gRPC series has its method's type, service
// and code labels, calls and messages are counted as they happen, and
// every method's series, each status code's too, is served from start-up
// at zero.
func TestGRPCMetricsSeries(t *testing.T) {
	ts := startServer(t, server.Config{MetricsAddr: "127.0.0.1:0"})
	url := "http://" + ts.Srv.MetricsAddr() + "/metrics"
	get := map[string]string{"grpc_type": "unary", "grpc_service": "protobase.v1.Protobase", "grpc_method": "Get"}
	search := map[string]string{"grpc_type": "bidi_stream", "grpc_service": "protobase.v1.Protobase", "grpc_method": "Search"}
	with := func(labels map[string]string, code string) map[string]string {
		out := map[string]string{"grpc_code": code}
		for k, v := range labels {
			out[k] = v
		}
		return out
	}
	type want struct {
		name   string
		labels map[string]string
		value  float64
	}
	check := func(when string, wants []want) {
		t.Helper()
		fams := scrape(t, url)
		for _, w := range wants {
			if v, ok := metricValue(fams, w.name, w.labels); !ok || v != w.value {
				t.Errorf("%s: %s%v = %v (served %v), want %v", when, w.name, w.labels, v, ok, w.value)
			}
		}
	}
	check("at start-up", []want{
		{"grpc_server_started_total", get, 0},
		{"grpc_server_handled_total", with(get, "NotFound"), 0},
		{"grpc_server_handled_total", with(search, "Canceled"), 0},
		{"grpc_server_msg_received_total", search, 0},
		{"grpc_server_handling_seconds", get, 0},
		{"grpc_server_started_total", map[string]string{"grpc_type": "server_stream", "grpc_method": "Watch"}, 0},
		{"grpc_server_started_total", map[string]string{"grpc_type": "unary", "grpc_service": "grpc.health.v1.Health", "grpc_method": "Check"}, 0},
	})

	ts.MustApply(map[string]string{"shop.proto": shopProto})
	ts.MustWrite(insert, []*anypb.Any{ts.Rec("shop.User", `{"id": 1, "email": "a@x"}`)})
	for range 2 {
		if _, err := ts.C.Get(t.Context(), "shop.User", 1); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := ts.C.Get(t.Context(), "shop.Nothing", 1); err == nil {
		t.Fatal("a Get of an unknown type succeeded")
	}
	s, err := ts.C.NewSearch(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		r, err := s.Query(&pb.Query{Type: "shop.User", Where: mustParse(t, "id = 1")})
		if err != nil {
			t.Fatal(err)
		}
		if recs, err := r.All(); err != nil || len(recs) != 1 {
			t.Fatalf("search: %d records, %v", len(recs), err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	check("after the calls", []want{
		{"grpc_server_started_total", get, 3},
		{"grpc_server_handled_total", with(get, "OK"), 2},
		{"grpc_server_handled_total", with(get, "NotFound"), 1},
		{"grpc_server_msg_received_total", get, 3},
		{"grpc_server_msg_sent_total", get, 2},
		{"grpc_server_handling_seconds", get, 3},
		{"grpc_server_started_total", search, 1},
		{"grpc_server_handled_total", with(search, "OK"), 1},
		{"grpc_server_msg_received_total", search, 3},
		{"grpc_server_msg_sent_total", search, 3},
		{"grpc_server_handling_seconds", search, 1},
	})
}
