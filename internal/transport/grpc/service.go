// Package grpc adapts the engine to the gRPC API (protobase.v1.Protobase).
// It owns nothing but the mapping of streams onto engine calls: every rule
// comes from internal/engine, every error code from internal/apierror, and
// every access rule from internal/auth, which the service applies per call,
// per batch and per query (auth.go, read.go) so that the REST gateway,
// calling the same methods in process, enforces the same rules.
package grpc

import (
	"context"
	"log/slog"
	"sync/atomic"

	"google.golang.org/grpc"

	pb "github.com/protobase/protobase/gen/protobase/v1"
	pbgrpc "github.com/protobase/protobase/gen/protobase/v1/protobasev1grpc"
	"github.com/protobase/protobase/internal/apistatus"
	"github.com/protobase/protobase/internal/auth"
	"github.com/protobase/protobase/internal/engine"
	"github.com/protobase/protobase/internal/watch"
)

// Options configure a Service.
type Options struct {
	// Keys holds the API keys; required for the key-management methods.
	Keys *auth.Keyring
	// Auth requires an authenticated caller (an auth.Identity in the
	// context, see UnaryInterceptor) on every method, with the role the
	// method needs and the record types in its scope.
	Auth bool
	// Logger receives the audit lines of schema changes; nil discards.
	Logger *slog.Logger
	// MaxSearchQueries, when positive, caps the queries of one
	// SearchRequest for every caller of Search, the in-process REST
	// gateway included (the gRPC Codec refuses such a request earlier,
	// before decoding it).
	MaxSearchQueries int
	// BackupScratch is where Backup takes its copy: a directory on the
	// store's file system (the data directory). Empty: no backups.
	BackupScratch string
	// Watches serves Watch (nil: a service of its own on the engine,
	// with watch's defaults); the server keeps it to stop the watches
	// first when it shuts down.
	Watches *watch.Service
}

// Service implements pbgrpc.ProtobaseServer on an engine.
type Service struct {
	pbgrpc.UnimplementedProtobaseServer
	e    *engine.Engine
	opts Options
	log  *slog.Logger
	// backups counts the Backup calls copying the store now.
	backups atomic.Int64
}

// BackupsRunning returns how many Backup calls are copying the store.
func (s *Service) BackupsRunning() int64 { return s.backups.Load() }

var _ pbgrpc.ProtobaseServer = (*Service)(nil)

// New returns the service for e.
func New(e *engine.Engine, opts Options) *Service {
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if opts.Watches == nil {
		opts.Watches = watch.New(e, watch.Options{})
	}
	return &Service{e: e, opts: opts, log: log}
}

// require checks the caller of a method that needs role need; with auth
// off it returns a nil identity, which allows everything.
func (s *Service) require(ctx context.Context, need auth.Role) (*auth.Identity, error) {
	id, err := auth.Require(ctx, s.opts.Auth, need)
	if err != nil {
		return nil, toStatus(err)
	}
	return id, nil
}

// Register registers the service on gs.
func (s *Service) Register(gs *grpc.Server) { pbgrpc.RegisterProtobaseServer(gs, s) }

func toStatus(err error) error { return apistatus.Status(err).Err() }

// abortReceive ends a write stream whose next request did not arrive
// whole (too large, cancelled, undecodable) as that batch's error, with
// the durable counts of the ones before it. The receive error, a gRPC
// status, is brought into the error vocabulary before the engine sees it.
func abortReceive(w *engine.Writer, err error) error {
	return toStatus(w.Abort(apistatus.Error(err)))
}

// ApplySchema implements pbgrpc.ProtobaseServer.
//
// A scoped key's change is refused whole when its plan, the one that
// commits, would touch a record type outside the scope.
func (s *Service) ApplySchema(ctx context.Context, req *pb.ApplySchemaRequest) (*pb.ApplySchemaResponse, error) {
	id, err := s.require(ctx, auth.RoleSchema)
	if err != nil {
		return nil, err
	}
	resp, err := s.e.ApplySchemaApproved(ctx, req, id.ApprovePlan)
	if err != nil {
		return nil, toStatus(auth.CheckPlanError(id, err))
	}
	if resp.Applied {
		p := resp.Plan
		s.log.Info("audit: schema applied", "by", id.ActorName(), "version", resp.Version,
			"types_added", p.GetTypesAdded(), "types_changed", len(p.GetTypesChanged()), "types_dropped", len(p.GetTypesDropped()))
	}
	return resp, nil
}

// GetSchema implements pbgrpc.ProtobaseServer.
// A scoped key sees only its types (auth.FilterSchema).
func (s *Service) GetSchema(ctx context.Context, req *pb.GetSchemaRequest) (*pb.GetSchemaResponse, error) {
	id, err := s.require(ctx, auth.RoleRead)
	if err != nil {
		return nil, err
	}
	resp, err := s.e.GetSchema(ctx)
	if err != nil {
		return nil, toStatus(err)
	}
	return auth.FilterSchema(id, resp), nil
}

// Insert implements pbgrpc.ProtobaseServer.
func (s *Service) Insert(st grpc.ClientStreamingServer[pb.WriteRequest, pb.WriteResponse]) error {
	return s.writeStream(st, engine.OpInsert)
}

// Update implements pbgrpc.ProtobaseServer.
func (s *Service) Update(st grpc.ClientStreamingServer[pb.WriteRequest, pb.WriteResponse]) error {
	return s.writeStream(st, engine.OpUpdate)
}

// Upsert implements pbgrpc.ProtobaseServer.
func (s *Service) Upsert(st grpc.ClientStreamingServer[pb.WriteRequest, pb.WriteResponse]) error {
	return s.writeStream(st, engine.OpUpsert)
}

// Remove implements pbgrpc.ProtobaseServer.
func (s *Service) Remove(st grpc.ClientStreamingServer[pb.WriteRequest, pb.WriteResponse]) error {
	return s.writeStream(st, engine.OpRemove)
}
