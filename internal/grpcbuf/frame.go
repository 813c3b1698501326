package grpcbuf

import "google.golang.org/grpc/mem"

// Frame is a message kept as its encoded bytes: a codec that knows it
// (the server's, the lab's raw one) passes it through without protobuf,
// for handlers that read and write the wire format themselves.
type Frame struct {
	// B is the message's bytes. Unmarshal overwrites it, reusing its
	// capacity; Marshal copies it, so the caller may reuse it once
	// SendMsg returns, unless Owned is set.
	B []byte
	// Owned, when set, is a buffer of Pool whose start is B, handed over
	// with the frame: Marshal gives it to gRPC as it is, without a copy,
	// and gRPC puts it back in Pool once written. The sender must not
	// touch it once SendMsg is called, whatever SendMsg returns (a frame
	// that never reaches Marshal leaves it to the GC).
	Owned *[]byte
}

// MarshalFrame returns f's bytes in a buffer of Pool: its Owned buffer,
// or else a copy of B.
func MarshalFrame(f *Frame) mem.BufferSlice {
	if bp := f.Owned; bp != nil {
		f.Owned = nil
		*bp = (*bp)[:len(f.B)]
		return mem.BufferSlice{mem.NewBuffer(bp, Pool)}
	}
	bp := Pool.Get(len(f.B))
	copy(*bp, f.B)
	return mem.BufferSlice{mem.NewBuffer(bp, Pool)}
}

// UnmarshalFrame copies data into f.
func UnmarshalFrame(data mem.BufferSlice, f *Frame) {
	f.B = f.B[:0]
	for _, b := range data {
		f.B = append(f.B, b.ReadOnlyData()...)
	}
}
