package server_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"
	"google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	pb "github.com/protobase/protobase/gen/protobase/v1"
	natstransport "github.com/protobase/protobase/internal/transport/nats"
	"github.com/protobase/protobase/server"
	"github.com/protobase/protobase/server/servertest"
)

// natsClient makes request-reply calls in protobuf or JSON.
type natsClient struct {
	t      *testing.T
	ts     *testServer
	nc     *nats.Conn
	prefix string
	json   bool
	key    string // sent as "Authorization: Bearer KEY" when set
}

func newNATSClient(t *testing.T, ts *testServer, url string, json bool) *natsClient {
	t.Helper()
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return &natsClient{t: t, ts: ts, nc: nc, prefix: natstransport.DefaultPrefix, json: json}
}

func (c *natsClient) encode(m proto.Message) []byte {
	c.t.Helper()
	var b []byte
	var err error
	if c.json {
		b, err = protojson.MarshalOptions{Resolver: c.ts.resolver()}.Marshal(m)
	} else {
		b, err = proto.Marshal(m)
	}
	if err != nil {
		c.t.Fatal(err)
	}
	return b
}

// raw sends data to an endpoint and returns the reply message.
func (c *natsClient) raw(endpoint string, data []byte) *nats.Msg {
	c.t.Helper()
	msg := nats.NewMsg(natstransport.Subject(c.prefix, endpoint))
	msg.Data = data
	if c.json {
		msg.Header.Set(natstransport.HeaderContentType, natstransport.ContentTypeJSON)
	}
	if c.key != "" {
		msg.Header.Set(natstransport.HeaderAuthorization, "Bearer "+c.key)
	}
	reply, err := c.nc.RequestMsg(msg, 10*time.Second)
	if err != nil {
		c.t.Fatalf("request %s: %v", msg.Subject, err)
	}
	return reply
}

// call sends req and decodes the reply into resp, or returns the status
// of an error reply.
func (c *natsClient) call(endpoint string, req, resp proto.Message) *status.Status {
	c.t.Helper()
	return c.decode(c.raw(endpoint, c.encode(req)), resp)
}

func (c *natsClient) decode(reply *nats.Msg, resp proto.Message) *status.Status {
	c.t.Helper()
	unmarshal := func(b []byte, m proto.Message) {
		c.t.Helper()
		var err error
		if c.json {
			if got := reply.Header.Get(natstransport.HeaderContentType); got != natstransport.ContentTypeJSON {
				c.t.Fatalf("JSON reply has Content-Type %q", got)
			}
			err = protojson.UnmarshalOptions{Resolver: c.ts.resolver()}.Unmarshal(b, m)
		} else {
			err = proto.Unmarshal(b, m)
		}
		if err != nil {
			c.t.Fatalf("decode reply %q: %v", b, err)
		}
	}
	if code := reply.Header.Get(micro.ErrorCodeHeader); code != "" {
		st := new(status.Status)
		unmarshal(reply.Data, st)
		if reply.Header.Get(micro.ErrorHeader) == "" {
			c.t.Fatalf("error reply without %s", micro.ErrorHeader)
		}
		return st
	}
	unmarshal(reply.Data, resp)
	return nil
}

func (c *natsClient) mustCall(endpoint string, req, resp proto.Message) {
	c.t.Helper()
	if st := c.call(endpoint, req, resp); st != nil {
		c.t.Fatalf("%s: %v", endpoint, st)
	}
}

func wantNATSCode(t *testing.T, st *status.Status, code codes.Code) {
	t.Helper()
	if st == nil || codes.Code(st.Code) != code {
		t.Fatalf("want %v, got %v", code, st)
	}
}

func TestNATSOperations(t *testing.T) {
	ts := startTransports(t, server.Config{NoSync: true})
	for i, json := range []bool{false, true} {
		t.Run(map[bool]string{false: "protobuf", true: "json"}[json], func(t *testing.T) {
			c := newNATSClient(t, ts, ts.Srv.NATSURL(), json)
			base := i * 100
			user := func(id int, name string) *anypb.Any {
				return ts.Rec("shop.User", fmt.Sprintf(`{"id": %d, "name": %q, "email": "%d@x"}`, base+id, name, base+id))
			}

			var schema pb.GetSchemaResponse
			c.mustCall(natstransport.SubjectSchemaGet, &pb.GetSchemaRequest{}, &schema)
			if len(schema.Types) != 2 {
				t.Fatalf("schema: %v", &schema)
			}
			var wr pb.WriteResponse
			c.mustCall(natstransport.SubjectInsert, &pb.WriteRequest{Records: []*anypb.Any{user(1, "a"), user(2, "b")}}, &wr)
			if wr.Batches != 1 || wr.Records != 2 || wr.Position == 0 {
				t.Fatalf("insert: %v", &wr)
			}
			c.mustCall(natstransport.SubjectUpdate, &pb.WriteRequest{Records: []*anypb.Any{user(1, "a2")}}, &wr)
			c.mustCall(natstransport.SubjectUpsert, &pb.WriteRequest{Records: []*anypb.Any{user(3, "c")}}, &wr)
			c.mustCall(natstransport.SubjectRemove, &pb.WriteRequest{Records: []*anypb.Any{user(2, "")}}, &wr)

			var page pb.QueryResponse
			q := &pb.Query{Type: "shop.User", Where: mustParse(t, fmt.Sprintf("id >= %d and id < %d", base, base+100))}
			c.mustCall(natstransport.SubjectQuery, &pb.QueryRequest{Query: q, PageSize: 1}, &page)
			if len(page.Records) != 1 || page.NextPageToken == "" || !proto.Equal(page.Records[0], user(1, "a2")) {
				t.Fatalf("page 1: %v", &page)
			}
			c.mustCall(natstransport.SubjectQuery, &pb.QueryRequest{Query: q, PageSize: 10, PageToken: page.NextPageToken}, &page)
			if len(page.Records) != 1 || page.NextPageToken != "" || !proto.Equal(page.Records[0], user(3, "c")) {
				t.Fatalf("page 2: %v", &page)
			}

			// Point lookups: a key record in, the stored record out.
			var got anypb.Any
			c.mustCall(natstransport.SubjectGet, ts.Rec("shop.User", fmt.Sprintf(`{"id": %d}`, base+3)), &got)
			if !proto.Equal(&got, user(3, "c")) {
				t.Fatalf("get: %v", &got)
			}
			wantNATSCode(t, c.call(natstransport.SubjectGet, ts.Rec("shop.User", fmt.Sprintf(`{"id": %d}`, base+2)), &got), codes.NotFound)
		})
	}
}

func TestNATSErrors(t *testing.T) {
	ts := startTransports(t, server.Config{NoSync: true, MaxMessageBytes: 64 << 10})
	ts.MustWrite(insert, []*anypb.Any{ts.Rec("shop.User", `{"id": 1, "email": "a@x"}`)})
	for _, json := range []bool{false, true} {
		t.Run(map[bool]string{false: "protobuf", true: "json"}[json], func(t *testing.T) {
			c := newNATSClient(t, ts, ts.Srv.NATSURL(), json)
			// The same refusals, with the same WriteError, as gRPC.
			same := func(subject string, op pb.WriteOp, code codes.Code, recs ...*anypb.Any) {
				t.Helper()
				_, gerr := ts.Write(op, recs)
				want := servertest.WriteErr(t, gerr, code)
				st := c.call(subject, &pb.WriteRequest{Records: recs}, new(pb.WriteResponse))
				wantNATSCode(t, st, code)
				if got := writeDetail(t, st); !proto.Equal(got, want) {
					t.Fatalf("NATS detail %v\ngRPC detail %v", got, want)
				}
			}
			same(natstransport.SubjectInsert, insert, codes.AlreadyExists, ts.Rec("shop.User", `{"id": 1, "email": "a@x"}`))
			same(natstransport.SubjectUpdate, pb.WriteOp_WRITE_OP_UPDATE, codes.NotFound, ts.Rec("shop.User", `{"id": 404}`))
			nope := &anypb.Any{TypeUrl: "type.googleapis.com/shop.Nope"}
			if !json {
				same(natstransport.SubjectInsert, insert, codes.InvalidArgument, ts.Rec("shop.User", `{"id": 5}`), nope)
			} else {
				// A JSON client cannot encode an unknown type; send the text.
				_, gerr := ts.Write(insert, []*anypb.Any{ts.Rec("shop.User", `{"id": 5}`), nope})
				want := servertest.WriteErr(t, gerr, codes.InvalidArgument)
				st := c.decode(c.raw(natstransport.SubjectInsert, []byte(`{"records": [{"@type": "type.googleapis.com/shop.User", "id": "5"}, {"@type": "type.googleapis.com/shop.Nope", "id": "1"}]}`)), new(pb.WriteResponse))
				if got := writeDetail(t, st); !proto.Equal(got, want) {
					t.Fatalf("NATS detail %v\ngRPC detail %v", got, want)
				}
			}
			wantNATSCode(t, c.call(natstransport.SubjectQuery, &pb.QueryRequest{Query: &pb.Query{Type: "shop.Nope"}}, new(pb.QueryResponse)), codes.NotFound)
			nopeKey := c.raw(natstransport.SubjectGet, []byte(`{"@type": "type.googleapis.com/shop.Nope", "id": "1"}`))
			if !json {
				nopeKey = c.raw(natstransport.SubjectGet, mustMarshal(t, nope))
			}
			wantNATSCode(t, c.decode(nopeKey, new(anypb.Any)), codes.InvalidArgument)

			// Malformed payloads.
			bad := []byte("\xff\xff\xff not a message")
			if json {
				bad = []byte(`{"records": [{"@type": "type.googleapis.com/shop.User", "id": "x"}]}`)
			}
			for _, ep := range []string{natstransport.SubjectInsert, natstransport.SubjectQuery, natstransport.SubjectGet, natstransport.SubjectSchemaGet} {
				wantNATSCode(t, c.decode(c.raw(ep, bad), new(pb.WriteResponse)), codes.InvalidArgument)
			}
			if json {
				st := c.decode(c.raw(natstransport.SubjectInsert, bad), new(pb.WriteResponse))
				we := writeDetail(t, st)
				if we.Record != 0 || we.TypeUrl != "type.googleapis.com/shop.User" || !strings.Contains(we.Reason, "invalid JSON") {
					t.Fatalf("bad JSON detail: %v", we)
				}
			}

			// Oversized: the embedded server's max_payload is
			// MaxMessageBytes, so the client library refuses to send.
			big := ts.Rec("shop.User", `{"id": 9, "name": "`+strings.Repeat("x", 100<<10)+`"}`)
			msg := nats.NewMsg(natstransport.Subject(c.prefix, natstransport.SubjectInsert))
			msg.Data = c.encode(&pb.WriteRequest{Records: []*anypb.Any{big}})
			if _, err := c.nc.RequestMsg(msg, 5*time.Second); !errors.Is(err, nats.ErrMaxPayload) {
				t.Fatalf("oversized request: %v", err)
			}
		})
	}
	// A page that would be over max_payload ends early, with a token:
	// paging through gets every record.
	for b := range 2 {
		var batch []*anypb.Any
		for i := range 8 {
			batch = append(batch, ts.Rec("shop.User", fmt.Sprintf(`{"id": %d, "email": "%d@y", "name": "%s"}`, 100+10*b+i, 100+10*b+i, strings.Repeat("y", 5<<10))))
		}
		ts.MustWrite(pb.WriteOp_WRITE_OP_UPSERT, batch)
	}
	c := newNATSClient(t, ts, ts.Srv.NATSURL(), false)
	seen, pages := 0, 0
	for token := ""; pages == 0 || token != ""; pages++ {
		page := new(pb.QueryResponse)
		if st := c.call(natstransport.SubjectQuery, &pb.QueryRequest{Query: &pb.Query{Type: "shop.User"}, PageToken: token}, page); st != nil {
			t.Fatalf("query page %d: %v", pages, st)
		}
		seen += len(page.Records)
		token = page.NextPageToken
	}
	if seen != 17 || pages < 2 {
		t.Fatalf("paged through %d users in %d pages, want 17 in more than one", seen, pages)
	}
	if n := ts.Count("shop.User"); n != 17 {
		t.Fatalf("%d users stored, want 17", n)
	}
}

// Two servers on one external NATS server share the subjects through the
// queue group; a request over MaxMessageBytes (but under the external
// server's max_payload) is refused by the server.
func TestNATSExternalQueueGroup(t *testing.T) {
	ns, err := natstransport.RunEmbedded(natstransport.EmbedOptions{Addr: "127.0.0.1:0", MaxPayload: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ns.Shutdown(); ns.WaitForShutdown() })
	var servers []*testServer
	for range 2 {
		ts := startServer(t, server.Config{NoSync: true, NATSURL: ns.ClientURL(), MaxMessageBytes: 64 << 10, Lab: true})
		ts.MustApply(map[string]string{"shop.proto": shopProto})
		ts.MustWrite(insert, []*anypb.Any{ts.Rec("shop.User", `{"id": 1}`)})
		servers = append(servers, ts)
		if ts.Srv.NATSURL() != ns.ClientURL() {
			t.Fatalf("NATSURL %q", ts.Srv.NATSURL())
		}
	}
	c := newNATSClient(t, servers[0], ns.ClientURL(), false)
	for range 64 {
		c.mustCall(natstransport.SubjectGet, servers[0].Rec("shop.User", `{"id": 1}`), new(anypb.Any))
	}
	for i, ts := range servers {
		if n := ts.Stats().PointLookups; n == 0 {
			t.Errorf("server %d served no lookup of 64", i)
		}
	}
	big := servers[0].Rec("shop.User", `{"id": 9, "name": "`+strings.Repeat("x", 100<<10)+`"}`)
	st := c.call(natstransport.SubjectInsert, &pb.WriteRequest{Records: []*anypb.Any{big}}, new(pb.WriteResponse))
	wantNATSCode(t, st, codes.ResourceExhausted)
	if we := writeDetail(t, st); we.BatchesApplied != 0 || !strings.Contains(we.Reason, "larger than the limit") {
		t.Fatalf("oversized detail: %v", we)
	}

	// `nats micro info` sees the service, its endpoints and queue group.
	reply, err := c.nc.Request("$SRV.INFO."+natstransport.ServiceName, nil, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"protobase.get"`, `"protobase.schema.get"`, `"protobase.insert"`, `"queue_group":"protobase"`} {
		if !strings.Contains(string(reply.Data), want) {
			t.Errorf("service info lacks %s: %s", want, reply.Data)
		}
	}
}

// Garbage on every subject gets an error reply and changes nothing.
func TestNATSHostilePayloads(t *testing.T) {
	ts := startTransports(t, server.Config{NoSync: true})
	ts.MustWrite(insert, []*anypb.Any{ts.Rec("shop.User", `{"id": 1, "email": "a@x"}`)})
	valid := [][]byte{
		mustMarshal(t, &pb.WriteRequest{Records: []*anypb.Any{ts.Rec("shop.User", `{"id": 2, "name": "n", "tags": ["a"]}`)}}),
		mustMarshal(t, &pb.QueryRequest{Query: &pb.Query{Type: "shop.User", Where: mustParse(t, `id = 1`)}}),
		[]byte(`{"records": [{"@type": "type.googleapis.com/shop.User", "id": "2", "tags": ["a"]}]}`),
	}
	rng := rand.New(rand.NewPCG(1, 2))
	endpoints := []string{natstransport.SubjectInsert, natstransport.SubjectUpsert, natstransport.SubjectUpdate,
		natstransport.SubjectRemove, natstransport.SubjectQuery, natstransport.SubjectGet, natstransport.SubjectSchemaGet}
	for _, json := range []bool{false, true} {
		c := newNATSClient(t, ts, ts.Srv.NATSURL(), json)
		for i := range 150 {
			src := valid[rng.IntN(len(valid))]
			data := append([]byte(nil), src...)
			// Flip, cut or splice bytes: mostly-valid input reaches deeper.
			for range 1 + rng.IntN(4) {
				switch rng.IntN(3) {
				case 0:
					if len(data) > 0 {
						data[rng.IntN(len(data))] = byte(rng.Uint32())
					}
				case 1:
					data = data[:rng.IntN(len(data)+1)]
				case 2:
					p := rng.IntN(len(data) + 1)
					data = append(data[:p:p], append([]byte{byte(rng.Uint32())}, data[p:]...)...)
				}
			}
			// Every request is answered (raw fails the test on a
			// timeout), with a reply or an error.
			c.raw(endpoints[i%len(endpoints)], data)
		}
	}
	// The server still serves, and only well-formed writes changed data.
	var got anypb.Any
	newNATSClient(t, ts, ts.Srv.NATSURL(), false).mustCall(natstransport.SubjectGet, ts.Rec("shop.User", `{"id": 1}`), &got)
	for _, m := range ts.Records("shop.User") {
		if id := servertest.FieldValue(m, "id").Int(); id != 1 && servertest.FieldValue(m, "email").String() == "a@x" {
			t.Fatalf("user %d took user 1's unique email", id)
		}
	}
}

func mustMarshal(t *testing.T, m proto.Message) []byte {
	t.Helper()
	b, err := proto.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
