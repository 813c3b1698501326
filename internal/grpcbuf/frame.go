package grpcbuf

import "google.golang.org/grpc/mem"

// Frame is a message kept as its encoded bytes: a codec that knows it
// (the server's, the lab's raw one) passes it through without protobuf,
// for handlers that read and write the wire format themselves.
type Frame struct {
	// B is the message's bytes. Unmarshal overwrites it, reusing its
	// capacity; Marshal copies it, so the caller may reuse it once
	// SendMsg returns.
	B []byte
}

// MarshalFrame copies f into a buffer of Pool.
func MarshalFrame(f *Frame) mem.BufferSlice {
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
