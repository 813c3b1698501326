package recvbudget

import (
	"bytes"
	"encoding/binary"
	"math/rand/v2"
	"testing"

	"golang.org/x/net/http2"
)

// FuzzConn feeds arbitrary bytes as what a client sends and what the
// server sends on one connection, cut into reads and writes of the given
// size: the parsers never panic, the accounting is never negative and
// always the sum over the open streams, and once every stream has ended
// nothing is held. Seeds: testdata/fuzz/FuzzConn and a generated
// conversation.
func FuzzConn(f *testing.F) {
	s := genScript(rand.New(rand.NewPCG(1, 2)))
	var client []byte
	for _, st := range s.steps {
		client = append(client, st.client...)
		if len(client) > 4096 {
			break
		}
	}
	f.Add(client, serverFrames(1, false), uint8(7))
	f.Add(seedPartial(), serverFrames(1, true), uint8(0))
	f.Fuzz(func(t *testing.T, client, server []byte, cut uint8) {
		in := newInbound()
		var out outbound
		step := int(cut) + 1
		for len(client) > 0 || len(server) > 0 {
			if n := min(len(client), step); n > 0 {
				in.feed(client[:n])
				client = client[n:]
			}
			for p := server[:min(len(server), step)]; len(p) > 0; {
				n, sid, ended := out.scan(p)
				if n <= 0 {
					t.Fatalf("outbound scan made no progress on %d bytes", len(p))
				}
				p = p[n:]
				if ended {
					in.end(sid)
				}
			}
			server = server[min(len(server), step):]
			checkInvariants(t, &in)
		}
		for sid := range in.streams {
			in.end(sid)
		}
		if in.held != 0 || len(in.streams) != 0 {
			t.Fatalf("held %d on %d streams after every stream ended", in.held, len(in.streams))
		}
	})
}

// seedPartial is a client that opens a stream and sends part of a
// message declared 64 MiB long, in a padded frame.
func seedPartial() []byte {
	var buf bytes.Buffer
	buf.WriteString(http2.ClientPreface)
	fr := http2.NewFramer(&buf, nil)
	_ = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: []byte{0x83}, EndHeaders: true})
	msg := make([]byte, msgPrefixLen+100)
	binary.BigEndian.PutUint32(msg[1:], 64<<20)
	_ = fr.WriteDataPadded(1, false, msg, make([]byte, 3))
	return buf.Bytes()
}
