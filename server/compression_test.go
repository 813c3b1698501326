package server_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/encoding/gzip"
	"google.golang.org/grpc/stats"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/structpb"

	pb "github.com/protobase/protobase/gen/protobase/v1"
	pbgrpc "github.com/protobase/protobase/gen/protobase/v1/protobasev1grpc"
	"github.com/protobase/protobase/server"
)

// payloads records the sizes of the messages a client receives: on the
// wire (compressed, when they came so) and decoded.
type payloads struct {
	mu   sync.Mutex
	seen []*stats.InPayload
}

func (p *payloads) TagRPC(ctx context.Context, _ *stats.RPCTagInfo) context.Context   { return ctx }
func (p *payloads) TagConn(ctx context.Context, _ *stats.ConnTagInfo) context.Context { return ctx }
func (p *payloads) HandleConn(context.Context, stats.ConnStats)                       {}
func (p *payloads) HandleRPC(_ context.Context, s stats.RPCStats) {
	if in, ok := s.(*stats.InPayload); ok && in.Client {
		p.mu.Lock()
		p.seen = append(p.seen, in)
		p.mu.Unlock()
	}
}

// A client that sends its requests gzip-compressed gets answers
// uncompressed (gRPC would answer in the request's compression): a
// compressed answer is a copy that gRPC queues after freeing the
// marshalled one, with the release of its bytes of the result budget
// behind it. Get, Query and Search, each answer on the wire at its size.
func TestCompressedRequestsPlainAnswers(t *testing.T) {
	ts := startServer(t, server.Config{})
	ts.MustApply(map[string]string{"shop.proto": shopProto})
	name := strings.Repeat("n", 10<<10) // compresses to almost nothing
	var recs []*anypb.Any
	for id := 1; id <= 3; id++ {
		recs = append(recs, ts.Rec("shop.User", fmt.Sprintf(`{"id": %d, "name": %q, "email": "u%d@x"}`, id, name, id)))
	}
	ts.MustWrite(pb.WriteOp_WRITE_OP_INSERT, recs)
	seen := &payloads{}
	conn, err := grpc.NewClient(ts.Srv.Addr(), grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithStatsHandler(seen), grpc.WithDefaultCallOptions(grpc.UseCompressor(gzip.Name)))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	api, ctx := pbgrpc.NewProtobaseClient(conn), t.Context()
	if _, err := api.Get(ctx, &pb.GetRequest{Type: "shop.User", Keys: []*structpb.Value{structpb.NewNumberValue(1)}}); err != nil {
		t.Fatal(err)
	}
	if _, err := api.Query(ctx, &pb.QueryRequest{Query: &pb.Query{Type: "shop.User"}}); err != nil {
		t.Fatal(err)
	}
	st, err := api.Search(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Send(&pb.SearchRequest{Queries: []*pb.Query{{Type: "shop.User"}}}); err != nil {
		t.Fatal(err)
	}
	for done := false; !done; {
		resp, err := st.Recv()
		if err != nil {
			t.Fatal(err)
		}
		done = len(resp.Done) > 0
	}
	seen.mu.Lock()
	defer seen.mu.Unlock()
	if len(seen.seen) < 3 {
		t.Fatalf("%d answers seen, want one for each of Get, Query and Search at least", len(seen.seen))
	}
	for _, in := range seen.seen {
		if in.CompressedLength != in.Length {
			t.Fatalf("an answer of %d bytes came compressed to %d", in.Length, in.CompressedLength)
		}
	}
}
