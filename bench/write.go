package bench

import (
	"context"
	"fmt"
	"time"

	"google.golang.org/protobuf/encoding/protowire"

	pb "github.com/protobase/protobase/gen/protobase/v1"
)

// The write side of the kit: encoding WriteStreamRequests by hand, and the
// insert loop that ingest and layout share.

// AppendWriteOp appends WriteStreamRequest.op (field 1).
func AppendWriteOp(b []byte, op pb.WriteOp) []byte {
	b = protowire.AppendTag(b, 1, protowire.VarintType)
	return protowire.AppendVarint(b, uint64(op))
}

// AppendAck appends WriteStreamRequest.ack = true (field 3).
func AppendAck(b []byte) []byte {
	b = protowire.AppendTag(b, 3, protowire.VarintType)
	return protowire.AppendVarint(b, 1)
}

// ItemWireBytes is about the encoded size of one item in a write request
// (record, type URL and framing), for sizing windows.
const ItemWireBytes = 150

// insertWindow bounds the record bytes an insert stream has sent but not
// yet had acknowledged. Without it a client could queue seconds of work in
// the flow-control windows when its run ends, and runs would overshoot
// their duration by that much. It must still span several batches: with
// 256 KiB, a batch of 1,000 records (150 KB) asked for an acknowledgement
// every batch and had at most two in flight, so the server synced after
// nearly every batch and the stream ran at half the rate of an Insert
// stream. 4 MiB matches the server's
// per-stream flow-control window.
const insertWindow = 4 << 20

// insertWindowBatches bounds the requests in flight the same way for small
// batches, whose bytes alone would let tens of thousands of single-record
// requests queue: a syncing server applies a few thousand a second, so a
// 150 ms run overshot by tens of seconds while the server worked through
// the queue.
const insertWindowBatches = 256

// WriteCounter accumulates what write workloads did across runs (warm-ups
// included), so that an experiment and its tests can hold the server's
// counters against it. Workloads sharing one run one at a time.
type WriteCounter struct {
	Records uint64 // records sent in batches the server acknowledged as applied
	Batches uint64 // write requests sent
}

// InsertStream is the insert loop of ingest and layout: batches from
// appendBatch for d (and while more, if given, allows) through one Write
// stream (op INSERT), asking for an acknowledgement every insertWindow/2
// bytes or insertWindowBatches/2 requests, whichever comes first, and
// keeping at most two of them outstanding. The run ends with the
// stream's final status, sent once every batch is durable (on a syncing
// server). Each batch is encoded straight into a new buffer: one
// allocation per batch, and a sent buffer is never reused (see Frame).
// appendBatch appends one batch's records and returns their bytes;
// recordBytes is about one record's encoded size. A run that ends well
// adds what it wrote to ctr (nil: not counted).
func InsertStream(t *Target, batch, recordBytes int, appendBatch func(buf []byte) ([]byte, int64), more func(payload int64) bool, ctr *WriteCounter) Workload {
	return InsertStreamAcked(t, batch, recordBytes, appendBatch, more, ctr, nil)
}

// InsertStreamAcked is InsertStream calling onAck, if not nil, with the
// time since the run started and the records acknowledged (durable on a
// syncing server) as each acknowledgement arrives: the ingest
// experiment's sustained runs trace their rate with it.
func InsertStreamAcked(t *Target, batch, recordBytes int, appendBatch func(buf []byte) ([]byte, int64), more func(payload int64) bool, ctr *WriteCounter, onAck func(since time.Duration, records uint64)) Workload {
	codec := CallCodec()
	ackEvery := max(1, min(insertWindowBatches/2, insertWindow/2/(batch*recordBytes)))
	return func(ctx context.Context, d time.Duration) (Count, error) {
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		st, err := t.API.Write(ctx, codec)
		if err != nil {
			return Count{}, fmt.Errorf("open write stream: %w", err)
		}
		ack := new(pb.WriteStreamResponse)
		var records, payload int64
		var asked, acked, sent int
		size := 0
		start := time.Now()
		deadline := start.Add(d)
		for i := 1; time.Now().Before(deadline) && (more == nil || more(payload)); i++ {
			buf := AppendWriteOp(make([]byte, 0, size), pb.WriteOp_WRITE_OP_INSERT)
			buf, n := appendBatch(buf)
			if i%ackEvery == 0 {
				buf = AppendAck(buf)
				asked++
			}
			size = cap(buf)
			f := Frame(buf)
			if err := st.SendMsg(&f); err != nil {
				return Count{}, StreamError(st, "send", err)
			}
			sent++
			records += int64(batch)
			payload += n
			for asked-acked > 1 {
				if err := st.RecvMsg(ack); err != nil {
					return Count{}, fmt.Errorf("receive acknowledgement: %w", err)
				}
				acked++
				if onAck != nil {
					onAck(time.Since(start), ack.Records)
				}
			}
		}
		if err := st.CloseSend(); err != nil {
			return Count{}, fmt.Errorf("close: %w", err)
		}
		n, err := Drain(st, ack)
		if err != nil {
			return Count{}, fmt.Errorf("insert: %w", err)
		}
		acked += int(n)
		elapsed := time.Since(start)
		if acked != asked {
			return Count{}, fmt.Errorf("%d acknowledgements for %d asked", acked, asked)
		}
		if onAck != nil {
			onAck(elapsed, uint64(records)) //nolint:gosec // a count
		}
		if ctr != nil {
			ctr.Records += uint64(records)
			ctr.Batches += uint64(sent)
		}
		return Count{Ops: records, Bytes: payload, Elapsed: elapsed}, nil
	}
}
