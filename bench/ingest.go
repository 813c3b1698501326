package bench

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/spf13/pflag"

	pb "github.com/protobase/protobase/gen/protobase/v1"
)

func init() { Register(func() Experiment { return new(Ingest) }) }

// Ingest measures batched inserts through the Write stream (op INSERT), by
// records per request, with no and with two secondary indexes, on a server
// that fsyncs before acknowledging and on one that does not (separate
// embedded servers; an --addr server runs only its own mode). A run ends
// when the stream's final status arrives, which for a durable server means
// every record is on disk (the status is OK only then). It reports records/s and MB/s of record bytes.
type Ingest struct {
	Batches []int

	// nextID hands out ids so that no two inserts collide, across runs and
	// configurations.
	nextID atomic.Int64
}

// Name implements Experiment.
func (*Ingest) Name() string { return "ingest" }

// Describe implements Experiment.
func (*Ingest) Describe() string {
	return "durable batched inserts by batch size, with 0 and 2 secondary indexes, fsync on and off"
}

// Flags implements Experiment.
func (g *Ingest) Flags(fs *pflag.FlagSet) {
	fs.IntSliceVar(&g.Batches, "batches", nil, "records per request (default 1,10,100,1000,10000; 1,100,10000 with --quick)")
}

// Run implements Experiment.
func (g *Ingest) Run(ctx context.Context, env *Env) (*Result, error) {
	if len(g.Batches) == 0 {
		g.Batches = []int{1, 10, 100, 1000, 10000}
		if env.Quick {
			g.Batches = []int{1, 100, 10000}
		}
	}
	if err := checkBatches(g.Batches); err != nil {
		return nil, err
	}
	// Ids start at the clock so that runs against one --addr server never
	// insert an id an earlier run stored.
	g.nextID.Store(time.Now().UnixNano() / 1000)
	res := &Result{Chart: &Chart{
		Title: "Batched inserts (Write stream, op INSERT)", Kind: Lines,
		XLabel: "records per request", YLabel: "records/s", X: "batch", Series: "config", Unit: "records/s", LogX: true, LogY: true,
	}}
	var targets []*Target
	if env.Addr != "" {
		t, err := env.Target(ctx, TargetConfig{})
		if err != nil {
			return nil, err
		}
		targets = append(targets, t)
		res.Notes = append(res.Notes, fmt.Sprintf("--addr: only the server's own mode (sync=%v) was measured", t.Sync))
	} else {
		for _, noSync := range []bool{false, true} {
			t, err := env.Target(ctx, TargetConfig{NoSync: noSync})
			if err != nil {
				return nil, err
			}
			targets = append(targets, t)
		}
	}
	for _, t := range targets {
		if err := t.EnsureSchema(ctx, labSchema); err != nil {
			return nil, err
		}
		for _, indexes := range []int{0, 2} {
			typ := itemType
			if indexes == 2 {
				typ = indexedItemType
			}
			config := fmt.Sprintf("indexes=%d sync=%v", indexes, onOff(t.Sync))
			for _, batch := range g.Batches {
				label := fmt.Sprintf("%s batch=%d", config, batch)
				s, err := env.Measure(ctx, label, g.workload(t, typ, batch))
				if err != nil {
					return nil, err
				}
				params := map[string]any{"batch": batch, "indexes": indexes, "sync": t.Sync, "config": config}
				res.Rows = append(res.Rows, NewRow(label, params, "records/s", s.Ops, nil))
				mb := make([]float64, len(s.Bytes))
				for i, v := range s.Bytes {
					mb[i] = v / 1e6
				}
				res.Rows = append(res.Rows, NewRow(label, params, "MB/s", mb, nil))
			}
		}
	}
	res.Notes = append(res.Notes, "records of about 100 bytes; MB/s counts record bytes (10^6 bytes), not protocol overhead")
	return res, nil
}

func onOff(b bool) string {
	if b {
		return "on"
	}
	return "off"
}

// ingestWindow bounds the record bytes an ingest stream has sent but not
// yet had acknowledged. Without it a client could queue seconds of work in
// the flow-control windows when its run ends, and runs would overshoot
// their duration by that much.
const ingestWindow = 256 << 10

// workload inserts batches of fresh items for d through one Write stream
// (see insertStream).
func (g *Ingest) workload(t *Target, typ string, batch int) Workload {
	return insertStream(t, batch, itemWireBytes, func(buf []byte) ([]byte, int64) {
		first := g.nextID.Add(int64(batch)) - int64(batch)
		return appendWriteRecords(buf, 2, typ, first, batch)
	}, nil)
}

// insertStream is the insert loop of ingest and layout: batches from
// appendBatch for d (and while more, if given, allows) through one Write
// stream (op INSERT), asking for an acknowledgement every ingestWindow/2
// bytes and keeping at most two of them outstanding. The run ends with the
// stream's final status, sent once every batch is durable (on a syncing
// server). Each batch is encoded straight into a new buffer: one
// allocation per batch, and a sent buffer is never reused (see frame).
// appendBatch appends one batch's records and returns their bytes.
func insertStream(t *Target, batch, recordBytes int, appendBatch func(buf []byte) ([]byte, int64), more func(payload int64) bool) Workload {
	codec := newLabCodec().callOption()
	ackEvery := max(1, ingestWindow/2/(batch*recordBytes))
	return func(ctx context.Context, d time.Duration) (Count, error) {
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		st, err := t.API.Write(ctx, codec)
		if err != nil {
			return Count{}, fmt.Errorf("open write stream: %w", err)
		}
		ack := new(pb.WriteStreamResponse)
		var records, payload int64
		var asked, acked int
		size := 0
		start := time.Now()
		deadline := start.Add(d)
		for i := 1; time.Now().Before(deadline) && (more == nil || more(payload)); i++ {
			buf := protowireAppendOp(make([]byte, 0, size), pb.WriteOp_WRITE_OP_INSERT)
			buf, n := appendBatch(buf)
			if i%ackEvery == 0 {
				buf = protowireAppendAck(buf)
				asked++
			}
			size = cap(buf)
			f := frame(buf)
			if err := st.SendMsg(&f); err != nil {
				return Count{}, recvStatus(st, "send", err)
			}
			records += int64(batch)
			payload += n
			for asked-acked > 1 {
				if err := st.RecvMsg(ack); err != nil {
					return Count{}, fmt.Errorf("receive acknowledgement: %w", err)
				}
				acked++
			}
		}
		if err := st.CloseSend(); err != nil {
			return Count{}, fmt.Errorf("close: %w", err)
		}
		n, err := drain(st, ack)
		if err != nil {
			return Count{}, fmt.Errorf("insert: %w", err)
		}
		acked += int(n)
		elapsed := time.Since(start)
		if acked != asked {
			return Count{}, fmt.Errorf("%d acknowledgements for %d asked", acked, asked)
		}
		return Count{Ops: records, Bytes: payload, Elapsed: elapsed}, nil
	}
}
