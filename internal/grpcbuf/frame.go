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

// MarshalFrame returns f's bytes in a buffer of Pool (FrameBuffer).
func MarshalFrame(f *Frame) mem.BufferSlice {
	return mem.BufferSlice{FrameBuffer(f)}
}

// FrameBuffer returns f's bytes as one buffer of Pool: its Owned buffer,
// or else a copy of B in a Sized buffer.
func FrameBuffer(f *Frame) mem.Buffer {
	bp := f.Owned
	if bp != nil {
		f.Owned = nil
		*bp = (*bp)[:len(f.B)]
	} else {
		bp = Sized(len(f.B))
		copy(*bp, f.B)
	}
	return mem.NewBuffer(bp, Pool)
}

// Sized returns a buffer of Pool of size bytes, for a message to be
// handed to gRPC with mem.NewBuffer. It takes at least minPooled bytes of
// Pool, so that gRPC, once it has written them, gives them back to Pool: a
// smaller buffer it would leave to the GC, and a small message cost three
// allocations (the bytes, the pointer to them, the interface holding
// them) where a pooled one costs none.
func Sized(size int) *[]byte {
	bp := Pool.Get(max(size, minPooled))
	*bp = (*bp)[:size]
	return bp
}

// Encoded returns m written by appendTo into a Sized buffer of size
// bytes (what m's Size function gave), as gRPC takes a message's bytes:
// one buffer, given back to Pool once gRPC has written it.
func Encoded[M any](m M, size int, appendTo func([]byte, M) []byte) mem.BufferSlice {
	bp := Sized(size)
	*bp = appendTo((*bp)[:0], m)
	return mem.BufferSlice{mem.NewBuffer(bp, Pool)}
}

// minPooled is the smallest of Pool's sizes that mem.NewBuffer makes a
// pooled buffer of (over gRPC's pooling threshold, 1 KiB).
var minPooled = func() int {
	n := 1 << minTierShift
	for mem.IsBelowBufferPoolingThreshold(n) {
		n *= 2
	}
	return n
}()

// UnmarshalFrame copies data into f.
func UnmarshalFrame(data mem.BufferSlice, f *Frame) {
	f.B = f.B[:0]
	for _, b := range data {
		f.B = append(f.B, b.ReadOnlyData()...)
	}
}
