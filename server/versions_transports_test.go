package server_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"testing"

	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/structpb"

	pb "github.com/protobase/protobase/gen/protobase/v1"
	natstransport "github.com/protobase/protobase/internal/transport/nats"
	"github.com/protobase/protobase/server"
)

// jsonVersions returns the "versions" member of a REST answer, as the
// strings protobuf JSON writes 64-bit integers as, converted; nil when the
// answer has none.
func jsonVersions(t *testing.T, b []byte) []uint64 {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("answer %s: %v", b, err)
	}
	raw, ok := m["versions"]
	if !ok {
		return nil
	}
	var strs []string
	if err := json.Unmarshal(raw, &strs); err != nil {
		t.Fatalf("versions %s: %v", raw, err)
	}
	out := make([]uint64, len(strs))
	for i, s := range strs {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("version %q: %v", s, err)
		}
		out[i] = v
	}
	return out
}

// A Query page and a Get that ask for versions return them over REST (the
// JSON member "versions", parallel to "records") and over NATS (protobuf
// and JSON), the versions gRPC returns; without asking, none.
func TestVersionsOverRESTAndNATS(t *testing.T) {
	ts := startTransports(t, server.Config{NoSync: true})
	ts.MustWrite(insert, []*anypb.Any{
		ts.Rec("shop.User", `{"id": 1, "name": "Ann", "email": "ann@x"}`),
		ts.Rec("shop.User", `{"id": 2, "name": "Bob", "email": "bob@x"}`),
	})
	ts.MustWrite(insert, []*anypb.Any{ts.Rec("shop.User", `{"id": 3, "name": "Cy", "email": "cy@x"}`)})
	_, want := getVersions(t, ts, 1, 2, 3)
	if want[0] == 0 || want[1] != want[0] || want[2] <= want[0] {
		t.Fatalf("versions over gRPC: %v", want)
	}
	pick := func(i ...int) []uint64 {
		var out []uint64
		for _, j := range i {
			out = append(out, want[j])
		}
		return out
	}

	for _, c := range restClients(t, ts) {
		t.Run("rest/"+c.name(), func(t *testing.T) {
			c.t = t
			code, b := c.post("/v1/query", `{"query": {"type": "shop.User", "versions": true}, "pageSize": 2}`)
			if code != 200 || !bytes.Contains(b, []byte(`"versions":`)) {
				t.Fatalf("query: %d %s", code, b)
			}
			var page pb.QueryResponse
			c.unmarshal(b, &page)
			if got := jsonVersions(t, b); !slices.Equal(got, pick(0, 1)) || !slices.Equal(page.Versions, got) || len(page.Records) != 2 {
				t.Fatalf("query page 1: versions %v, want %v\n%s", got, pick(0, 1), b)
			}
			_, b = c.post("/v1/query", `{"query": {"type": "shop.User", "versions": true}, "pageSize": 2, "pageToken": "`+page.NextPageToken+`"}`)
			if got := jsonVersions(t, b); !slices.Equal(got, pick(2)) {
				t.Fatalf("query page 2: versions %v, want %v\n%s", got, pick(2), b)
			}
			code, b = c.post("/v1/records:get", `{"type": "shop.User", "keys": [3, 9, "1"], "versions": true}`)
			if got := jsonVersions(t, b); code != 200 || !slices.Equal(got, pick(2, 0)) {
				t.Fatalf("get: %d, versions %v, want %v\n%s", code, got, pick(2, 0), b)
			}
			for _, req := range [][2]string{
				{"/v1/query", `{"query": {"type": "shop.User"}}`},
				{"/v1/records:get", `{"type": "shop.User", "keys": [1]}`},
			} {
				if _, b := c.post(req[0], req[1]); jsonVersions(t, b) != nil {
					t.Fatalf("%s without versions: %s", req[0], b)
				}
			}
		})
	}

	for _, js := range []bool{false, true} {
		t.Run(fmt.Sprint("nats/json=", js), func(t *testing.T) {
			c := newNATSClient(t, ts, ts.Srv.NATSURL(), js)
			var page pb.QueryResponse
			c.mustCall(natstransport.SubjectQuery, &pb.QueryRequest{Query: &pb.Query{Type: "shop.User", Versions: true}}, &page)
			if !slices.Equal(page.Versions, want) || len(page.Records) != 3 {
				t.Fatalf("query: versions %v, want %v", page.Versions, want)
			}
			var got pb.GetResponse
			c.mustCall(natstransport.SubjectGetRecords, &pb.GetRequest{Type: "shop.User", Versions: true,
				Keys: []*structpb.Value{structpb.NewNumberValue(2), structpb.NewNumberValue(3)}}, &got)
			if !slices.Equal(got.Versions, pick(1, 2)) || len(got.Records) != 2 {
				t.Fatalf("get: versions %v, want %v", got.Versions, pick(1, 2))
			}
			c.mustCall(natstransport.SubjectQuery, &pb.QueryRequest{Query: &pb.Query{Type: "shop.User"}}, &page)
			c.mustCall(natstransport.SubjectGetRecords, &pb.GetRequest{Type: "shop.User",
				Keys: []*structpb.Value{structpb.NewNumberValue(2)}}, &got)
			if len(page.Versions) != 0 || len(got.Versions) != 0 {
				t.Fatalf("without asking: query versions %v, get versions %v", page.Versions, got.Versions)
			}
		})
	}
}
