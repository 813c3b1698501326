// Package layout is the lab's layout experiment (seed 003): flat vs
// wrapped messages, their client-side marshal and unmarshal costs by
// size, and the server's cost of indexing each.
package layout

import (
	"context"
	_ "embed"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/protobase/protobase/bench"
	labv1 "github.com/protobase/protobase/gen/protobase/lab/v1"
)

func init() { bench.Register(func() bench.Experiment { return new(Experiment) }) }

// Experiment is seed 003: the same event encoded as one flat message
// (labv1.FlatEvent) or as a small header wrapping the marshalled payload
// as opaque bytes (labv1.WrappedEvent), at the seed's six sizes.
//
// The client side marshals and unmarshals both with the lab's measuring
// loop (bench.MeasureOp: ns/op, B/op, allocs/op, as the seed's Go
// benchmarks reported them); the wrapped rows measure the
// outer message only, as the seed did, and the "+payload" rows add the
// inner message's marshal or unmarshal, which is what a client that needs
// the payload pays in all. The server side inserts records of each layout
// into record types indexing the same two header fields and reports
// records/s: the server validates records with protowire and reads only
// the indexed fields, so the layout should not change its cost.
type Experiment struct {
	Sizes    []string
	NoServer bool

	// written counts the records inserted into each server, which its
	// counters must match (checked by the tests).
	written map[*bench.Target]*bench.WriteCounter
}

// layoutSize is one of the seed's message sizes. Invariant: bytes is
// large enough to hold the header and the payload's fixed fields
// (checked by newLayoutEvent).
type layoutSize struct {
	name string
	// bytes is the encoded size of the flat event: the seed's marshal
	// B/op less a few bytes, so that both layouts' encodings (the wrapped
	// one is 2 to 4 bytes longer) fall in the seed's allocation size class.
	bytes int
}

// layoutSizes are the seed's sizes; seed003 its figures, by size name and
// row series.
var layoutSizes = []layoutSize{
	{"Tiny", 1536 - 8},
	{"XSmall", 4864 - 8},
	{"Small", 9472 - 8},
	{"Medium", 40960 - 8},
	{"Large", 1474560 - 8},
	{"XLarge", 5251074 - 8},
}

// seed003 holds the seed's ns/op, B/op and allocs/op by size and series
// ("flat marshal", …); it published no "+payload" rows.
var seed003 = map[string]map[string][3]float64{
	"Tiny": {
		"flat marshal": {607.1, 1536, 1}, "wrapped marshal": {418.6, 1536, 1},
		"flat unmarshal": {1102, 2280, 24}, "wrapped unmarshal": {691.9, 2008, 14},
	},
	"XSmall": {
		"flat marshal": {919.8, 4864, 1}, "wrapped marshal": {797.0, 4864, 1},
		"flat unmarshal": {1528, 5352, 24}, "wrapped unmarshal": {942.3, 5464, 14},
	},
	"Small": {
		"flat marshal": {1217, 9472, 1}, "wrapped marshal": {1076, 9472, 1},
		"flat unmarshal": {1936, 9448, 24}, "wrapped unmarshal": {1243, 10072, 14},
	},
	"Medium": {
		"flat marshal": {3792, 40960, 1}, "wrapped marshal": {3512, 40960, 1},
		"flat unmarshal": {3653, 34024, 24}, "wrapped unmarshal": {3714, 41560, 14},
	},
	"Large": {
		"flat marshal": {64584, 1474560, 1}, "wrapped marshal": {69056, 1474561, 1},
		"flat unmarshal": {52541, 1475816, 24}, "wrapped unmarshal": {56723, 1475160, 14},
	},
	"XLarge": {
		"flat marshal": {167709, 5251074, 1}, "wrapped marshal": {174831, 5251075, 1},
		"flat unmarshal": {131589, 5252329, 24}, "wrapped unmarshal": {146534, 5251674, 14},
	},
}

const seed003Source = "seed 003 (flat vs wrapped protobuf messages; Apple M-series, -10)"

// layoutUnits are the client-side units, in the order of seed003's values.
var layoutUnits = [3]string{"ns/op", "B/op", "allocs/op"}

// Name implements bench.Experiment.
func (*Experiment) Name() string { return "layout" }

// Describe implements bench.Experiment.
func (*Experiment) Describe() string {
	return "flat vs wrapped messages: marshal/unmarshal by size, and the server's cost of indexing each (seed 003)"
}

// Flags implements bench.Experiment.
func (l *Experiment) Flags(fs *pflag.FlagSet) {
	fs.StringSliceVar(&l.Sizes, "sizes", nil, "message sizes (default Tiny,XSmall,Small,Medium,Large,XLarge; Tiny,XSmall,Small with --quick)")
	fs.BoolVar(&l.NoServer, "no-server", false, "measure only marshal and unmarshal, not the server's ingest")
}

// sizes resolves --sizes.
func (l *Experiment) sizes(quick bool) ([]layoutSize, error) {
	names := l.Sizes
	if len(names) == 0 {
		if quick {
			return layoutSizes[:3], nil
		}
		return layoutSizes, nil
	}
	var out []layoutSize
	for _, n := range names {
		i := slices.IndexFunc(layoutSizes, func(s layoutSize) bool { return strings.EqualFold(s.name, n) })
		if i < 0 {
			return nil, fmt.Errorf("--sizes: unknown size %q (have Tiny, XSmall, Small, Medium, Large, XLarge)", n)
		}
		out = append(out, layoutSizes[i])
	}
	return out, nil
}

// Run implements bench.Experiment.
func (l *Experiment) Run(ctx context.Context, env *bench.Env) (*bench.Result, error) {
	sizes, err := l.sizes(env.Quick)
	if err != nil {
		return nil, err
	}
	res := &bench.Result{Chart: &bench.Chart{
		Title: "Flat vs wrapped messages: marshal and unmarshal", Kind: bench.Lines,
		XLabel: "encoded size (bytes)", YLabel: "ns/op", X: "bytes", Series: "series", Unit: "ns/op", LogX: true, LogY: true,
	}}
	// bench.MeasureOp calibrates its loop for the minimum time; a quick
	// run needs only a glimpse.
	benchTime := env.Duration
	if env.Quick {
		benchTime = min(benchTime, 50*time.Millisecond)
	}
	for _, sz := range sizes {
		rows, err := l.codecRows(ctx, env, sz, benchTime)
		if err != nil {
			return nil, err
		}
		res.Rows = append(res.Rows, rows...)
	}
	res.Notes = append(res.Notes,
		fmt.Sprintf("marshal/unmarshal: a measuring loop like testing.Benchmark's for %v per run, its own calibration as warm-up; wrapped rows encode or decode the outer message only (as the seed), \"+payload\" rows the inner one too", benchTime),
		"sizes are the flat event's encoded size; the wrapped one is 2 to 4 bytes longer")
	if l.NoServer {
		return res, nil
	}
	notes, rows, err := l.serverRows(ctx, env, sizes)
	if err != nil {
		return nil, err
	}
	res.Rows = append(res.Rows, rows...)
	res.Notes = append(res.Notes, notes...)
	return res, nil
}

// layoutCase is one client-side measurement: a series ("flat marshal")
// and the operation over one size's events, which runs n times and
// fails on the first error (for bench.MeasureOp, and for the Go
// benchmarks in layout_bench_test.go).
type layoutCase struct {
	layout, op string
	fn         func(n int) error
}

func (c layoutCase) series() string { return c.layout + " " + c.op }

// layoutCases returns the client-side operations over ev, the events of
// one size. Each unmarshal decodes into a fresh message, as a server
// receiving requests would (and as the seed did). The "bytes copy" case
// is the floor under every other: allocate a buffer of the flat
// encoding's size and copy the encoding into it, which any marshal or
// unmarshal of these messages does at least once; its ns/op is how fast
// this machine is, beside the seed's machine.
func layoutCases(ev *layoutEvents) []layoutCase {
	return []layoutCase{
		{"bytes", "copy", func(n int) error {
			for range n {
				b := make([]byte, len(ev.flatBytes))
				copy(b, ev.flatBytes)
				copySink = b
			}
			return nil
		}},
		{"flat", "marshal", func(n int) error {
			for range n {
				if _, err := proto.Marshal(ev.flat); err != nil {
					return err
				}
			}
			return nil
		}},
		{"wrapped", "marshal", func(n int) error {
			for range n {
				if _, err := proto.Marshal(ev.wrapped); err != nil {
					return err
				}
			}
			return nil
		}},
		{"wrapped", "marshal+payload", func(n int) error {
			w := proto.CloneOf(ev.wrapped)
			for range n {
				p, err := proto.Marshal(ev.payload)
				if err != nil {
					return err
				}
				w.Payload = p
				if _, err := proto.Marshal(w); err != nil {
					return err
				}
			}
			return nil
		}},
		{"flat", "unmarshal", func(n int) error {
			for range n {
				if err := proto.Unmarshal(ev.flatBytes, new(labv1.FlatEvent)); err != nil {
					return err
				}
			}
			return nil
		}},
		{"wrapped", "unmarshal", func(n int) error {
			for range n {
				if err := proto.Unmarshal(ev.wrappedBytes, new(labv1.WrappedEvent)); err != nil {
					return err
				}
			}
			return nil
		}},
		{"wrapped", "unmarshal+payload", func(n int) error {
			for range n {
				w := new(labv1.WrappedEvent)
				if err := proto.Unmarshal(ev.wrappedBytes, w); err != nil {
					return err
				}
				if err := proto.Unmarshal(w.Payload, new(labv1.EventPayload)); err != nil {
					return err
				}
			}
			return nil
		}},
	}
}

// copySink keeps the "bytes copy" case's buffer from being optimized
// away.
var copySink []byte //nolint:unused // written, never read: keeps the copy from being optimized away

// codecRows benchmarks every case at one size, env.Runs times each.
func (l *Experiment) codecRows(ctx context.Context, env *bench.Env, sz layoutSize, benchTime time.Duration) ([]bench.Row, error) {
	ev, err := newLayoutEvents(sz.bytes)
	if err != nil {
		return nil, err
	}
	cases := layoutCases(ev)
	task := env.Progress.Task(fmt.Sprintf("marshal/unmarshal %s", sz.name), len(cases)*env.Runs)
	defer task.Done("")
	var rows []bench.Row
	for _, c := range cases {
		var samples [3][]float64
		for range env.Runs {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			r, err := bench.MeasureOp(benchTime, c.fn)
			if err != nil {
				return nil, fmt.Errorf("%s %s: %w", sz.name, c.series(), err)
			}
			samples[0] = append(samples[0], r.NsPerOp())
			samples[1] = append(samples[1], float64(r.BytesPerOp()))
			samples[2] = append(samples[2], float64(r.AllocsPerOp()))
			task.Step()
		}
		params := map[string]any{"size": sz.name, "bytes": sz.bytes, "layout": c.layout, "op": c.op, "series": c.series()}
		for u, unit := range layoutUnits {
			var ref *bench.Reference
			if v, ok := seed003[sz.name][c.series()]; ok {
				ref = &bench.Reference{Value: v[u], Source: seed003Source}
			}
			rows = append(rows, bench.NewRow(sz.name+" "+c.series(), params, unit, samples[u], ref))
		}
	}
	return rows, nil
}

// layoutEvents are one size's events in both layouts, with the same
// content, and their encodings. Invariant: flatBytes and wrappedBytes are
// the deterministic encodings of flat and wrapped, wrapped.Payload is that
// of payload, and len(flatBytes) is the size asked for.
type layoutEvents struct {
	flat         *labv1.FlatEvent
	wrapped      *labv1.WrappedEvent
	payload      *labv1.EventPayload
	flatBytes    []byte
	wrappedBytes []byte
}

// layoutID is event n's id. Ids have one width (20 bytes) so that the
// records of one size have one encoded size whatever their id.
func layoutID(n int64) string { return fmt.Sprintf("evt-%016x", n) }

// layoutClients and layoutTopics are how many distinct values the two
// indexed header fields take.
const layoutClients, layoutTopics = 64, 16

// layoutHeader fills the header fields shared by both layouts for event n.
func layoutHeader(n int64) (id, client, topic string, created int64, seq uint64, mimetype string) {
	return layoutID(n), fmt.Sprintf("client-%02d", n%layoutClients), fmt.Sprintf("topic-%02d", n%layoutTopics),
		1700000000000000 + n, uint64(n), "application/octet-stream"
}

// newLayoutEvents builds event 0 in both layouts, its flat encoding size
// bytes long, the data bytes filled from a fixed seed so that every run
// encodes the same content.
func newLayoutEvents(size int) (*layoutEvents, error) {
	payload := &labv1.EventPayload{
		Meta: &labv1.EventMeta{
			Key: "tenants/acme/streams/orders/2024-05-01", Encoding: "zstd", Region: "eu-west-1", Version: 7,
			Origin: &labv1.EventOrigin{Host: "ingest-3.eu-west-1.internal", Process: "collector", Pid: 4242},
		},
		Tags: []string{"orders", "checkout", "web"},
	}
	flat := &labv1.FlatEvent{Meta: payload.Meta, Tags: payload.Tags}
	flat.Id, flat.ClientId, flat.Topic, flat.Created, flat.Seq, flat.Mimetype = layoutHeader(0)
	// Size the data so that the flat encoding is exactly size bytes: the
	// data field adds its tag, its length's varint and the bytes.
	fixed := proto.Size(flat)
	n := size - fixed - protowire.SizeTag(10) - 1
	for n > 0 && fixed+protowire.SizeTag(10)+protowire.SizeBytes(n) > size {
		n--
	}
	if n <= 0 {
		return nil, fmt.Errorf("size %d is below the %d bytes of the fixed fields", size, fixed)
	}
	data := make([]byte, n)
	r := rand.New(rand.NewPCG(3, 3))
	for i := range data {
		data[i] = byte(r.Uint32())
	}
	flat.Data, payload.Data = data, data
	opts := proto.MarshalOptions{Deterministic: true}
	p, err := opts.Marshal(payload)
	if err != nil {
		return nil, fmt.Errorf("marshal payload: %w", err)
	}
	wrapped := &labv1.WrappedEvent{Payload: p}
	wrapped.Id, wrapped.ClientId, wrapped.Topic, wrapped.Created, wrapped.Seq, wrapped.Mimetype = layoutHeader(0)
	ev := &layoutEvents{flat: flat, wrapped: wrapped, payload: payload}
	if ev.flatBytes, err = opts.Marshal(flat); err != nil {
		return nil, fmt.Errorf("marshal flat event: %w", err)
	}
	if ev.wrappedBytes, err = opts.Marshal(wrapped); err != nil {
		return nil, fmt.Errorf("marshal wrapped event: %w", err)
	}
	if len(ev.flatBytes) != size {
		return nil, fmt.Errorf("flat event is %d bytes, want %d", len(ev.flatBytes), size)
	}
	return ev, nil
}

// The server's record types (layout.proto): the lab's layouts with a
// primary key and two secondary indexes on header fields. Field numbers
// and types must match proto/protobase/lab/v1/layout.proto, whose
// encodings the lab sends (TestLayoutServerReadsHeader checks it).
//
//go:embed layout.proto
var layoutProto string

const (
	layoutProtoFile  = "protobase_lab/layout.proto"
	flatEventType    = "protobase_lab.FlatEvent"
	wrappedEventType = "protobase_lab.WrappedEvent"
)

var layoutSchema = map[string]string{layoutProtoFile: layoutProto}

// layoutRecords encodes events of one layout for insertion with fresh ids.
// A record is the header, encoded for its id, followed by tail: a protobuf
// encoding is the concatenation of its fields', so the flat event's tail
// is the payload's fields and the wrapped event's is its payload field.
// Invariant: len(tail) is the record's size less its header's.
type layoutRecords struct {
	typeURL string
	tail    []byte
}

// newLayoutRecords returns the record encoders of both layouts of ev.
func newLayoutRecords(ev *layoutEvents) (flat, wrapped layoutRecords, err error) {
	opts := proto.MarshalOptions{Deterministic: true}
	ft, err := opts.Marshal(&labv1.FlatEvent{Data: ev.flat.Data, Meta: ev.flat.Meta, Tags: ev.flat.Tags})
	if err != nil {
		return flat, wrapped, fmt.Errorf("marshal flat payload: %w", err)
	}
	wt, err := opts.Marshal(&labv1.WrappedEvent{Payload: ev.wrapped.Payload})
	if err != nil {
		return flat, wrapped, fmt.Errorf("marshal wrapped payload: %w", err)
	}
	return layoutRecords{bench.TypeURLPrefix + flatEventType, ft}, layoutRecords{bench.TypeURLPrefix + wrappedEventType, wt}, nil
}

// appendRecord appends event n's encoding to dst.
func (r layoutRecords) appendRecord(dst []byte, n int64) []byte {
	id, client, topic, created, seq, mimetype := layoutHeader(n)
	dst = protowire.AppendTag(dst, 1, protowire.BytesType)
	dst = protowire.AppendString(dst, id)
	dst = protowire.AppendTag(dst, 2, protowire.BytesType)
	dst = protowire.AppendString(dst, client)
	dst = protowire.AppendTag(dst, 3, protowire.BytesType)
	dst = protowire.AppendString(dst, topic)
	dst = protowire.AppendTag(dst, 4, protowire.VarintType)
	dst = protowire.AppendVarint(dst, uint64(created))
	dst = protowire.AppendTag(dst, 5, protowire.VarintType)
	dst = protowire.AppendVarint(dst, seq)
	dst = protowire.AppendTag(dst, 6, protowire.BytesType)
	dst = protowire.AppendString(dst, mimetype)
	return append(dst, r.tail...)
}

// appendWrite appends to dst the records field (2) of a WriteStreamRequest
// holding events first..first+n-1, and returns dst and the record bytes.
func (r layoutRecords) appendWrite(dst []byte, first int64, n int) ([]byte, int64) {
	var payload int64
	rec := make([]byte, 0, len(r.tail)+96)
	for i := range int64(n) {
		rec = r.appendRecord(rec[:0], first+i)
		payload += int64(len(rec))
		anyLen := protowire.SizeTag(1) + protowire.SizeBytes(len(r.typeURL)) + protowire.SizeTag(2) + protowire.SizeBytes(len(rec))
		dst = protowire.AppendTag(dst, 2, protowire.BytesType)
		dst = protowire.AppendVarint(dst, uint64(anyLen))
		dst = protowire.AppendTag(dst, 1, protowire.BytesType)
		dst = protowire.AppendString(dst, r.typeURL)
		dst = protowire.AppendTag(dst, 2, protowire.BytesType)
		dst = protowire.AppendBytes(dst, rec)
	}
	return dst, payload
}

// layoutRunBytes caps the record bytes one server-side run sends, so that
// a run of large events does not fill the disk (at a few hundred MB/s, a
// 2-second run of 5 MB events would write a gigabyte).
const layoutRunBytes = 128 << 20

// serverRows inserts events of each size in both layouts into embedded
// servers that do not fsync (so that the disk does not hide the per-record
// work) and reports records/s and MB/s.
func (l *Experiment) serverRows(ctx context.Context, env *bench.Env, sizes []layoutSize) ([]string, []bench.Row, error) {
	// Each configuration gets a fresh embedded server: in one shared
	// server the later configurations would run into the flushes and
	// compactions of the earlier ones' data, which favours whichever runs
	// first.
	l.written = map[*bench.Target]*bench.WriteCounter{}
	var shared *bench.Target
	target := func() (*bench.Target, error) {
		if shared != nil {
			return shared, nil
		}
		t, err := env.Target(ctx, bench.TargetConfig{NoSync: true})
		if err != nil {
			return nil, err
		}
		if err := t.EnsureSchema(ctx, layoutSchema); err != nil {
			return nil, err
		}
		if !t.Embedded {
			shared = t
		}
		return t, nil
	}
	t, err := target()
	if err != nil {
		return nil, nil, err
	}
	// Ids start at the clock so that runs against one --addr server never
	// insert an id an earlier run stored.
	next := time.Now().UnixNano() / 1000
	var notes []string
	if !t.Embedded {
		notes = append(notes, fmt.Sprintf("--addr: server-side rows ran in the server's own mode (sync=%v)", t.Sync))
	}
	var rows []bench.Row
	var ratios []string
	for _, sz := range sizes {
		ev, err := newLayoutEvents(sz.bytes)
		if err != nil {
			return nil, nil, err
		}
		flat, wrapped, err := newLayoutRecords(ev)
		if err != nil {
			return nil, nil, err
		}
		// About 256 KB per request, so that small events are batched as
		// an ingesting client would and large ones go one per request.
		batch := min(1000, max(1, (256<<10)/sz.bytes))
		var medians [2]float64
		for i, lr := range []layoutRecords{flat, wrapped} {
			layout := [2]string{"flat", "wrapped"}[i]
			label := fmt.Sprintf("server insert %s %s", sz.name, layout)
			if sz != sizes[0] || i > 0 {
				if t, err = target(); err != nil {
					return nil, nil, err
				}
			}
			s, err := env.Measure(ctx, label, layoutInsert(t, lr, batch, &next, l.counter(t)))
			if err != nil {
				return nil, nil, err
			}
			params := map[string]any{"size": sz.name, "bytes": sz.bytes, "layout": layout, "op": "server insert", "series": layout + " server insert", "batch": batch}
			row := bench.NewRow(label, params, "records/s", s.Ops, nil)
			medians[i] = row.Median
			rows = append(rows, row)
			mb := make([]float64, len(s.Bytes))
			for j, v := range s.Bytes {
				mb[j] = v / 1e6
			}
			rows = append(rows, bench.NewRow(label, params, "MB/s", mb, nil))
		}
		ratios = append(ratios, fmt.Sprintf("%s %.2f×", sz.name, medians[1]/medians[0]))
	}
	notes = append(notes,
		"server insert: Write stream (INSERT) of records indexed on two header fields (client_id, topic), a fresh server without fsync for each row; at most 128 MB per run",
		"server insert, wrapped/flat records/s: "+strings.Join(ratios, ", "))
	return notes, rows, nil
}

// counter returns the count of records written to t.
func (l *Experiment) counter(t *bench.Target) *bench.WriteCounter {
	ctr := l.written[t]
	if ctr == nil {
		ctr = new(bench.WriteCounter)
		l.written[t] = ctr
	}
	return ctr
}

// layoutInsert inserts batches of fresh events for d, or until
// layoutRunBytes, through one Write stream (see bench.InsertStream),
// counting them in ctr.
func layoutInsert(t *bench.Target, lr layoutRecords, batch int, next *int64, ctr *bench.WriteCounter) bench.Workload {
	return bench.InsertStream(t, batch, len(lr.tail), func(buf []byte) ([]byte, int64) {
		buf, n := lr.appendWrite(buf, *next, batch)
		*next += int64(batch)
		return buf, n
	}, func(payload int64) bool { return payload < layoutRunBytes }, ctr)
}
