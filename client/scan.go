package client

import (
	"context"
	"errors"
	"io"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	pb "github.com/protobase/protobase/gen/protobase/v1"
	pbgrpc "github.com/protobase/protobase/gen/protobase/v1/protobasev1grpc"
)

// ScanOptions tune Scan. Zero values pick the server's defaults.
type ScanOptions struct {
	// Parallelism is the number of concurrent readers on the server.
	Parallelism uint32
	// BatchSize is the number of records per response.
	BatchSize uint32
}

// Scanner iterates over every match of one query:
//
//	sc := c.Scan(ctx, q, client.ScanOptions{Parallelism: 4})
//	for sc.Next() { use(sc.Record()) }
//	if err := sc.Err(); err != nil { ... }
type Scanner struct {
	stream grpc.ServerStreamingClient[pb.ScanResponse]
	cancel context.CancelFunc
	cur    []*anypb.Any
	rec    *anypb.Any
	// curVer and ver are cur's and rec's versions (Query.versions).
	curVer []uint64
	ver    uint64
	err    error
	count  uint64
	plan   *pb.Plan
	done   bool
}

// Scan starts a server-streaming scan of q.
func (c *Client) Scan(ctx context.Context, q *pb.Query, opts ScanOptions) *Scanner {
	ctx, cancel := context.WithCancel(ctx)
	st, err := c.api.Scan(ctx, &pb.ScanRequest{Query: q, Parallelism: opts.Parallelism, BatchSize: opts.BatchSize})
	return &Scanner{stream: st, cancel: cancel, err: asError(err)}
}

// Next advances to the next record.
func (s *Scanner) Next() bool {
	for len(s.cur) == 0 {
		if s.err != nil || s.done {
			s.cancel()
			return false
		}
		resp, err := s.stream.Recv()
		if err != nil {
			if !errors.Is(err, io.EOF) {
				s.err = asError(err)
			} else if !s.done {
				s.err = errors.New("scan ended without its final message")
			}
			s.cancel()
			return false
		}
		if resp.Plan != nil {
			s.plan = resp.Plan
		}
		if resp.Done {
			s.done, s.count = true, resp.Count
		}
		s.cur, s.curVer = resp.Records, resp.Versions
	}
	s.rec, s.cur = s.cur[0], s.cur[1:]
	s.ver = 0
	if len(s.curVer) > 0 {
		s.ver, s.curVer = s.curVer[0], s.curVer[1:]
	}
	return true
}

// Record is the current record. It stays valid after Next; the records of
// one response share one buffer, so keeping a record keeps its response's
// bytes (one batch) in memory: clone it (proto.Clone) to keep it alone.
func (s *Scanner) Record() *anypb.Any { return s.rec }

// Version is the current record's version when the query asked for
// versions (Query.versions), 0 otherwise.
func (s *Scanner) Version() uint64 { return s.ver }

// Err is the error that ended the scan, if any.
func (s *Scanner) Err() error { return s.err }

// Count is the server's count of matches, valid once Next returned false
// without error.
func (s *Scanner) Count() uint64 { return s.count }

// Plan is the query's plan when it asked for explain.
func (s *Scanner) Plan() *pb.Plan { return s.plan }

// Close stops the scan early.
func (s *Scanner) Close() { s.cancel() }

// Page is one page of a paginated query.
type Page struct {
	// Records share one buffer, the page's bytes: keeping one record
	// keeps the whole page in memory (see Scanner.Record).
	Records []*anypb.Any
	// Token resumes after this page; empty on the last page.
	Token string
	Plan  *pb.Plan
	// Count is the number of matches of a count query (Query.count),
	// which is answered in one page without records.
	Count uint64
	// Versions holds each record's version, parallel to Records, when the
	// query asked for them (Query.versions).
	Versions []uint64
}

// Query fetches one page of q; pass the previous page's Token to continue.
// A token taken before q's type was dropped and re-created (or its index
// changed) is FAILED_PRECONDITION: start again without a token.
func (c *Client) Query(ctx context.Context, q *pb.Query, pageSize uint32, token string) (*Page, error) {
	// The request, its answer and the page in one allocation.
	call := new(struct {
		page Page
		req  pb.QueryRequest
		resp pb.QueryResponse
	})
	call.req.Query, call.req.PageSize, call.req.PageToken = q, pageSize, token
	if err := c.unary(ctx, pbgrpc.Protobase_Query_FullMethodName, &call.req, &call.resp); err != nil {
		return nil, asError(err)
	}
	resp := &call.resp
	call.page = Page{Records: resp.Records, Token: resp.NextPageToken, Plan: resp.Plan, Count: resp.Count, Versions: resp.Versions}
	return &call.page, nil
}

// Pages calls fn with every page of q in order until the last page or an
// error; fn returns false to stop.
func (c *Client) Pages(ctx context.Context, q *pb.Query, pageSize uint32, fn func(*Page) bool) error {
	token := ""
	for {
		p, err := c.Query(ctx, q, pageSize, token)
		if err != nil {
			return err
		}
		if !fn(p) || p.Token == "" {
			return nil
		}
		token = p.Token
	}
}

// Unpack decodes records into messages of a generated Go type:
//
//	users, err := client.Unpack[*shoppb.User](records)
func Unpack[M proto.Message](recs []*anypb.Any) ([]M, error) {
	out := make([]M, len(recs))
	for i, a := range recs {
		var zero M
		m := zero.ProtoReflect().New().Interface().(M)
		if err := a.UnmarshalTo(m); err != nil {
			return out[:i], err
		}
		out[i] = m
	}
	return out, nil
}
