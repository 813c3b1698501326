package grpcbuf

import "google.golang.org/grpc/mem"

// Held is a message sent together with something to give back once gRPC
// no longer holds the message's bytes: a codec that knows it (the
// server's) marshals Msg and appends an empty release buffer whose pool is
// Pool (Append, With), so that when gRPC frees the message's buffers — it
// has written them to the connection, or dropped them with the stream —
// and so the release buffer after them, Pool.Put runs (with a pointer to
// an empty slice).
type Held struct {
	Msg  any
	Pool mem.BufferPool
	// rel and bufs are Append's: the release buffer's data and the
	// marshalled message's buffers, in the Held, which is allocated
	// anyway, rather than in allocations of their own per message.
	rel  []byte
	bufs [2]mem.Buffer
}

// releaseData backs every release buffer: an empty slice whose capacity
// is over grpc-go's pooling threshold (1 KiB), so that mem.NewBuffer makes a
// reference-counted buffer that calls its pool's Put when freed, not a
// plain slice. Its bytes are never read or written.
var releaseData = make([]byte, 0, 4<<10)

// Append returns out, h.Msg marshalled, followed by h's release buffer
// (see Held); a message of one buffer goes out in h's own slice
// (With). Append or With is called once per Held.
func (h *Held) Append(out mem.BufferSlice) mem.BufferSlice {
	if len(out) == 1 {
		return h.With(out[0])
	}
	return append(out, h.releaser())
}

// With returns b, h.Msg marshalled into one buffer (as a frame or a
// message encoded by hand is), followed by h's release buffer, in h's own
// slice.
func (h *Held) With(b mem.Buffer) mem.BufferSlice {
	h.bufs = [2]mem.Buffer{b, h.releaser()}
	return h.bufs[:]
}

func (h *Held) releaser() mem.Buffer {
	h.rel = releaseData
	return mem.NewBuffer(&h.rel, h.Pool)
}
