package server_test

import (
	"context"
	"errors"
	"io"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	pb "github.com/protobase/protobase/gen/protobase/v1"
	"github.com/protobase/protobase/server"
	"github.com/protobase/protobase/server/servertest"
)

// rawCodec sends a *[]byte as the message bytes, unchecked, and decodes
// replies as protobuf: a client that can send what generated code cannot.
type rawCodec struct{}

func (rawCodec) Name() string { return "proto" }

func (rawCodec) Marshal(v any) (mem.BufferSlice, error) {
	if b, ok := v.(*[]byte); ok {
		return mem.BufferSlice{mem.SliceBuffer(*b)}, nil
	}
	b, err := proto.Marshal(v.(proto.Message))
	return mem.BufferSlice{mem.SliceBuffer(b)}, err
}

func (rawCodec) Unmarshal(data mem.BufferSlice, v any) error {
	return proto.Unmarshal(data.Materialize(), v.(proto.Message))
}

// rawStream opens a stream of method sending raw bytes.
func rawStream(ctx context.Context, t *testing.T, ts *testServer, method string) grpc.ClientStream {
	t.Helper()
	st, err := ts.C.Conn().NewStream(ctx, &grpc.StreamDesc{ClientStreams: true, ServerStreams: true},
		"/protobase.v1.Protobase/"+method, grpc.ForceCodecV2(rawCodec{}))
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// deepWhere is a Query whose filter nests NOTs deeper than protobuf's
// decode limit (10,000).
func deepWhere() []byte {
	inner := protowire.AppendBytes(protowire.AppendTag(nil, 1, protowire.BytesType), nil) // cmp {}
	for range 10_001 {
		inner = protowire.AppendBytes(protowire.AppendTag(nil, 4, protowire.BytesType), inner) // not
	}
	q := protowire.AppendString(protowire.AppendTag(nil, 1, protowire.BytesType), "shop.User")
	return protowire.AppendBytes(protowire.AppendTag(q, 2, protowire.BytesType), inner)
}

// A request message that does not decode is the client's error:
// INVALID_ARGUMENT, after the answers to the requests before it.
func TestMalformedSearchRequest(t *testing.T) {
	ts := startServer(t, server.Config{})
	ts.MustApply(map[string]string{"shop.proto": shopProto})
	badType := protowire.AppendBytes(protowire.AppendTag(nil, 1, protowire.BytesType), []byte{0xff, 0xfe})
	cases := map[string][]byte{"invalid UTF-8 in type": badType, "nested too deep": deepWhere()}
	for name, query := range cases {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			st := rawStream(ctx, t, ts, "Search")
			good, _ := proto.Marshal(&pb.SearchRequest{Queries: []*pb.Query{{Type: "shop.User"}}})
			bad := protowire.AppendBytes(protowire.AppendTag(nil, 1, protowire.BytesType), query)
			for _, m := range [][]byte{good, bad} {
				if err := st.SendMsg(&m); err != nil && !errors.Is(err, io.EOF) {
					t.Fatal(err)
				}
			}
			done := false
			for {
				resp := new(pb.SearchResponse)
				err := st.RecvMsg(resp)
				if err != nil {
					if s := status.Convert(err); s.Code() != codes.InvalidArgument {
						t.Fatalf("stream ended with %v: %v, want INVALID_ARGUMENT", s.Code(), s.Message())
					}
					break
				}
				done = done || len(resp.Done) > 0
			}
			if !done {
				t.Fatal("the query before the malformed request was not answered")
			}
		})
	}
}

// On a write stream, the error of a batch that does not decode keeps its
// WriteError: the batch it names and the counts applied before it.
func TestMalformedWriteRequest(t *testing.T) {
	ts := startServer(t, server.Config{})
	ts.MustApply(map[string]string{"shop.proto": shopProto})
	for _, method := range []string{"Insert", "Write"} {
		t.Run(method, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			st := rawStream(ctx, t, ts, method)
			rec := ts.Rec("shop.User", `{"id": 1, "email": "`+method+`@x"}`)
			if method == "Write" {
				rec = ts.Rec("shop.User", `{"id": 2, "email": "`+method+`@x"}`)
			}
			var good []byte
			if method == "Insert" {
				good, _ = proto.Marshal(&pb.WriteRequest{Records: []*anypb.Any{rec}})
			} else {
				good, _ = proto.Marshal(&pb.WriteStreamRequest{Op: pb.WriteOp_WRITE_OP_INSERT, Records: []*anypb.Any{rec}})
			}
			// records[0] = Any{type_url: invalid UTF-8}; field 1 in both.
			anyBad := protowire.AppendBytes(protowire.AppendTag(nil, 1, protowire.BytesType), []byte{0xc3})
			bad := protowire.AppendBytes(protowire.AppendTag(nil, 1, protowire.BytesType), anyBad)
			if method == "Write" {
				bad = protowire.AppendBytes(protowire.AppendTag(nil, 2, protowire.BytesType), anyBad)
				bad = protowire.AppendVarint(protowire.AppendTag(bad, 1, protowire.VarintType), uint64(pb.WriteOp_WRITE_OP_INSERT))
			}
			for _, m := range [][]byte{good, bad} {
				if err := st.SendMsg(&m); err != nil && !errors.Is(err, io.EOF) {
					t.Fatal(err)
				}
			}
			_ = st.CloseSend()
			var err error
			for err == nil {
				err = st.RecvMsg(new(pb.WriteResponse))
			}
			we := servertest.WriteErr(t, err, codes.InvalidArgument)
			if we.Batch != 1 || we.RecordsApplied != 1 {
				t.Fatalf("WriteError %v, want batch 1 after 1 applied record", we)
			}
		})
	}
}

// Unary and server-streaming requests are decoded by gRPC before any of
// our code runs; a malformed one is still INVALID_ARGUMENT, not INTERNAL,
// and the server answers the next well-formed request as before.
func TestMalformedUnaryAndScanRequest(t *testing.T) {
	ts := startServer(t, server.Config{})
	ts.MustApply(map[string]string{"shop.proto": shopProto})
	badUTF8 := protowire.AppendBytes(protowire.AppendTag(nil, 1, protowire.BytesType), []byte{0xff, 0xfe})
	query := append(protowire.AppendTag(nil, 1, protowire.BytesType), protowire.AppendVarint(nil, uint64(len(deepWhere())))...)
	query = append(query, deepWhere()...) // QueryRequest.query = a Query nested too deep
	cases := []struct {
		method string
		stream bool
		msg    []byte
	}{
		{"Query", false, query},
		{"Query", false, protowire.AppendBytes(protowire.AppendTag(nil, 1, protowire.BytesType), badUTF8)},
		{"GetSchema", false, []byte{0x0a, 0x05, 'a'}}, // a field 5 bytes long, 1 sent
		{"Get", false, badUTF8}, // GetRequest.type
		{"Get", false, protowire.AppendBytes(protowire.AppendTag(nil, 2, protowire.BytesType),
			protowire.AppendBytes(protowire.AppendTag(nil, 3, protowire.BytesType), []byte{0xc3}))}, // a string key of invalid UTF-8
		{"Get", false, []byte{0x12, 0x09, 0x11, 0, 0}}, // a number key cut short
		{"Scan", true, query},
		{"Scan", true, protowire.AppendBytes(protowire.AppendTag(nil, 1, protowire.BytesType), badUTF8)},
		{"Watch", true, badUTF8}, // WatchRequest.types
		{"Watch", true, protowire.AppendBytes(protowire.AppendTag(nil, 2, protowire.BytesType), deepWhere()[len(protowire.AppendString(protowire.AppendTag(nil, 1, protowire.BytesType), "shop.User"))+3:])},
	}
	for i, c := range cases {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		var err error
		if c.stream {
			st, serr := ts.C.Conn().NewStream(ctx, &grpc.StreamDesc{ServerStreams: true},
				"/protobase.v1.Protobase/"+c.method, grpc.ForceCodecV2(rawCodec{}))
			if serr != nil {
				t.Fatal(serr)
			}
			if err = st.SendMsg(&c.msg); err == nil {
				_ = st.CloseSend()
				for err == nil {
					err = st.RecvMsg(new(pb.ScanResponse))
				}
			}
		} else {
			err = ts.C.Conn().Invoke(ctx, "/protobase.v1.Protobase/"+c.method, &c.msg, new(pb.QueryResponse), grpc.ForceCodecV2(rawCodec{}))
		}
		cancel()
		if status.Code(err) != codes.InvalidArgument {
			t.Errorf("case %d (%s): %v, want InvalidArgument", i, c.method, err)
		}
	}
	// The server still answers, and the codec kept nothing for the calls.
	if _, err := ts.C.Query(context.Background(), &pb.Query{Type: "shop.User"}, 10, ""); err != nil {
		t.Fatalf("a good query after malformed ones: %v", err)
	}
}

// A filter of nothing but empty ORs nested in an OR matches no record.
// Planning it over a type with an index has no branch to choose a
// candidate for: the server answers (no records) and goes on, rather
// than reading a candidate that was never chosen.
func TestEmptyNestedOrFilter(t *testing.T) {
	ts := startServer(t, server.Config{})
	ts.MustApply(map[string]string{"shop.proto": shopProto})
	ts.MustWrite(insert, []*anypb.Any{ts.Rec("shop.User", `{"id": 1, "email": "a@x", "name": "A"}`)})
	emptyOr := &pb.Expr{Expr: &pb.Expr_Or{Or: &pb.ExprList{}}}
	where := &pb.Expr{Expr: &pb.Expr_Or{Or: &pb.ExprList{Exprs: []*pb.Expr{emptyOr, emptyOr}}}}
	q := &pb.Query{Type: "shop.User", Where: where}
	ctx := t.Context()
	resp, err := ts.C.API().Query(ctx, &pb.QueryRequest{Query: q})
	if err != nil {
		t.Fatalf("Query: %v", err)
	}
	if len(resp.Records) != 0 {
		t.Errorf("Query: %d records, want none", len(resp.Records))
	}
	// The server is still there.
	if got := ts.Count("shop.User"); got != 1 {
		t.Errorf("%d records stored, want 1", got)
	}
}
