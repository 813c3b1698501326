// Package lab adapts the engine to the lab API (protobase.lab.v1.Lab), the
// server's side of the benchmark lab: an echo that answers searches without
// touching storage (what gRPC alone costs), a sink that runs searches
// through the engine and sends nothing back (the no-response pattern), and
// the engine's counters (so an experiment can check that the server really
// did the work it claims to measure). Servers register it only when
// server.Config.Lab is set; it is not part of the public API.
package lab

import (
	"context"
	"errors"
	"io"
	"sync/atomic"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/encoding/protowire"

	labv1 "github.com/protobase/protobase/gen/protobase/lab/v1"
	pb "github.com/protobase/protobase/gen/protobase/v1"
	"github.com/protobase/protobase/internal/apierror"
	"github.com/protobase/protobase/internal/apistatus"
	"github.com/protobase/protobase/internal/engine"
	"github.com/protobase/protobase/internal/grpcbuf"
)

// CannedRecordBytes is the size of the record Echo returns for each query:
// about what the lab's data sets store per record, so that echo payloads
// weigh what real lookup results weigh.
const CannedRecordBytes = 100

// cannedTypeURL is the type URL of Echo's canned record.
const cannedTypeURL = "type.googleapis.com/protobase.lab.v1.Canned"

// EchoBatch is the most queries one Echo response answers: a request of
// more is answered in several responses, as Search cuts its results at
// 1,000 records, so that a response stays within about 170 KB whatever
// the request.
const EchoBatch = 1000

// Service implements labv1.LabServer on an engine.
type Service struct {
	labv1.UnimplementedLabServer
	e          *engine.Engine
	sync       bool
	maxQueries uint64
}

var _ labv1.LabServer = (*Service)(nil)

// New returns the lab service over e; sync is reported by Stats (whether
// the server fsyncs writes before acknowledging them). maxQueries, when
// positive, caps the queries of one Echo request, as it caps Search's.
func New(e *engine.Engine, sync bool, maxQueries int) *Service {
	return &Service{e: e, sync: sync, maxQueries: uint64(max(maxQueries, 0))}
}

// Register registers the service on s.
func (s *Service) Register(r grpc.ServiceRegistrar) { labv1.RegisterLabServer(r, s) }

// Echo implements labv1.LabServer. It answers every request with a
// ResultBatch holding the canned record and a QueryDone for each query,
// ids counted as Search counts them (ordinals on the stream), in one
// response per EchoBatch queries (one response for a request of none). A
// request of more queries than the server's limit ends the stream with
// INVALID_ARGUMENT, as on Search.
//
// Echo does the least a server could: it receives each request as bytes
// (a grpcbuf.Frame, which the server's codec passes through), counts its
// queries with protowire instead of decoding them, and encodes its
// response straight into a reused buffer (the bytes on the wire are an
// ordinary SearchResponse). An echo that decoded queries and built
// messages would measure protobuf and the allocator rather than the
// transport, which is what the seed's harness isolated. (It used to pass
// the bytes as the unknown fields of an empty message: protobuf then
// parsed each query as an unknown field and the default buffer pool
// zeroed every response, which held Echo to half of a bare grpc-go
// stream's rate.)
func (s *Service) Echo(st grpc.BidiStreamingServer[pb.SearchRequest, pb.SearchResponse]) error {
	record := CannedRecord()
	var in, out grpcbuf.Frame
	var next uint64
	for {
		if err := st.RecvMsg(&in); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
		n, err := CountQueries(in.B)
		if err != nil {
			return toStatus(apierror.Errorf(apierror.InvalidArgument, "malformed SearchRequest: %w", err))
		}
		if s.maxQueries > 0 && n > s.maxQueries {
			return toStatus(apierror.Errorf(apierror.InvalidArgument,
				"%d queries in one request, more than the server's limit of %d (max search queries)", n, s.maxQueries))
		}
		for left := n; ; {
			k := min(left, EchoBatch)
			out.B = AppendEcho(out.B[:0], record, next, k)
			next, left = next+k, left-k
			// SendMsg encodes (copies) out before returning, so its
			// buffer is free to reuse.
			if err := st.SendMsg(&out); err != nil {
				return err
			}
			if left == 0 {
				break
			}
		}
	}
}

// CannedRecord is the encoded Any Echo returns for every query.
func CannedRecord() []byte {
	var b []byte
	b = protowire.AppendTag(b, 1, protowire.BytesType)
	b = protowire.AppendString(b, cannedTypeURL)
	b = protowire.AppendTag(b, 2, protowire.BytesType)
	b = protowire.AppendBytes(b, make([]byte, CannedRecordBytes))
	return b
}

// CountQueries counts the queries (field 1) of an encoded SearchRequest.
func CountQueries(b []byte) (uint64, error) {
	var n uint64
	for len(b) > 0 {
		num, typ, m := protowire.ConsumeTag(b)
		if m < 0 {
			return 0, protowire.ParseError(m)
		}
		b = b[m:]
		m = protowire.ConsumeFieldValue(num, typ, b)
		if m < 0 {
			return 0, protowire.ParseError(m)
		}
		b = b[m:]
		if num == 1 {
			n++
		}
	}
	return n, nil
}

// AppendEcho appends the SearchResponse answering queries first..first+n-1:
// a ResultBatch{query, records: [record]} and a QueryDone{query, count: 1}
// for each.
func AppendEcho(b, record []byte, first, n uint64) []byte {
	for id := first; id < first+n; id++ {
		// results = 1: ResultBatch{query = 1, records = 2}
		size := protowire.SizeTag(1) + protowire.SizeVarint(id) + protowire.SizeTag(2) + protowire.SizeBytes(len(record))
		b = protowire.AppendTag(b, 1, protowire.BytesType)
		b = protowire.AppendVarint(b, uint64(size))
		b = protowire.AppendTag(b, 1, protowire.VarintType)
		b = protowire.AppendVarint(b, id)
		b = protowire.AppendTag(b, 2, protowire.BytesType)
		b = protowire.AppendBytes(b, record)
	}
	for id := first; id < first+n; id++ {
		// done = 2: QueryDone{query = 1, count = 2}
		size := protowire.SizeTag(1) + protowire.SizeVarint(id) + protowire.SizeTag(2) + protowire.SizeVarint(1)
		b = protowire.AppendTag(b, 2, protowire.BytesType)
		b = protowire.AppendVarint(b, uint64(size))
		b = protowire.AppendTag(b, 1, protowire.VarintType)
		b = protowire.AppendVarint(b, id)
		b = protowire.AppendTag(b, 2, protowire.VarintType)
		b = protowire.AppendVarint(b, 1)
	}
	return b
}

// Sink implements labv1.LabServer: the engine's Search, with every response
// counted and dropped instead of sent. Nothing travels back until the
// client closes its side; then one SinkSummary does.
func (s *Service) Sink(st grpc.ClientStreamingServer[pb.SearchRequest, labv1.SinkSummary]) error {
	// The engine calls drop from one goroutine at a time, but requests are
	// counted on the receiving one: atomics keep the two apart.
	var requests, queries, records, errs, dropped atomic.Uint64
	recv := func() (*pb.SearchRequest, error) {
		req, err := st.Recv()
		if err == nil {
			requests.Add(1)
		}
		return req, err
	}
	drop := func(resp *pb.SearchResponse) error {
		dropped.Add(1)
		queries.Add(uint64(len(resp.Done) + len(resp.Errors)))
		errs.Add(uint64(len(resp.Errors)))
		for _, b := range resp.Results {
			records.Add(uint64(len(b.Records)))
		}
		return nil
	}
	if err := s.e.Search(st.Context(), recv, drop); err != nil {
		return toStatus(err)
	}
	return st.SendAndClose(&labv1.SinkSummary{
		Requests:         requests.Load(),
		Queries:          queries.Load(),
		Records:          records.Load(),
		Errors:           errs.Load(),
		ResponsesDropped: dropped.Load(),
	})
}

// Stats implements labv1.LabServer.
func (s *Service) Stats(context.Context, *labv1.StatsRequest) (*labv1.StatsResponse, error) {
	st := s.e.Stats()
	return &labv1.StatsResponse{
		Batches:      st.Batches.Load(),
		Records:      st.Records.Load(),
		WriteErrors:  st.WriteErrors.Load(),
		Queries:      st.Queries.Load(),
		QueryErrors:  st.QueryErrors.Load(),
		PointLookups: st.PointLookups.Load(),
		RecordsRead:  st.RecordsRead.Load(),
		Sync:         s.sync,
	}, nil
}

// toStatus maps an engine error to a gRPC status, as the public service
// does.
func toStatus(err error) error { return apistatus.Status(err).Err() }
