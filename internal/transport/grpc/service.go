// Package grpc adapts the engine to the gRPC API (protobase.v1.Protobase).
// It owns nothing but the mapping of streams onto engine calls: every rule
// comes from internal/engine and every error code from internal/apierror.
package grpc

import (
	"context"
	"errors"
	"io"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"

	pb "github.com/protobase/protobase/gen/protobase/v1"
	"github.com/protobase/protobase/internal/apierror"
	"github.com/protobase/protobase/internal/engine"
)

// Service implements pb.ProtobaseServer on an engine.
type Service struct {
	pb.UnimplementedProtobaseServer
	e *engine.Engine
}

var _ pb.ProtobaseServer = (*Service)(nil)

// New returns the service for e.
func New(e *engine.Engine) *Service { return &Service{e: e} }

// Register registers the service on gs.
func (s *Service) Register(gs *grpc.Server) { pb.RegisterProtobaseServer(gs, s) }

func toStatus(err error) error { return apierror.Status(err).Err() }

// ApplySchema implements pb.ProtobaseServer.
func (s *Service) ApplySchema(ctx context.Context, req *pb.ApplySchemaRequest) (*pb.ApplySchemaResponse, error) {
	resp, err := s.e.ApplySchema(ctx, req)
	if err != nil {
		return nil, toStatus(err)
	}
	return resp, nil
}

// GetSchema implements pb.ProtobaseServer.
func (s *Service) GetSchema(ctx context.Context, req *pb.GetSchemaRequest) (*pb.GetSchemaResponse, error) {
	resp, err := s.e.GetSchema(ctx)
	if err != nil {
		return nil, toStatus(err)
	}
	return resp, nil
}

// Insert implements pb.ProtobaseServer.
func (s *Service) Insert(st grpc.ClientStreamingServer[pb.WriteRequest, pb.WriteResponse]) error {
	return s.writeStream(st, engine.OpInsert)
}

// Update implements pb.ProtobaseServer.
func (s *Service) Update(st grpc.ClientStreamingServer[pb.WriteRequest, pb.WriteResponse]) error {
	return s.writeStream(st, engine.OpUpdate)
}

// Upsert implements pb.ProtobaseServer.
func (s *Service) Upsert(st grpc.ClientStreamingServer[pb.WriteRequest, pb.WriteResponse]) error {
	return s.writeStream(st, engine.OpUpsert)
}

// Remove implements pb.ProtobaseServer.
func (s *Service) Remove(st grpc.ClientStreamingServer[pb.WriteRequest, pb.WriteResponse]) error {
	return s.writeStream(st, engine.OpRemove)
}

// writeStream applies each received batch in order. OK is sent only after
// every batch is durable; on a failed batch, the batches before it are made
// durable first, so the counts in the error are true.
//
// The REST gateway calls the write methods with an HTTP-backed stream whose
// RecvMsg decodes newline-delimited JSON, so this loop is the one code path
// for write streams on both transports.
func (s *Service) writeStream(st grpc.ClientStreamingServer[pb.WriteRequest, pb.WriteResponse], op engine.Op) error {
	ctx := st.Context()
	w := s.e.NewWriter()
	defer w.Close()
	req := new(pb.WriteRequest)
	for {
		req.Reset()
		if err := st.RecvMsg(req); err != nil {
			if errors.Is(err, io.EOF) {
				pos, err := w.Sync()
				if err != nil {
					return toStatus(err)
				}
				return st.SendAndClose(&pb.WriteResponse{Batches: w.Batches(), Records: w.Records(), Position: pos})
			}
			// The next batch never arrived whole (too large, cancelled,
			// undecodable): report it as that batch's error with the
			// durable counts of the ones before it.
			return toStatus(w.Abort(err))
		}
		if err := w.Apply(ctx, op, req.Records); err != nil {
			if _, serr := w.Sync(); serr != nil {
				return toStatus(serr)
			}
			return toStatus(err)
		}
	}
}

// Write implements pb.ProtobaseServer: batches with per-batch operations and
// optional acknowledgements, each sent once its batch is durable.
func (s *Service) Write(st grpc.BidiStreamingServer[pb.WriteStreamRequest, pb.WriteStreamResponse]) error {
	ctx := st.Context()
	w := s.e.NewWriter()
	defer w.Close()
	req := new(pb.WriteStreamRequest)
	resp := new(pb.WriteStreamResponse)
	for {
		req.Reset()
		if err := st.RecvMsg(req); err != nil {
			if errors.Is(err, io.EOF) {
				_, err := w.Sync()
				return toStatus(err)
			}
			return toStatus(w.Abort(err))
		}
		op, ok := engine.OpFromProto(req.Op)
		if !ok {
			// Abort makes the earlier batches durable and names this one,
			// with their counts, like any other failed batch.
			return toStatus(w.Abort(apierror.Errorf(codes.InvalidArgument, "op %v is not a write operation", req.Op)))
		}
		if err := w.Apply(ctx, op, req.Records); err != nil {
			if _, serr := w.Sync(); serr != nil {
				return toStatus(serr)
			}
			return toStatus(err)
		}
		if req.Ack {
			pos, err := w.Sync()
			if err != nil {
				return toStatus(err)
			}
			resp.Batch = w.Batches() - 1
			resp.Records = w.Records()
			resp.Position = pos
			if err := st.Send(resp); err != nil {
				return err
			}
		}
	}
}
