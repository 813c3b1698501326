package grpc

import (
	"context"

	pb "github.com/protobase/protobase/gen/protobase/v1"
	"github.com/protobase/protobase/internal/auth"
)

// CreateKey implements pbgrpc.ProtobaseServer (admin only).
func (s *Service) CreateKey(ctx context.Context, req *pb.CreateKeyRequest) (*pb.CreateKeyResponse, error) {
	id, err := s.require(ctx, auth.RoleAdmin)
	if err != nil {
		return nil, err
	}
	resp, err := auth.CreateKey(s.opts.Keys, id, req)
	return resp, toStatusOrNil(err)
}

// ListKeys implements pbgrpc.ProtobaseServer (admin only).
func (s *Service) ListKeys(ctx context.Context, _ *pb.ListKeysRequest) (*pb.ListKeysResponse, error) {
	id, err := s.require(ctx, auth.RoleAdmin)
	if err != nil {
		return nil, err
	}
	resp, err := auth.ListKeys(s.opts.Keys, id)
	return resp, toStatusOrNil(err)
}

// RevokeKey implements pbgrpc.ProtobaseServer (admin only).
func (s *Service) RevokeKey(ctx context.Context, req *pb.RevokeKeyRequest) (*pb.RevokeKeyResponse, error) {
	id, err := s.require(ctx, auth.RoleAdmin)
	if err != nil {
		return nil, err
	}
	resp, err := auth.RevokeKey(s.opts.Keys, id, req)
	return resp, toStatusOrNil(err)
}

func toStatusOrNil(err error) error {
	if err == nil {
		return nil
	}
	return toStatus(err)
}
