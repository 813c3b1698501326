package engine

import (
	"context"
	"sync"
	"sync/atomic"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/anypb"

	pb "github.com/protobase/protobase/gen/protobase/v1"
	"github.com/protobase/protobase/internal/query"
	"github.com/protobase/protobase/internal/store"
)

// maxScanParallelism caps ScanRequest.parallelism.
const maxScanParallelism = 256

// Scan streams every match of one query. With parallelism > 1 the plan's
// key ranges are cut at storage-file boundaries into contiguous parts read
// concurrently on one snapshot. When the query asks for an order, parts are
// emitted in key order (later parts read ahead into a bounded buffer);
// otherwise batches go out as they fill. The last response carries the
// count and done.
func (e *Engine) Scan(ctx context.Context, req *pb.ScanRequest, send func(*pb.ScanResponse) error) error {
	e.stats.Queries.Add(1)
	c, err := e.compile(req.GetQuery())
	if err != nil {
		e.stats.QueryErrors.Add(1)
		return err
	}
	par := int(req.GetParallelism())
	if par <= 0 {
		par = 1
	}
	if par > maxScanParallelism {
		return &Error{Code: codes.InvalidArgument, Msg: "parallelism " + itoa(par) + " is over the limit of " + itoa(maxScanParallelism), Field: "parallelism"}
	}
	batchSize := int(req.GetBatchSize())
	if batchSize <= 0 || batchSize > e.opts.MaxResultRecords*10 {
		batchSize = e.opts.MaxResultRecords
	}

	snap := e.st.NewSnapshot()
	defer snap.Close()
	parts := e.split(c.plan, par)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	ordered := c.q.GetOrder() != nil && len(parts) > 1
	chans := make([]chan *pb.ScanResponse, len(parts))
	shared := make(chan *pb.ScanResponse, 2*len(parts))
	for i := range chans {
		if ordered {
			chans[i] = make(chan *pb.ScanResponse, 2)
		} else {
			chans[i] = shared
		}
	}
	var total atomic.Uint64
	limit := c.plan.Limit
	var wg sync.WaitGroup
	errs := make([]error, len(parts))
	for i, part := range parts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if ordered {
				defer close(chans[i])
			}
			errs[i] = e.scanPart(ctx, c, snap, part, batchSize, chans[i], &total, limit, !ordered)
			if errs[i] != nil {
				cancel()
			}
		}()
	}
	if !ordered {
		go func() { wg.Wait(); close(shared) }()
	}

	var sent uint64
	var sendErr error
	explained := !c.q.GetExplain()
	emit := func(resp *pb.ScanResponse) {
		if sendErr != nil {
			return
		}
		if limit > 0 && sent+uint64(len(resp.Records)) > limit {
			resp.Records = resp.Records[:limit-sent]
		}
		if len(resp.Records) == 0 {
			return
		}
		sent += uint64(len(resp.Records))
		if !explained {
			resp.Plan = c.plan.Explain()
			explained = true
		}
		if sendErr = send(resp); sendErr != nil {
			cancel()
		}
		if limit > 0 && sent >= limit {
			cancel()
		}
	}
	if ordered {
		for _, ch := range chans {
			for resp := range ch {
				emit(resp)
			}
		}
	} else {
		for resp := range shared {
			emit(resp)
		}
	}
	wg.Wait()
	if sendErr != nil {
		return sendErr
	}
	for _, err := range errs {
		if err != nil && (limit == 0 || sent < limit) {
			return err
		}
	}
	if limit == 0 || sent < limit {
		if err := ctx.Err(); err != nil {
			return err
		}
	}
	count := sent
	if c.plan.Count {
		count = total.Load()
		if limit > 0 && count > limit {
			count = limit
		}
	}
	last := &pb.ScanResponse{Count: count, Done: true}
	if !explained {
		last.Plan = c.plan.Explain()
	}
	return send(last)
}

// scanPart reads one part into bounded batches.
func (e *Engine) scanPart(ctx context.Context, c *compiled, r store.Reader, part []query.Range, batchSize int, out chan<- *pb.ScanResponse, total *atomic.Uint64, limit uint64, anyOrder bool) error {
	cu := &cursor{e: e, c: c, r: r}
	var resp *pb.ScanResponse
	var slab []anypb.Any
	var vals []byte
	size := 0
	flush := func() bool {
		if resp == nil {
			return true
		}
		select {
		case out <- resp:
		case <-ctx.Done():
			return false
		}
		resp, size, vals = nil, 0, nil
		return true
	}
	err := cu.run(ctx, part, nil, func(_, rec []byte) bool {
		n := total.Add(1)
		if c.plan.Count {
			return true
		}
		// Each cursor stops at the limit on its own part. Without an
		// order, any limit matches will do, so parts also stop once
		// together they have enough; with an order, an earlier part's
		// matches must win, so parts never stop each other.
		if anyOrder && limit > 0 && n > limit {
			return false
		}
		if resp != nil && (len(resp.Records) >= batchSize || size+len(rec) > e.opts.MaxResultBytes) {
			if !flush() {
				return false
			}
		}
		if resp == nil {
			resp = &pb.ScanResponse{Records: make([]*anypb.Any, 0, batchSize)}
		}
		if len(slab) == 0 {
			slab = make([]anypb.Any, 256)
		}
		if cap(vals)-len(vals) < len(rec) {
			vals = make([]byte, 0, max(256<<10, len(rec)))
		}
		start := len(vals)
		vals = append(vals, rec...)
		a := &slab[0]
		slab = slab[1:]
		a.TypeUrl, a.Value = c.t.url, vals[start:len(vals):len(vals)]
		resp.Records = append(resp.Records, a)
		size += len(rec)
		return true
	})
	if err != nil {
		return err
	}
	flush()
	return nil
}

// split cuts a plan's ranges into at most n contiguous parts of similar
// size, in key order (reversed for reverse plans).
func (e *Engine) split(p *query.Plan, n int) [][]query.Range {
	if n <= 1 {
		return [][]query.Range{p.Ranges}
	}
	var pieces []query.Range
	for _, rg := range p.Ranges {
		cuts, err := e.st.SplitKeys(rg.Start, rg.End, n)
		if err != nil || len(cuts) == 0 {
			pieces = append(pieces, rg)
			continue
		}
		start := rg.Start
		for _, k := range cuts {
			pieces = append(pieces, query.Range{Start: start, End: k})
			start = k
		}
		pieces = append(pieces, query.Range{Start: start, End: rg.End})
	}
	if len(pieces) <= 1 {
		return [][]query.Range{pieces}
	}
	parts := make([][]query.Range, 0, n)
	per := (len(pieces) + n - 1) / n
	for i := 0; i < len(pieces); i += per {
		parts = append(parts, pieces[i:min(i+per, len(pieces))])
	}
	if p.Reverse {
		for i, j := 0, len(parts)-1; i < j; i, j = i+1, j-1 {
			parts[i], parts[j] = parts[j], parts[i]
		}
	}
	return parts
}
