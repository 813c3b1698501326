// Package client is the public Go client of Protobase: connect, manage the
// schema, write records through an auto-batching Writer, read them with
// Search, Scan, Query pages and Get, follow their changes with Watch, and
// build filters as text (Query.Filter) or with expression helpers (Eq, Lt,
// And, ...). Records may be generated Go types, or dynamic messages and
// JSON built from the server's own schema (Types), so that a program needs
// no generated code.
package client

import (
	"context"
	"errors"
	"fmt"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/experimental"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	pb "github.com/protobase/protobase/gen/protobase/v1"
	pbgrpc "github.com/protobase/protobase/gen/protobase/v1/protobasev1grpc"
	"github.com/protobase/protobase/internal/grpcbuf"
)

// Client is a connection to a Protobase server; safe for concurrent use.
type Client struct {
	conn *grpc.ClientConn
	api  pbgrpc.ProtobaseClient
	tc   typeCache // the server's types, for JSON and dynamic records
}

// Option configures Dial.
type Option func(*dialOptions)

type dialOptions struct {
	grpc   []grpc.DialOption
	apiKey string
}

// WithDialOptions passes extra options to grpc.NewClient (credentials,
// interceptors). Without credentials the connection is plaintext.
func WithDialOptions(opts ...grpc.DialOption) Option {
	return func(o *dialOptions) { o.grpc = append(o.grpc, opts...) }
}

// Dial connects to the server at addr ("host:port"). The connection is
// established lazily, on the first call.
func Dial(addr string, opts ...Option) (*Client, error) {
	var o dialOptions
	for _, f := range opts {
		f(&o)
	}
	dopts := append([]grpc.DialOption{
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		// The codec and StaticMethod (which the generated client adds
		// to each call) as defaults: options given per call make gRPC
		// build two slices on every call (see Client.unary).
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(64<<20), grpc.MaxCallSendMsgSize(64<<20),
			grpc.ForceCodecV2(callCodec{}), grpc.StaticMethod()),
		grpc.WithInitialWindowSize(4 << 20),
		grpc.WithInitialConnWindowSize(16 << 20),
		experimental.WithBufferPool(grpcbuf.Pool),
	}, tlsProbe(addr)...)
	dopts = append(dopts, o.grpc...)
	if o.apiKey != "" {
		dopts = append(dopts, grpc.WithPerRPCCredentials(newAPIKeyCreds(o.apiKey, addr)))
	}
	conn, err := grpc.NewClient(addr, dopts...)
	if err != nil {
		return nil, fmt.Errorf("connect to %s: %w", addr, err)
	}
	return &Client{conn: conn, api: pbgrpc.NewProtobaseClient(conn)}, nil
}

// unary calls a unary method of the generated client's, with no option
// of its own: the defaults Dial sets (StaticMethod among them) apply, and
// gRPC copies no options. The one-operation reads (Get, Query's pages)
// come this way.
func (c *Client) unary(ctx context.Context, method string, req, resp proto.Message) error {
	return c.conn.Invoke(ctx, method, req, resp)
}

// Close closes the connection.
func (c *Client) Close() error { return c.conn.Close() }

// API returns the raw generated client, for calls this package does not wrap.
func (c *Client) API() pbgrpc.ProtobaseClient { return c.api }

// Conn returns the underlying connection. Its calls are marked static
// (grpc.StaticMethod) for stats handlers, as the generated client marks
// its own.
func (c *Client) Conn() *grpc.ClientConn { return c.conn }

// SchemaOptions modify ApplySchema.
type SchemaOptions struct {
	// DryRun plans without changing anything.
	DryRun bool
	// AllowDrop names what may be dropped with its data: record types by
	// full name ("shop.User") and indexes by type and index name
	// ("shop.User.email"). Anything else the new schema no longer declares
	// is refused.
	AllowDrop []string
	// Add makes the files additions: each is added or replaces the file of
	// its name, and every other file the server holds is kept. Without it
	// the files are the whole schema.
	Add bool
	// Remove names files to remove by import path (with Add only).
	Remove []string
}

// ApplySchema makes files (import path -> .proto source) the whole schema,
// or with opts.Add adds them to it.
func (c *Client) ApplySchema(ctx context.Context, files map[string]string, opts SchemaOptions) (*pb.ApplySchemaResponse, error) {
	req := &pb.ApplySchemaRequest{Files: files, DryRun: opts.DryRun, AllowDrop: opts.AllowDrop, RemoveFiles: opts.Remove}
	if opts.Add {
		req.Mode = pb.SchemaMode_SCHEMA_MODE_ADD
	}
	resp, err := c.api.ApplySchema(ctx, req)
	if err != nil {
		return nil, asError(err)
	}
	return resp, nil
}

// GetSchema returns the server's schema.
func (c *Client) GetSchema(ctx context.Context) (*pb.GetSchemaResponse, error) {
	resp, err := c.api.GetSchema(ctx, &pb.GetSchemaRequest{})
	if err != nil {
		return nil, asError(err)
	}
	return resp, nil
}

// Error is a failed call with the server's details. Write names the batch,
// record and field of a failed write, when the server sent them.
type Error struct {
	Status *status.Status
	Write  *pb.WriteError
}

func (e *Error) Error() string { return e.Status.Code().String() + ": " + e.Status.Message() }

// GRPCStatus lets status.FromError and status.Code see the original status.
func (e *Error) GRPCStatus() *status.Status { return e.Status }

// asError wraps a gRPC error as *Error, extracting the write details.
func asError(err error) error {
	if err == nil {
		return nil
	}
	var ce *Error
	var te *TLSServerError
	if errors.As(err, &ce) || errors.As(err, &te) {
		return err
	}
	st, ok := status.FromError(err)
	if !ok {
		return err
	}
	e := &Error{Status: st}
	for _, d := range st.Details() {
		if we, ok := d.(*pb.WriteError); ok {
			e.Write = we
		}
	}
	return e
}
