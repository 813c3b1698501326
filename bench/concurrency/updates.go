package concurrency

import (
	"context"
	"fmt"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/protobase/protobase/bench"
	"github.com/protobase/protobase/client"
	pb "github.com/protobase/protobase/gen/protobase/v1"
)

// batchesPerStream is how many batches of rows each stream cycles through.
const batchesPerStream = 4

// updateKind is what an update workload sends for each row.
type updateKind int

const (
	updateFull  updateKind = iota // the whole row (WRITE_OP_UPDATE)
	updatePatch                   // field f3 only (WRITE_OP_PATCH)
)

// patchField is the field a patch sets: one of ten.
const patchField = 3

// rows are the rows the update workloads write, streams × batchesPerStream
// batches of batch records, built before the clock starts: two
// generations of each batch's whole rows and of its patches, sent in
// turn so that every write changes what it writes. versions[i] is the
// version batch i's records are at: they are always written together, so
// the position of the batch's last acknowledgement is every record's
// version, and the conditions of batch i point at it.
type rows struct {
	t        *bench.Target
	base     int64 // the first row's id; the rows' ids follow it
	n        int   // rows
	streams  int
	full     [][2][]*anypb.Any
	patch    [][2][]*anypb.Any
	conds    [][]*pb.Condition
	versions []uint64
}

// loadRows inserts the rows, each batch in one acknowledged write.
func (g *Experiment) loadRows(ctx context.Context, t *bench.Target) (*rows, error) {
	base := time.Now().UnixNano() / 1000 // ids no earlier run on an --addr server used
	n := g.Streams * batchesPerStream
	u := &rows{t: t, base: base, n: n * g.Batch, streams: g.Streams, full: make([][2][]*anypb.Any, n), patch: make([][2][]*anypb.Any, n),
		conds: make([][]*pb.Condition, n), versions: make([]uint64, n)}
	for i := 0; i < n; i++ {
		first := base + int64(i*g.Batch)
		for gen := 0; gen < 2; gen++ {
			u.full[i][gen] = make([]*anypb.Any, g.Batch)
			u.patch[i][gen] = make([]*anypb.Any, g.Batch)
			for j := 0; j < g.Batch; j++ {
				id := first + int64(j)
				u.full[i][gen][j] = &anypb.Any{TypeUrl: rowURL, Value: appendRow(nil, id, gen+1)}
				u.patch[i][gen][j] = &anypb.Any{TypeUrl: rowURL, Value: appendPatchRow(nil, id, gen+1, patchField)}
			}
		}
		u.conds[i] = make([]*pb.Condition, g.Batch)
		for j := range u.conds[i] {
			u.conds[i][j] = &pb.Condition{Target: &pb.Condition_Record{Record: uint32(j)}, Version: &u.versions[i]} //nolint:gosec // j < batch
		}
		recs := make([]proto.Message, g.Batch)
		for j := range recs {
			recs[j] = &anypb.Any{TypeUrl: rowURL, Value: appendRow(nil, first+int64(j), 0)}
		}
		pos, err := t.Client.Apply(ctx, client.Batch{Op: client.Insert, Records: recs})
		if err != nil {
			return nil, fmt.Errorf("load rows: %w", err)
		}
		u.versions[i] = pos
	}
	return u, nil
}

// workload updates the rows for d: each stream sends its batches in turn,
// waiting for each acknowledgement, whose position becomes the version
// its records are at. conditional adds a version condition per record.
func (u *rows) workload(kind updateKind, conditional bool) bench.Workload {
	return runClients(u.streams, func(ctx context.Context, s int, more func() bool) (int64, error) {
		return u.stream(ctx, s, kind, conditional, more)
	})
}

// stream is one stream of workload: it returns the records it wrote.
func (u *rows) stream(ctx context.Context, s int, kind updateKind, conditional bool, more func() bool) (int64, error) {
	st, err := u.t.API.Write(ctx)
	if err != nil {
		return 0, fmt.Errorf("open write stream: %w", err)
	}
	req := &pb.WriteStreamRequest{Ack: true}
	var written int64
	for n := 0; more(); n++ {
		i := s*batchesPerStream + n%batchesPerStream
		gen := (n / batchesPerStream) % 2
		req.Op, req.Records, req.Fields, req.Conditions = pb.WriteOp_WRITE_OP_UPDATE, u.full[i][gen], nil, nil
		if kind == updatePatch {
			req.Op, req.Records, req.Fields = pb.WriteOp_WRITE_OP_PATCH, u.patch[i][gen], []string{fmt.Sprintf("f%d", patchField)}
		}
		if conditional {
			req.Conditions = u.conds[i]
		}
		if err := st.Send(req); err != nil {
			return 0, bench.StreamError(st, "send", err)
		}
		resp, err := st.Recv()
		if err != nil {
			return 0, fmt.Errorf("update: %w", err)
		}
		u.versions[i] = resp.Position
		written += int64(len(req.Records))
	}
	if err := st.CloseSend(); err != nil {
		return 0, err
	}
	if _, err := bench.Drain(st, new(pb.WriteStreamResponse)); err != nil {
		return 0, fmt.Errorf("update: %w", err)
	}
	return written, nil
}
