package batching

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/experimental"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/status"

	"github.com/protobase/protobase/bench"
	"github.com/protobase/protobase/client"
	pb "github.com/protobase/protobase/gen/protobase/v1"
	"github.com/protobase/protobase/internal/grpcbuf"
	"github.com/protobase/protobase/internal/transport/lab"
)

// The raw series: what a bare grpc-go stream costs, for the transport
// rows to be judged against. rawServer is a grpc.Server with one
// bidirectional method registered by hand (no generated code, no
// interceptors, no metrics) and a codec that hands message bytes through
// untouched. Its handler answers each request with exactly the bytes
// Lab.Echo sends (lab.AppendEcho), and the client is the one the other
// rows use, so raw and transport differ only in the server around the
// stream: Protobase's interceptors, its codec and Echo's handler.

// rawMethod is the raw service's one method.
const rawMethod = "/protobase.lab.v1.Raw/Echo"

var rawDesc = grpc.ServiceDesc{
	ServiceName: "protobase.lab.v1.Raw",
	HandlerType: (*any)(nil),
	Streams: []grpc.StreamDesc{{
		StreamName: "Echo", Handler: rawEcho, ServerStreams: true, ClientStreams: true,
	}},
}

// rawCodec passes grpcbuf.Frame bytes through, copying them into and
// out of pooled buffers as the server's codec does for Lab.Echo.
type rawCodec struct{}

func (rawCodec) Name() string { return "proto" }

func (rawCodec) Marshal(v any) (mem.BufferSlice, error) {
	f, ok := v.(*grpcbuf.Frame)
	if !ok {
		return nil, fmt.Errorf("raw codec cannot marshal %T", v)
	}
	return grpcbuf.MarshalFrame(f), nil
}

func (rawCodec) Unmarshal(data mem.BufferSlice, v any) error {
	f, ok := v.(*grpcbuf.Frame)
	if !ok {
		return fmt.Errorf("raw codec cannot unmarshal into %T", v)
	}
	grpcbuf.UnmarshalFrame(data, f)
	return nil
}

// rawEcho is Lab.Echo on the bare stream.
func rawEcho(_ any, st grpc.ServerStream) error {
	record := lab.CannedRecord()
	var in, out grpcbuf.Frame
	var next uint64
	for {
		if err := st.RecvMsg(&in); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
		n, err := lab.CountQueries(in.B)
		if err != nil {
			return status.Errorf(codes.InvalidArgument, "malformed SearchRequest: %v", err)
		}
		out.B = lab.AppendEcho(out.B[:0], record, next, n)
		next += n
		if err := st.SendMsg(&out); err != nil {
			return err
		}
	}
}

// rawServer is the raw series' server on a loopback port, with the
// transport settings of Protobase's own (windows, buffer pool) and a
// client connected to it as the lab's clients connect.
type rawServer struct {
	gs  *grpc.Server
	cl  *client.Client
	err chan error
}

func startRaw() (*rawServer, error) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("raw server: %w", err)
	}
	gs := grpc.NewServer(
		grpc.InitialWindowSize(4<<20),
		grpc.InitialConnWindowSize(16<<20),
		experimental.BufferPool(grpcbuf.Pool),
		grpc.ForceServerCodecV2(rawCodec{}),
	)
	gs.RegisterService(&rawDesc, nil)
	r := &rawServer{gs: gs, err: make(chan error, 1)}
	go func() { r.err <- gs.Serve(lis) }()
	if r.cl, err = client.Dial(lis.Addr().String(), client.WithDialOptions(bench.DialOptions()...)); err != nil {
		gs.Stop()
		return nil, err
	}
	return r, nil
}

// open opens a raw stream; the lab's call codec sends its frames and
// tallies the answers as on the other rows.
func (r *rawServer) open(ctx context.Context, opts ...grpc.CallOption) (grpc.BidiStreamingClient[pb.SearchRequest, pb.SearchResponse], error) {
	st, err := r.cl.Conn().NewStream(ctx, &rawDesc.Streams[0], rawMethod, opts...)
	if err != nil {
		return nil, err
	}
	return &grpc.GenericClientStream[pb.SearchRequest, pb.SearchResponse]{ClientStream: st}, nil
}

func (r *rawServer) close() error {
	cerr := r.cl.Close()
	r.gs.Stop()
	if err := <-r.err; err != nil && !errors.Is(err, grpc.ErrServerStopped) {
		return err
	}
	return cerr
}
