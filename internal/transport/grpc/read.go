package grpc

import (
	"context"

	"google.golang.org/grpc"

	pb "github.com/protobase/protobase/gen/protobase/v1"
)

// Search implements pb.ProtobaseServer.
func (s *Service) Search(st grpc.BidiStreamingServer[pb.SearchRequest, pb.SearchResponse]) error {
	err := s.e.Search(st.Context(), st.Recv, st.Send)
	if err != nil {
		return toStatus(err)
	}
	return nil
}

// Scan implements pb.ProtobaseServer.
func (s *Service) Scan(req *pb.ScanRequest, st grpc.ServerStreamingServer[pb.ScanResponse]) error {
	if err := s.e.Scan(st.Context(), req, st.Send); err != nil {
		return toStatus(err)
	}
	return nil
}

// Query implements pb.ProtobaseServer.
func (s *Service) Query(ctx context.Context, req *pb.QueryRequest) (*pb.QueryResponse, error) {
	resp, err := s.e.Query(ctx, req)
	if err != nil {
		return nil, toStatus(err)
	}
	return resp, nil
}
