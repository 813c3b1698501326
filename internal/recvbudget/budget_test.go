package recvbudget

import (
	"bytes"
	"encoding/binary"
	"errors"
	"net"
	"testing"

	"golang.org/x/net/http2"
)

// peer is one client connection through a Budget's listener, with the
// server side read by the test itself.
type peer struct {
	client net.Conn
	server net.Conn // the accounted side
	fr     *http2.Framer
	buf    bytes.Buffer
}

func dialPeer(t *testing.T, lis net.Listener) *peer {
	t.Helper()
	c, err := net.Dial("tcp", lis.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	s, err := lis.Accept()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(); s.Close() })
	p := &peer{client: c, server: s}
	p.fr = http2.NewFramer(&p.buf, nil)
	p.buf.WriteString(http2.ClientPreface)
	return p
}

// partial sends, on a new stream id, a message declared n bytes long of
// which sent arrive, and returns once the server side has read them all
// (or its read failed: the error).
func (p *peer) partial(t *testing.T, id uint32, n, sent int) error {
	t.Helper()
	_ = p.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: []byte{0x83}, EndHeaders: true})
	msg := make([]byte, msgPrefixLen+sent)
	binary.BigEndian.PutUint32(msg[1:], uint32(n))
	_ = p.fr.WriteData(id, false, msg)
	return p.flush(t)
}

// flush sends what the framer wrote and reads it on the server side.
func (p *peer) flush(t *testing.T) error {
	t.Helper()
	want := p.buf.Len()
	if _, err := p.client.Write(p.buf.Bytes()); err != nil {
		return err // the server closed the connection
	}
	p.buf.Reset()
	b := make([]byte, want)
	for got := 0; got < want; {
		n, err := p.server.Read(b[got:])
		if err != nil {
			return err
		}
		got += n
	}
	return nil
}

// A connection over its share is closed; when the total goes over the
// limit the largest holder is closed, not the one that pushed it over;
// a stream the server ends, or a connection closed, gives its bytes back.
func TestBudgetCuts(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	b := New(Options{Limit: 1500, Share: 1000})
	lis := b.Listener(l)

	big, small, greedy := dialPeer(t, lis), dialPeer(t, lis), dialPeer(t, lis)
	if err := big.partial(t, 1, 5000, 900); err != nil {
		t.Fatal(err)
	}
	if err := small.partial(t, 1, 5000, 300); err != nil {
		t.Fatal(err)
	}
	if got := b.Held(); got != 1200 {
		t.Fatalf("held %d, want 1200", got)
	}
	// Over its share: cut, and the others keep theirs.
	if err := greedy.partial(t, 1, 5000, 1001); !errors.Is(err, errCut) {
		t.Fatalf("a connection over its share read %v, want it cut", err)
	}
	if got := b.Held(); got != 1200 {
		t.Fatalf("held %d after the greedy connection was cut, want 1200", got)
	}
	// small pushes the total over 1500: big, the largest holder, goes.
	if err := small.partial(t, 3, 5000, 400); err != nil {
		t.Fatalf("a client holding less than the largest was cut: %v", err)
	}
	if err := big.partial(t, 3, 5000, 10); err == nil {
		t.Fatal("the largest holder was not closed")
	}
	if got := b.Held(); got != 700 {
		t.Fatalf("held %d after the largest holder was cut, want small's 700", got)
	}
	if s, o := b.Closed(); s != 1 || o != 1 {
		t.Fatalf("closed %d for their share and %d for the budget, want 1 and 1", s, o)
	}
	// The server's trailers on stream 3 give its 600 bytes back.
	var out bytes.Buffer
	fr := http2.NewFramer(&out, nil)
	_ = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 3, BlockFragment: []byte{0x88}, EndHeaders: true, EndStream: true})
	go func() { _, _ = small.client.Read(make([]byte, out.Len())) }()
	if _, err := small.server.Write(out.Bytes()); err != nil {
		t.Fatal(err)
	}
	if got := b.Held(); got != 300 {
		t.Fatalf("held %d after the server ended a stream, want 300", got)
	}
	small.server.Close()
	if got, n := b.Held(), b.Conns(); got != 0 || n != 2 {
		t.Fatalf("held %d on %d connections after closing, want 0 on 2 (big and greedy are closed by their reader)", got, n)
	}
}

// BenchmarkConnRead compares reading a client's HTTP/2 stream of 1 KiB
// messages in 16 KiB DATA frames over loopback TCP, plain and accounted,
// in one run (-bench ConnRead): the budget's cost on the read path.
func BenchmarkConnRead(b *testing.B) {
	var buf bytes.Buffer
	fr := http2.NewFramer(&buf, nil)
	var payload []byte
	for range 15 { // 15 messages of 1,029 bytes fit a 16 KiB frame
		msg := make([]byte, msgPrefixLen+1024)
		binary.BigEndian.PutUint32(msg[1:], 1024)
		payload = append(payload, msg...)
	}
	_ = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: []byte{0x83}, EndHeaders: true})
	head := bytes.Clone(buf.Bytes())
	buf.Reset()
	for range 64 {
		_ = fr.WriteData(1, false, payload)
	}
	chunk := buf.Bytes() // about 1 MiB
	for _, accounted := range []bool{false, true} {
		name := "plain"
		if accounted {
			name = "budget"
		}
		b.Run(name, func(b *testing.B) {
			l, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				b.Fatal(err)
			}
			defer l.Close()
			lis := l
			if accounted {
				lis = New(Options{Limit: 1 << 30, Share: 1 << 30}).Listener(l)
			}
			c, err := net.Dial("tcp", l.Addr().String())
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			s, err := lis.Accept()
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			go func() {
				_, _ = c.Write(append([]byte(http2.ClientPreface), head...))
				for {
					if _, err := c.Write(chunk); err != nil {
						return
					}
				}
			}()
			want := int64(len(http2.ClientPreface) + len(head))
			rb := make([]byte, 32<<10)
			b.SetBytes(int64(len(chunk)))
			b.ResetTimer()
			var got int64
			for range b.N {
				want += int64(len(chunk))
				for got < want {
					n, err := s.Read(rb[:min(int64(len(rb)), want-got)])
					if err != nil {
						b.Fatal(err)
					}
					got += int64(n)
				}
			}
		})
	}
}
