package server_test

import (
	"bytes"
	"net/http"
	"runtime"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/types/known/anypb"

	pb "github.com/protobase/protobase/gen/protobase/v1"
	natstransport "github.com/protobase/protobase/internal/transport/nats"
	"github.com/protobase/protobase/server"
)

// numsProto is a record type of many small numbers: rendered as JSON, or
// parsed from it, a record takes a hundred times its bytes.
const numsProto = `syntax = "proto3";
package nums;
import "protobase/v1/options.proto";
message Nums {
  option (protobase.v1.record) = { primary_key: "id" };
  int64 id = 1;
  repeated int64 v = 2;
}
`

// nums encodes a nums.Nums of id holding n zeros.
func nums(id int64, n int) *anypb.Any {
	b := protowire.AppendVarint(protowire.AppendTag(nil, 1, protowire.VarintType), uint64(id))
	if n > 0 {
		b = protowire.AppendBytes(protowire.AppendTag(b, 2, protowire.BytesType), make([]byte, n))
	}
	return &anypb.Any{TypeUrl: "type.googleapis.com/nums.Nums", Value: b}
}

// allocatedBy is what the process allocates while f runs.
func allocatedBy(f func()) uint64 {
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	f()
	runtime.ReadMemStats(&m1)
	return m1.TotalAlloc - m0.TotalAlloc
}

// The JSON transports hold the memory a conversion takes against the
// result budget (64 MiB here), and refuse one that needs more before
// converting: a record of a million small numbers (1 MiB), which takes
// about 150 MiB to render, is RESOURCE_EXHAUSTED over REST and NATS JSON,
// and so is a request object of a million numbers, which stores nothing;
// the refusals allocate little. A record of ten thousand renders, and
// protobuf payloads carry the large one.
func TestBoundsJSONTranscoding(t *testing.T) {
	ts := startTransports(t, server.Config{NoSync: true, MaxResultBufferBytes: 64 << 20})
	ts.MustApply(map[string]string{"shop.proto": shopProto, "nums.proto": numsProto})
	ts.MustWrite(pb.WriteOp_WRITE_OP_INSERT, []*anypb.Any{nums(1, 1<<20), nums(2, 10_000)})
	c := restClients(t, ts)[0]
	const refusal = "convert between JSON and protobuf"
	const most = 32 << 20 // what a refusal may allocate
	for _, call := range []struct{ path, body string }{
		{"/v1/records:get", `{"type": "nums.Nums", "keys": [1]}`},
		{"/v1/query", `{"query": {"type": "nums.Nums", "filter": "id = 1"}}`},
	} {
		var code int
		var body []byte
		if a := allocatedBy(func() { code, body = c.post(call.path, call.body) }); code != http.StatusTooManyRequests || !bytes.Contains(body, []byte(refusal)) || a > most {
			t.Fatalf("POST %s of a record of a million numbers: %d %.200s, %d bytes allocated; want 429 RESOURCE_EXHAUSTED within %d", call.path, code, body, a, most)
		}
	}
	if code, body := c.post("/v1/records:get", `{"type": "nums.Nums", "keys": [2]}`); code != http.StatusOK || bytes.Count(body, []byte(`"0"`)) != 10_000 {
		t.Fatalf("get of a record of ten thousand numbers: %d %.200s", code, body)
	}

	js := `{"records": [{"@type": "type.googleapis.com/nums.Nums", "id": "3", "v": [` + strings.Repeat("0,", 1<<20) + `0]}]}`
	var code int
	var body []byte
	if a := allocatedBy(func() { code, body = c.post("/v1/records:insert", js) }); code != http.StatusTooManyRequests || !bytes.Contains(body, []byte(refusal)) || a > most {
		t.Fatalf("insert of a request object of a million numbers: %d %.200s, %d bytes allocated; want 429 RESOURCE_EXHAUSTED within %d", code, body, a, most)
	}

	natsJSON := newNATSClient(t, ts, ts.Srv.NATSURL(), true)
	st := natsJSON.call(natstransport.SubjectGet, nums(1, 0), new(anypb.Any))
	wantNATSCode(t, st, codes.ResourceExhausted)
	if !strings.Contains(st.Message, refusal) {
		t.Fatalf("NATS JSON get: %v", st)
	}
	st = natsJSON.call(natstransport.SubjectInsert, &pb.WriteRequest{Records: []*anypb.Any{nums(4, 10)}}, new(pb.WriteResponse))
	if st != nil {
		t.Fatalf("NATS JSON insert of a small record: %v", st)
	}
	natsPB := newNATSClient(t, ts, ts.Srv.NATSURL(), false)
	var rec anypb.Any
	natsPB.mustCall(natstransport.SubjectGet, nums(1, 0), &rec)
	if len(rec.Value) < 1<<20 {
		t.Fatalf("protobuf get: a record of %d bytes", len(rec.Value))
	}
	wantNATSCode(t, natsPB.call(natstransport.SubjectGet, nums(3, 0), new(anypb.Any)), codes.NotFound)
}
