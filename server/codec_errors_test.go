package server_test

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"

	pb "github.com/protobase/protobase/gen/protobase/v1"
	"github.com/protobase/protobase/server"
)

// A request over the query limit is INVALID_ARGUMENT naming the message
// by its protobuf name and the limit, and is not called malformed; a
// request that does not decode is named by its protobuf name too. No Go
// type name reaches a client.
func TestDecodeErrorsNameProtobufMessages(t *testing.T) {
	ts := startServer(t, server.Config{MaxSearchQueries: 10})
	ts.MustApply(map[string]string{"shop.proto": shopProto})
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()

	st, err := ts.C.API().Search(ctx)
	if err != nil {
		t.Fatal(err)
	}
	qs := make([]*pb.Query, 11)
	for i := range qs {
		qs[i] = &pb.Query{Type: "shop.User"}
	}
	_ = st.Send(&pb.SearchRequest{Queries: qs})
	for err == nil {
		_, err = st.Recv()
	}
	const over = "protobase.v1.SearchRequest: 11 queries in one request, more than the server's limit of 10 (max search queries)"
	if s := status.Convert(err); s.Code() != codes.InvalidArgument || !strings.Contains(s.Message(), over) || strings.Contains(s.Message(), "malformed") {
		t.Errorf("Search over the limit: %v, want INVALID_ARGUMENT %q", err, over)
	}

	badUTF8 := protowire.AppendBytes(protowire.AppendTag(nil, 1, protowire.BytesType), []byte{0xff, 0xfe})
	bad := protowire.AppendBytes(protowire.AppendTag(nil, 1, protowire.BytesType), badUTF8) // a query whose type is not UTF-8
	raw := rawStream(ctx, t, ts, "Search")
	if err := raw.SendMsg(&bad); err != nil && !errors.Is(err, io.EOF) {
		t.Fatal(err)
	}
	for err = nil; err == nil; {
		err = raw.RecvMsg(new(pb.SearchResponse))
	}
	checkMalformed(t, "Search", err, "malformed protobase.v1.SearchRequest: ")

	err = ts.C.Conn().Invoke(ctx, "/protobase.v1.Protobase/Query", &bad, new(pb.QueryResponse), grpc.ForceCodecV2(rawCodec{}))
	checkMalformed(t, "Query", err, "malformed protobase.v1.QueryRequest: ")

	wst := rawStream(ctx, t, ts, "Insert")
	if err := wst.SendMsg(&bad); err != nil && !errors.Is(err, io.EOF) {
		t.Fatal(err)
	}
	_ = wst.CloseSend()
	for err = nil; err == nil; {
		err = wst.RecvMsg(new(pb.WriteResponse))
	}
	checkMalformed(t, "Insert", err, "malformed protobase.v1.WriteRequest: ")
}

// checkMalformed fails unless err is INVALID_ARGUMENT starting its
// message with want and naming no Go type.
func checkMalformed(t *testing.T, call string, err error, want string) {
	t.Helper()
	s := status.Convert(err)
	if s.Code() != codes.InvalidArgument || !strings.Contains(s.Message(), want) || strings.Contains(s.Message(), "*") {
		t.Errorf("%s with a malformed request: %v, want INVALID_ARGUMENT %q and no Go type", call, err, want)
	}
}
