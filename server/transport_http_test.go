package server_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/dynamicpb"
	"google.golang.org/protobuf/types/known/anypb"

	pb "github.com/protobase/protobase/gen/protobase/v1"
	"github.com/protobase/protobase/internal/transport/schemajson"
	"github.com/protobase/protobase/server"
	"github.com/protobase/protobase/server/servertest"
)

// restClient talks to the REST gateway over one protocol.
type restClient struct {
	t    *testing.T
	ts   *testServer
	base string
	hc   *http.Client
	h2   bool
}

// restClients returns a client over HTTP/1.1 and one over cleartext HTTP/2
// (prior knowledge), both on the server's one HTTP listener.
func restClients(t *testing.T, ts *testServer) []*restClient {
	base := "http://" + ts.Srv.HTTPAddr()
	h1 := &http.Transport{}
	h2 := &http.Transport{Protocols: new(http.Protocols)}
	h2.Protocols.SetUnencryptedHTTP2(true)
	t.Cleanup(h1.CloseIdleConnections)
	t.Cleanup(h2.CloseIdleConnections)
	return []*restClient{
		{t: t, ts: ts, base: base, hc: &http.Client{Transport: h1, Timeout: 30 * time.Second}},
		{t: t, ts: ts, base: base, hc: &http.Client{Transport: h2, Timeout: 30 * time.Second}, h2: true},
	}
}

func (c *restClient) name() string {
	if c.h2 {
		return "h2c"
	}
	return "http1"
}

// do sends body to path and returns the status code and body; it checks
// the protocol actually used.
func (c *restClient) do(method, path string, body io.Reader) (int, []byte) {
	c.t.Helper()
	req, err := http.NewRequest(method, c.base+path, body)
	if err != nil {
		c.t.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		c.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	if want := map[bool]int{false: 1, true: 2}[c.h2]; resp.ProtoMajor != want {
		c.t.Fatalf("%s %s went over HTTP/%d, want %d", method, path, resp.ProtoMajor, want)
	}
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		c.t.Fatal(err)
	}
	return resp.StatusCode, b
}

func (c *restClient) post(path, body string) (int, []byte) {
	c.t.Helper()
	return c.do(http.MethodPost, path, strings.NewReader(body))
}

// mustPost posts and decodes a 200 response into m.
func (c *restClient) mustPost(path, body string, m proto.Message) {
	c.t.Helper()
	code, b := c.post(path, body)
	if code != http.StatusOK {
		c.t.Fatalf("POST %s: %d %s", path, code, b)
	}
	c.unmarshal(b, m)
}

// unmarshal decodes JSON with the server's current schema, as a JSON
// client with the GetSchema descriptors would.
func (c *restClient) unmarshal(b []byte, m proto.Message) {
	c.t.Helper()
	if err := (protojson.UnmarshalOptions{Resolver: c.ts.resolver()}).Unmarshal(b, m); err != nil {
		c.t.Fatalf("decode %s: %v", b, err)
	}
}

// restStatus decodes an error body and checks its HTTP and gRPC codes.
func (c *restClient) restStatus(code int, b []byte, wantHTTP int, want codes.Code) *status.Status {
	c.t.Helper()
	if code != wantHTTP {
		c.t.Fatalf("HTTP %d, want %d: %s", code, wantHTTP, b)
	}
	st := new(status.Status)
	c.unmarshal(b, st)
	if codes.Code(st.Code) != want {
		c.t.Fatalf("code %v, want %v: %s", codes.Code(st.Code), want, b)
	}
	return st
}

// lines splits a newline-delimited stream into its {"result"} objects and
// its final {"error"}, if any.
func (c *restClient) lines(b []byte, newResult func() proto.Message) ([]proto.Message, *status.Status) {
	c.t.Helper()
	var out []proto.Message
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, 16<<20)
	for sc.Scan() {
		var line map[string]json.RawMessage
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
			c.t.Fatalf("stream line %q: %v", sc.Bytes(), err)
		}
		if e, ok := line["error"]; ok {
			st := new(status.Status)
			c.unmarshal(e, st)
			return out, st
		}
		m := newResult()
		c.unmarshal(line["result"], m)
		out = append(out, m)
	}
	return out, nil
}

func writeDetail(t *testing.T, st *status.Status) *pb.WriteError {
	t.Helper()
	for _, d := range st.Details {
		we := new(pb.WriteError)
		if d.MessageIs(we) {
			if err := d.UnmarshalTo(we); err != nil {
				t.Fatal(err)
			}
			return we
		}
	}
	t.Fatalf("status %v has no WriteError detail", st)
	return nil
}

func startTransports(t *testing.T, cfg server.Config) *testServer {
	t.Helper()
	cfg.HTTPAddr = "127.0.0.1:0"
	cfg.NATS = true
	cfg.NATSAddr = "127.0.0.1:0"
	ts := startServer(t, cfg)
	ts.MustApply(map[string]string{"shop.proto": shopProto})
	return ts
}

func TestHTTPOperations(t *testing.T) {
	ts := startTransports(t, server.Config{NoSync: true})
	for i, c := range restClients(t, ts) {
		t.Run(c.name(), func(t *testing.T) {
			c.t = t
			base := int64(i * 100)
			id := func(n int64) int64 { return base + n }

			var schema pb.GetSchemaResponse
			code, b := c.do(http.MethodGet, "/v1/schema", nil)
			if code != http.StatusOK {
				t.Fatalf("GET /v1/schema: %d %s", code, b)
			}
			c.unmarshal(b, &schema)
			if schema.Files["shop.proto"] != shopProto || len(schema.Types) != 2 {
				t.Fatalf("schema: %v", &schema)
			}

			// Two batches, one JSON object each, newline-delimited.
			var wr pb.WriteResponse
			c.mustPost("/v1/records:insert", fmt.Sprintf(
				`{"records": [{"@type": "type.googleapis.com/shop.User", "id": "%d", "name": "ann", "email": "a%d@x"}]}
				{"records": [{"@type": "type.googleapis.com/shop.User", "id": "%d", "name": "bob", "email": "b%d@x"},
				             {"@type": "type.googleapis.com/shop.Order", "userId": "%d", "id": "1", "total": 9.5, "line": {"sku": "s", "qty": 2}}]}`,
				id(1), i, id(2), i, id(1)), &wr)
			if wr.Batches != 2 || wr.Records != 3 {
				t.Fatalf("insert: %v", &wr)
			}
			c.mustPost("/v1/records:update", fmt.Sprintf(`{"records": [{"@type": "type.googleapis.com/shop.User", "id": "%d", "name": "ann2", "email": "a%d@x"}]}`, id(1), i), &wr)
			c.mustPost("/v1/records:upsert", fmt.Sprintf(`{"records": [{"@type": "type.googleapis.com/shop.User", "id": "%d", "name": "cy", "email": "c%d@x"}]}`, id(3), i), &wr)
			c.mustPost("/v1/records:remove", fmt.Sprintf(`{"records": [{"@type": "type.googleapis.com/shop.User", "id": "%d"}]}`, id(2)), &wr)
			if wr.Records != 1 {
				t.Fatalf("remove: %v", &wr)
			}

			// Query pages render records through the runtime schema.
			q := fmt.Sprintf(`{"type": "shop.User", "where": {"cmp": {"field": "id", "op": "OP_GE", "value": {"int": "%d"}}}, "limit": 10}`, base)
			var page pb.QueryResponse
			c.mustPost("/v1/query", `{"query": `+q+`, "pageSize": 1}`, &page)
			if len(page.Records) != 1 || page.NextPageToken == "" {
				t.Fatalf("page 1: %v", &page)
			}
			_, raw := c.post("/v1/query", `{"query": `+q+`, "pageSize": 1}`)
			if !bytes.Contains(raw, []byte(`"@type":"type.googleapis.com/shop.User"`)) || !bytes.Contains(raw, []byte(`"name":"ann2"`)) {
				t.Fatalf("record JSON: %s", raw)
			}
			c.mustPost("/v1/query", `{"query": `+q+`, "pageSize": 5, "pageToken": "`+page.NextPageToken+`"}`, &page)
			if len(page.Records) != 1 || page.NextPageToken != "" {
				t.Fatalf("page 2: %v", &page)
			}

			// Scan streams newline-delimited results.
			code, b = c.post("/v1/scan", `{"query": `+q+`, "batchSize": 1}`)
			if code != http.StatusOK {
				t.Fatalf("scan: %d %s", code, b)
			}
			msgs, st := c.lines(b, func() proto.Message { return new(pb.ScanResponse) })
			var n int
			var done bool
			for _, m := range msgs {
				n += len(m.(*pb.ScanResponse).Records)
				done = done || m.(*pb.ScanResponse).Done
			}
			if st != nil || n != 2 || !done {
				t.Fatalf("scan: %d records, done %v, error %v\n%s", n, done, st, b)
			}

			// Search: two requests of queries on one stream.
			code, b = c.post("/v1/search", `{"queries": [`+q+`]}
				{"queries": [{"type": "shop.Order"}, {"type": "shop.Nope"}]}`)
			if code != http.StatusOK {
				t.Fatalf("search: %d %s", code, b)
			}
			msgs, st = c.lines(b, func() proto.Message { return new(pb.SearchResponse) })
			var results, dones, errs int
			for _, m := range msgs {
				r := m.(*pb.SearchResponse)
				for _, rb := range r.Results {
					results += len(rb.Records)
				}
				dones += len(r.Done)
				errs += len(r.Errors)
			}
			if st != nil || results < 3 || dones != 2 || errs != 1 {
				t.Fatalf("search: %d results, %d done, %d errors, %v\n%s", results, dones, errs, st, b)
			}

			// Write: per-batch operations, acknowledged lines.
			code, b = c.post("/v1/records:write", fmt.Sprintf(
				`{"op": "WRITE_OP_UPSERT", "ack": true, "records": [{"@type": "type.googleapis.com/shop.User", "id": "%d", "email": "d%d@x"}]}
				{"op": "WRITE_OP_REMOVE", "ack": true, "records": [{"@type": "type.googleapis.com/shop.User", "id": "%d"}]}`, id(4), i, id(4)))
			msgs, st = c.lines(b, func() proto.Message { return new(pb.WriteStreamResponse) })
			if code != http.StatusOK || st != nil || len(msgs) != 2 || msgs[1].(*pb.WriteStreamResponse).Records != 2 {
				t.Fatalf("write: %d %v %v\n%s", code, msgs, st, b)
			}
		})
	}
	if n := ts.Count("shop.User"); n != 4 {
		t.Fatalf("%d users stored, want 4", n)
	}
}

// The schema changes at run time: JSON in and out follows it at once.
func TestHTTPFollowsSchemaChanges(t *testing.T) {
	ts := startTransports(t, server.Config{NoSync: true})
	c := restClients(t, ts)[0]
	body := `{"records": [{"@type": "type.googleapis.com/shop.User", "id": "1", "nickname": "zed"}]}`
	code, b := c.post("/v1/records:insert", body)
	c.restStatus(code, b, http.StatusBadRequest, codes.InvalidArgument)

	v2 := strings.Replace(shopProto, "repeated string tags = 4;", "repeated string tags = 4;\n  string nickname = 5;", 1)
	var applied pb.ApplySchemaResponse
	js, _ := json.Marshal(map[string]any{"files": map[string]string{"shop.proto": v2}})
	c.mustPost("/v1/schema:apply", string(js), &applied)
	if !applied.Applied {
		t.Fatalf("apply: %v", &applied)
	}
	var wr pb.WriteResponse
	c.mustPost("/v1/records:insert", body, &wr)
	_, raw := c.post("/v1/query", `{"query": {"type": "shop.User"}}`)
	if !bytes.Contains(raw, []byte(`"nickname":"zed"`)) {
		t.Fatalf("query after schema change: %s", raw)
	}
}

func TestHTTPOpenAPI(t *testing.T) {
	ts := startTransports(t, server.Config{NoSync: true})
	for _, c := range restClients(t, ts) {
		code, b := c.do(http.MethodGet, "/openapi.json", nil)
		var spec struct {
			Swagger string                     `json:"swagger"`
			Paths   map[string]json.RawMessage `json:"paths"`
		}
		if code != http.StatusOK || json.Unmarshal(b, &spec) != nil {
			t.Fatalf("%s /openapi.json: %d %.200s", c.name(), code, b)
		}
		for _, p := range []string{"/v1/query", "/v1/scan", "/v1/records:insert", "/v1/schema", "/v1/schema:apply"} {
			if _, ok := spec.Paths[p]; !ok {
				t.Errorf("%s: spec has no path %s", c.name(), p)
			}
		}
	}
}

// Errors carry the same status and WriteError as over gRPC, and a bad
// batch keeps the batches before it.
func TestHTTPErrors(t *testing.T) {
	ts := startTransports(t, server.Config{NoSync: true, MaxMessageBytes: 64 << 10})
	ts.MustWrite(insert, []*anypb.Any{ts.Rec("shop.User", `{"id": 1, "email": "a@x"}`)})
	good := func(id int) string {
		return fmt.Sprintf(`{"records": [{"@type": "type.googleapis.com/shop.User", "id": "%d", "email": "e%d@x"}]}`, id, id)
	}
	for i, c := range restClients(t, ts) {
		t.Run(c.name(), func(t *testing.T) {
			c.t = t
			id := 1000 * (i + 1)

			// Malformed JSON in batch 1 of a stream: batch 0 stays, durable,
			// and the detail says so.
			code, b := c.post("/v1/records:insert", good(id)+"\n"+`{"records": [{"@type": "type.googleapis.com/shop.User", "id": "x"}]}`)
			st := c.restStatus(code, b, http.StatusBadRequest, codes.InvalidArgument)
			we := writeDetail(t, st)
			if we.Batch != 1 || we.Record != 0 || we.BatchesApplied != 1 || we.RecordsApplied != 1 || we.TypeUrl != "type.googleapis.com/shop.User" || !strings.Contains(we.Reason, "invalid JSON") {
				t.Fatalf("bad JSON detail: %v", we)
			}
			code, b = c.post("/v1/records:insert", `{"records": [}`)
			c.restStatus(code, b, http.StatusBadRequest, codes.InvalidArgument)
			code, b = c.post("/v1/records:insert", `[1, 2]`)
			c.restStatus(code, b, http.StatusBadRequest, codes.InvalidArgument)
			code, b = c.post("/v1/query", `{"query": {"type": "shop.User", "limit": "many"}}`)
			c.restStatus(code, b, http.StatusBadRequest, codes.InvalidArgument)

			// Unknown type and constraint violations: the gRPC details.
			same := func(path string, op pb.WriteOp, httpCode int, code codes.Code, js string, recs []*anypb.Any) {
				t.Helper()
				_, gerr := ts.Write(op, recs)
				want := servertest.WriteErr(t, gerr, code)
				hc, hb := c.post(path, js)
				got := writeDetail(t, c.restStatus(hc, hb, httpCode, code))
				if !proto.Equal(got, want) {
					t.Fatalf("%s: REST detail %v\ngRPC detail %v", path, got, want)
				}
			}
			dupe := `{"records": [{"@type": "type.googleapis.com/shop.User", "id": "1", "email": "a@x"}]}`
			same("/v1/records:insert", insert, http.StatusConflict, codes.AlreadyExists, dupe,
				[]*anypb.Any{ts.Rec("shop.User", `{"id": 1, "email": "a@x"}`)})
			same("/v1/records:upsert", pb.WriteOp_WRITE_OP_UPSERT, http.StatusConflict, codes.AlreadyExists,
				`{"records": [{"@type": "type.googleapis.com/shop.User", "id": "77", "email": "a@x"}]}`,
				[]*anypb.Any{ts.Rec("shop.User", `{"id": 77, "email": "a@x"}`)})
			same("/v1/records:update", pb.WriteOp_WRITE_OP_UPDATE, http.StatusNotFound, codes.NotFound,
				`{"records": [{"@type": "type.googleapis.com/shop.User", "id": "404"}]}`,
				[]*anypb.Any{ts.Rec("shop.User", `{"id": 404}`)})
			nope := &anypb.Any{TypeUrl: "type.googleapis.com/shop.Nope"}
			same("/v1/records:insert", insert, http.StatusBadRequest, codes.InvalidArgument,
				`{"records": [{"@type": "type.googleapis.com/shop.User", "id": "5", "email": "five@x"}, {"@type": "type.googleapis.com/shop.Nope", "id": "1"}]}`,
				[]*anypb.Any{ts.Rec("shop.User", `{"id": 5, "email": "five@x"}`), nope})

			// Oversized: one batch over MaxMessageBytes is 413 with the
			// counts of what was kept; a unary body too.
			big := fmt.Sprintf(`{"records": [{"@type": "type.googleapis.com/shop.User", "id": "%d", "name": "%s"}]}`, id+1, strings.Repeat("x", 100<<10))
			code, b = c.post("/v1/records:insert", good(id+2)+"\n"+big)
			we = writeDetail(t, c.restStatus(code, b, http.StatusRequestEntityTooLarge, codes.ResourceExhausted))
			if we.Batch != 1 || we.BatchesApplied != 1 || we.RecordsApplied != 1 {
				t.Fatalf("oversized detail: %v", we)
			}
			// gRPC refuses the same stream with the same code (grpc-go
			// writes that status itself, so it has no WriteError; the
			// batch before is kept all the same, though the status may
			// come while it is still being applied: the stream reads one
			// message ahead).
			_, gerr := ts.Write(insert, []*anypb.Any{ts.Rec("shop.User", fmt.Sprintf(`{"id": %d, "email": "g%d@x"}`, id+3, id))},
				[]*anypb.Any{ts.Rec("shop.User", fmt.Sprintf(`{"id": %d, "name": "%s"}`, id+4, strings.Repeat("x", 100<<10)))})
			wantCode(t, gerr, codes.ResourceExhausted)
			eventually(t, "the batch before the oversized message applied", func() bool {
				return slices.ContainsFunc(ts.Records("shop.User"), func(m *dynamicpb.Message) bool {
					return servertest.FieldValue(m, "id").Int() == int64(id+3)
				})
			})
			code, b = c.post("/v1/query", `{"query": {"type": "shop.User", "where": {"cmp": {"field": "name", "op": "OP_EQ", "value": {"string": "`+strings.Repeat("x", 100<<10)+`"}}}}}`)
			c.restStatus(code, b, http.StatusRequestEntityTooLarge, codes.ResourceExhausted)

			// Errors of streamed responses.
			code, b = c.post("/v1/scan", `{"query": {"type": "shop.Nope"}}`)
			if code != http.StatusNotFound {
				t.Fatalf("scan of unknown type: %d %s", code, b)
			}
			if _, st := c.lines(b, func() proto.Message { return new(pb.ScanResponse) }); st == nil || codes.Code(st.Code) != codes.NotFound {
				t.Fatalf("scan of unknown type: %s", b)
			}
			code, b = c.do(http.MethodGet, "/v1/nope", nil)
			c.restStatus(code, b, http.StatusNotFound, codes.NotFound)
		})
	}
	// Nothing of a refused batch is stored; the batches before them are:
	// per protocol the good batch before the malformed one (id), before the
	// oversized one (id+2) and the gRPC one (id+3).
	var ids []int64
	for _, m := range ts.Records("shop.User") {
		ids = append(ids, servertest.FieldValue(m, "id").Int())
	}
	want := []int64{1, 1000, 1002, 1003, 2000, 2002, 2003}
	if fmt.Sprint(ids) != fmt.Sprint(want) {
		t.Fatalf("stored ids %v, want %v", ids, want)
	}
}

// A client that disconnects mid-stream loses nothing acknowledged and
// leaves the server serving: on the Write stream over HTTP/2, each batch is
// sent only after the previous one's acknowledgement line arrived; then the
// client sends half a batch and goes away. Every acknowledged record stays,
// nothing of the half batch is stored, and the server takes the next write.
// The old Insert-stream cut (half a JSON object, then gone) is kept too.
func TestHTTPClientGoesAway(t *testing.T) {
	ts := startTransports(t, server.Config{})
	c := restClients(t, ts)[1] // h2c: request and response stream at once
	pr, pw := io.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.base+"/v1/records:write", pr)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-ndjson")
	type result struct {
		resp *http.Response
		err  error
	}
	started := make(chan result, 1)
	go func() {
		resp, err := c.hc.Do(req)
		started <- result{resp, err}
	}()
	send := func(line string) {
		t.Helper()
		if _, err := io.WriteString(pw, line); err != nil {
			t.Fatalf("send: %v", err)
		}
	}
	const acked = 5
	send(`{"op": "WRITE_OP_INSERT", "ack": true, "records": [{"@type": "type.googleapis.com/shop.User", "id": "1", "email": "1@x"}]}` + "\n")
	r := <-started
	if r.err != nil {
		t.Fatal(r.err)
	}
	defer r.resp.Body.Close()
	if r.resp.StatusCode != http.StatusOK || r.resp.ProtoMajor != 2 {
		t.Fatalf("HTTP %d over %s, want 200 over HTTP/2", r.resp.StatusCode, r.resp.Proto)
	}
	lines := bufio.NewScanner(r.resp.Body)
	for n := 1; n <= acked; n++ {
		if n > 1 {
			send(fmt.Sprintf(`{"op": "WRITE_OP_UPSERT", "ack": true, "records": [{"@type": "type.googleapis.com/shop.User", "id": "%d", "email": "%d@x"}, {"@type": "type.googleapis.com/shop.User", "id": "%d", "email": "%d@x"}]}`+"\n", n, n, 100+n, 100+n))
		}
		// The acknowledgement is the synchronisation point.
		if !lines.Scan() {
			t.Fatalf("no acknowledgement of batch %d: %v", n-1, lines.Err())
		}
		msgs, st := c.lines(lines.Bytes(), func() proto.Message { return new(pb.WriteStreamResponse) })
		if st != nil || len(msgs) != 1 {
			t.Fatalf("batch %d: %s", n-1, lines.Bytes())
		}
		ack := msgs[0].(*pb.WriteStreamResponse)
		if ack.Batch != uint64(n-1) || ack.Records != uint64(2*n-1) {
			t.Fatalf("acknowledgement %v, want batch %d with %d records", ack, n-1, 2*n-1)
		}
	}
	send(`{"op": "WRITE_OP_INSERT", "ack": true, "records": [{"@type": "type.googleapis.com/shop.User", "id": "999", "email": "999@x"}, {"@type": "type.googleapis.com/shop.Us`)
	cancel()
	pw.CloseWithError(context.Canceled)
	for lines.Scan() { // the stream ends, whatever its last words
	}

	// The same on an Insert stream, which acknowledges nothing before its
	// end: its first batch, once visible, stays after the cut.
	ipr, ipw := io.Pipe()
	ictx, icancel := context.WithCancel(context.Background())
	defer icancel()
	ireq, err := http.NewRequestWithContext(ictx, http.MethodPost, c.base+"/v1/records:insert", ipr)
	if err != nil {
		t.Fatal(err)
	}
	ireq.Header.Set("Content-Type", "application/x-ndjson")
	idone := make(chan struct{})
	go func() {
		defer close(idone)
		if resp, err := c.hc.Do(ireq); err == nil {
			resp.Body.Close()
		}
	}()
	fmt.Fprintf(ipw, `{"records": [{"@type": "type.googleapis.com/shop.User", "id": "500", "email": "500@x"}]}`+"\n")
	deadline := time.Now().Add(10 * time.Second)
	for {
		page, err := ts.C.Query(t.Context(), &pb.Query{Type: "shop.User", Where: mustParse(t, "id = 500")}, 1, "")
		if err != nil {
			t.Fatal(err)
		}
		if len(page.Records) == 1 {
			break // applied: the synchronisation point
		}
		if time.Now().After(deadline) {
			t.Fatal("the Insert stream's first batch was never applied")
		}
		time.Sleep(time.Millisecond) // polling a state, not waiting out a race
	}
	fmt.Fprintf(ipw, `{"records": [{"@type": "type.googleapis.com/shop.User", "id": "501", "email": "501@x"}, {"@type": "type.googleapis.com/shop.Us`)
	icancel()
	ipw.CloseWithError(context.Canceled)
	<-idone

	var wr pb.WriteResponse
	c.mustPost("/v1/records:insert", `{"records": [{"@type": "type.googleapis.com/shop.User", "id": "2000", "email": "2000@x"}]}`, &wr)
	var ids []int64
	for _, m := range ts.Records("shop.User") {
		ids = append(ids, servertest.FieldValue(m, "id").Int())
	}
	want := []int64{1, 2, 3, 4, 5, 102, 103, 104, 105, 500, 2000}
	if fmt.Sprint(ids) != fmt.Sprint(want) {
		t.Fatalf("stored ids %v, want the acknowledged %v", ids, want)
	}
}

func (ts *testServer) resolver() *schemajson.Resolver {
	files, err := protodesc.NewFiles(ts.schema().Descriptors)
	if err != nil {
		ts.T.Fatal(err)
	}
	return schemajson.New(func() *protoregistry.Files { return files })
}

func (ts *testServer) schema() *pb.GetSchemaResponse {
	ts.T.Helper()
	resp, err := ts.C.GetSchema(context.Background())
	if err != nil {
		ts.T.Fatal(err)
	}
	return resp
}
