package recvbudget

import (
	"bytes"
	"encoding/binary"
	"math/rand/v2"
	"testing"

	"golang.org/x/net/http2"
)

// script is a generated connection: the client's bytes (preface and
// frames, written by x/net's framer) and, between them, the points where
// the server ends a stream; want is the held bytes after each step,
// computed by brute force from everything each stream received.
type script struct {
	steps []step
}

type step struct {
	client []byte // bytes the client sends, or nil
	end    uint32 // a stream the server ends (trailers or RST_STREAM), when client is nil
	want   int64
}

// model keeps every stream's received DATA bytes whole, and derives what
// is held from them: the body bytes of the last message, if incomplete.
type model struct {
	data map[uint32][]byte // open streams
}

func (m *model) held() int64 {
	var sum int64
	for _, d := range m.data {
		for len(d) >= msgPrefixLen {
			n := int64(binary.BigEndian.Uint32(d[1:5]))
			body := int64(len(d) - msgPrefixLen)
			if body < n {
				sum += body
				break
			}
			d = d[msgPrefixLen+n:]
		}
	}
	return sum
}

// genScript writes a random conversation: streams opened, messages of
// random sizes sent in random DATA frames (some padded, some empty),
// streams ended by either side, frames of other types between.
func genScript(r *rand.Rand) script {
	var s script
	var buf bytes.Buffer
	fr := http2.NewFramer(&buf, nil)
	m := model{data: map[uint32][]byte{}}
	pending := map[uint32][]byte{} // message bytes a stream has still to send
	emit := func() {
		b := bytes.Clone(buf.Bytes())
		buf.Reset()
		s.steps = append(s.steps, step{client: b, want: m.held()})
	}
	buf.WriteString(http2.ClientPreface)
	_ = fr.WriteSettings()
	emit()
	next := uint32(1)
	var open []uint32
	for range 20 + r.IntN(60) {
		switch k := r.IntN(10); {
		case k < 2 || len(open) == 0: // open a stream
			id := next
			next += 2
			_ = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: []byte{0x83}, EndHeaders: true})
			m.data[id] = nil
			open = append(open, id)
			emit()
		case k < 7: // DATA on an open stream
			id := open[r.IntN(len(open))]
			for len(pending[id]) < 64 {
				n := r.IntN(3000)
				if r.IntN(4) == 0 {
					n = r.IntN(3)
				}
				msg := make([]byte, msgPrefixLen+n)
				binary.BigEndian.PutUint32(msg[1:], uint32(n))
				pending[id] = append(pending[id], msg...)
			}
			n := min(len(pending[id]), r.IntN(5000))
			chunk := pending[id][:n]
			pending[id] = pending[id][n:]
			end := r.IntN(8) == 0
			if r.IntN(3) == 0 {
				_ = fr.WriteDataPadded(id, end, chunk, make([]byte, r.IntN(20)))
			} else {
				_ = fr.WriteData(id, end, chunk)
			}
			if d, ok := m.data[id]; ok {
				m.data[id] = append(d, chunk...)
			}
			if end {
				delete(m.data, id)
			}
			emit()
		case k < 8: // the client resets a stream, or sends trailers
			id := open[r.IntN(len(open))]
			if r.IntN(2) == 0 {
				_ = fr.WriteRSTStream(id, http2.ErrCodeCancel)
			} else {
				_ = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: []byte{0x83}, EndHeaders: true, EndStream: true})
			}
			delete(m.data, id)
			emit()
		case k < 9: // the server ends a stream
			id := open[r.IntN(len(open))]
			delete(m.data, id)
			s.steps = append(s.steps, step{end: id, want: m.held()})
		default: // frames that change nothing
			_ = fr.WritePing(false, [8]byte{})
			_ = fr.WriteWindowUpdate(0, 1000)
			emit()
		}
	}
	return s
}

// serverFrames is what a server sends to end stream id: its trailers, or
// a reset.
func serverFrames(id uint32, rst bool) []byte {
	var buf bytes.Buffer
	fr := http2.NewFramer(&buf, nil)
	_ = fr.WriteData(id, false, make([]byte, 40)) // a response message first
	if rst {
		_ = fr.WriteRSTStream(id, http2.ErrCodeCancel)
	} else {
		_ = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: []byte{0x88}, EndHeaders: true, EndStream: true})
	}
	return buf.Bytes()
}

// The parser's accounting matches a brute-force recount after every
// step, however the bytes are cut into reads, and the server's frames
// that end streams are found however its writes are cut.
func TestInboundModel(t *testing.T) {
	for seed := range uint64(300) {
		r := rand.New(rand.NewPCG(seed, 7))
		s := genScript(r)
		in := newInbound()
		var out outbound
		for i, st := range s.steps {
			if st.client != nil {
				feedCut(r, st.client, in.feed)
			} else {
				b := serverFrames(st.end, r.IntN(2) == 0)
				feedCut(r, b, func(p []byte) {
					for len(p) > 0 {
						n, sid, ended := out.scan(p)
						p = p[n:]
						if ended {
							in.end(sid)
						}
					}
				})
			}
			if in.held != st.want {
				t.Fatalf("seed %d step %d: held %d, brute force says %d", seed, i, in.held, st.want)
			}
			checkInvariants(t, &in)
		}
	}
}

// feedCut hands b to feed in random pieces.
func feedCut(r *rand.Rand, b []byte, feed func([]byte)) {
	for len(b) > 0 {
		n := min(len(b), 1+r.IntN(40))
		if r.IntN(4) == 0 {
			n = len(b)
		}
		feed(b[:n])
		b = b[n:]
	}
}

// checkInvariants fails unless held is the sum over the open streams and
// nothing is negative.
func checkInvariants(t *testing.T, in *inbound) {
	t.Helper()
	var sum int64
	for id, st := range in.streams {
		if st.held < 0 || st.body < 0 || st.pn < 0 || st.pn > msgPrefixLen {
			t.Fatalf("stream %d: %+v", id, *st)
		}
		sum += st.held
	}
	if in.held != sum || in.held < 0 {
		t.Fatalf("held %d, streams hold %d", in.held, sum)
	}
}

// Frames on streams never opened, or already ended, hold nothing: grpc-go
// drops them.
func TestInboundUnopenedStreams(t *testing.T) {
	var buf bytes.Buffer
	buf.WriteString(http2.ClientPreface)
	fr := http2.NewFramer(&buf, nil)
	msg := make([]byte, msgPrefixLen+100)
	binary.BigEndian.PutUint32(msg[1:], 1000)
	_ = fr.WriteData(3, false, msg)
	_ = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 5, BlockFragment: []byte{0x83}, EndHeaders: true})
	_ = fr.WriteData(5, false, msg)
	_ = fr.WriteRSTStream(5, http2.ErrCodeCancel)
	_ = fr.WriteData(5, false, msg)
	in := newInbound()
	in.feed(buf.Bytes())
	if in.held != 0 || len(in.streams) != 0 {
		t.Fatalf("held %d on %d streams, want nothing", in.held, len(in.streams))
	}
}

// Steady traffic (open, messages, close) allocates nothing per frame.
func TestInboundAllocs(t *testing.T) {
	var buf bytes.Buffer
	fr := http2.NewFramer(&buf, nil)
	msg := make([]byte, msgPrefixLen+200)
	binary.BigEndian.PutUint32(msg[1:], 200)
	_ = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: []byte{0x83}, EndHeaders: true})
	for range 50 {
		_ = fr.WriteData(1, false, msg)
	}
	_ = fr.WriteRSTStream(1, http2.ErrCodeCancel)
	b := buf.Bytes()
	in := newInbound()
	in.preface = 0
	in.feed(b) // the first stream's state is allocated once
	if a := testing.AllocsPerRun(100, func() { in.feed(b) }); a != 0 {
		t.Fatalf("%v allocations per run, want 0", a)
	}
}

// BenchmarkInbound is the parser's cost on a stream of 16 KiB DATA
// frames carrying 200-byte messages (a Search or Write stream).
func BenchmarkInbound(b *testing.B) {
	var buf bytes.Buffer
	fr := http2.NewFramer(&buf, nil)
	var payload []byte
	for range 79 { // 79 messages of 205 bytes fill a 16 KiB frame
		msg := make([]byte, msgPrefixLen+200)
		binary.BigEndian.PutUint32(msg[1:], 200)
		payload = append(payload, msg...)
	}
	_ = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: []byte{0x83}, EndHeaders: true})
	for range 8 {
		_ = fr.WriteData(1, false, payload)
	}
	p := buf.Bytes()
	in := newInbound()
	in.preface = 0
	b.SetBytes(int64(len(p)))
	b.ReportAllocs()
	for b.Loop() {
		for q := p; len(q) > 0; q = q[min(len(q), 32<<10):] {
			in.feed(q[:min(len(q), 32<<10)])
		}
	}
}
