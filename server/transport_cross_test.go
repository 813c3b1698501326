package server_test

import (
	"bytes"
	"context"
	"fmt"
	"testing"

	"google.golang.org/protobuf/types/known/anypb"

	pb "github.com/protobase/protobase/gen/protobase/v1"
	natstransport "github.com/protobase/protobase/internal/transport/nats"
	"github.com/protobase/protobase/server"
)

// A record written over any transport reads back over every transport
// with the same bytes (Any.value): the server stores what it received and
// never re-encodes, and JSON converts through the schema deterministically
// (a JSON reader gets its bytes back by converting the JSON it received).
func TestTransportsRoundTripBytes(t *testing.T) {
	ts := startTransports(t, server.Config{NoSync: true})
	rest := restClients(t, ts)
	natsPB := newNATSClient(t, ts, ts.Srv.NATSURL(), false)
	natsJSON := newNATSClient(t, ts, ts.Srv.NATSURL(), true)

	// The record of writer w: every kind of field, including a nested
	// message, a double, a repeated string and non-ASCII text.
	orderJSON := func(w int) string {
		return fmt.Sprintf(`{"userId": "%d", "id": "%d", "total": 12.25, "line": {"sku": "sk\u00fc-%d", "qty": 3}}`, w, 18446744073709551615-uint64(w), w)
	}
	want := func(w int) *anypb.Any { return ts.Rec("shop.Order", orderJSON(w)) }
	withType := func(w int) string {
		return `{"@type": "type.googleapis.com/shop.Order", ` + orderJSON(w)[1:]
	}

	writers := []struct {
		name  string
		write func(w int)
	}{
		{"grpc", func(w int) { ts.MustWrite(insert, []*anypb.Any{want(w)}) }},
		{"rest-http1", func(w int) {
			rest[0].mustPost("/v1/records:insert", `{"records": [`+withType(w)+`]}`, new(pb.WriteResponse))
		}},
		{"rest-h2c", func(w int) {
			rest[1].mustPost("/v1/records:insert", `{"records": [`+withType(w)+`]}`, new(pb.WriteResponse))
		}},
		{"nats", func(w int) {
			natsPB.mustCall(natstransport.SubjectInsert, &pb.WriteRequest{Records: []*anypb.Any{want(w)}}, new(pb.WriteResponse))
		}},
		{"nats-json", func(w int) {
			natsJSON.mustCall(natstransport.SubjectInsert, &pb.WriteRequest{Records: []*anypb.Any{want(w)}}, new(pb.WriteResponse))
		}},
	}
	query := func(w int) *pb.Query {
		return &pb.Query{Type: "shop.Order", Where: mustParse(t, fmt.Sprintf("user_id = %d", w))}
	}
	readers := []struct {
		name string
		read func(w int) []byte
	}{
		{"grpc", func(w int) []byte {
			resp, err := ts.C.API().Query(context.Background(), &pb.QueryRequest{Query: query(w)})
			if err != nil || len(resp.Records) != 1 {
				t.Fatalf("grpc query: %v %v", resp, err)
			}
			return resp.Records[0].Value
		}},
		{"rest", func(w int) []byte {
			var resp pb.QueryResponse
			js := fmt.Sprintf(`{"query": {"type": "shop.Order", "where": {"cmp": {"field": "user_id", "op": "OP_EQ", "value": {"int": "%d"}}}}}`, w)
			rest[w%2].mustPost("/v1/query", js, &resp)
			if len(resp.Records) != 1 {
				t.Fatalf("rest query: %v", &resp)
			}
			return resp.Records[0].Value
		}},
		{"nats-get", func(w int) []byte {
			var rec anypb.Any
			natsPB.mustCall(natstransport.SubjectGet, want(w), &rec)
			return rec.Value
		}},
		{"nats-json-get", func(w int) []byte {
			var rec anypb.Any
			natsJSON.mustCall(natstransport.SubjectGet, want(w), &rec)
			return rec.Value
		}},
		{"nats-query", func(w int) []byte {
			var resp pb.QueryResponse
			natsPB.mustCall(natstransport.SubjectQuery, &pb.QueryRequest{Query: query(w)}, &resp)
			if len(resp.Records) != 1 {
				t.Fatalf("nats query: %v", &resp)
			}
			return resp.Records[0].Value
		}},
	}
	for w, wr := range writers {
		wr.write(w)
		for _, rd := range readers {
			if got := rd.read(w); !bytes.Equal(got, want(w).Value) {
				t.Errorf("written over %s, read over %s:\n got %x\nwant %x", wr.name, rd.name, got, want(w).Value)
			}
		}
	}
}
