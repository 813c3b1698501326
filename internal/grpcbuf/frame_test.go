package grpcbuf

import (
	"bytes"
	"testing"

	"google.golang.org/grpc/mem"
)

// A frame crosses a codec as the same bytes, however the transport cut
// them, and the marshalled copy does not alias the frame.
func TestFrameRoundTrip(t *testing.T) {
	want := []byte("some encoded message bytes")
	data := mem.BufferSlice{mem.SliceBuffer(want[:5]), mem.SliceBuffer(want[5:])}
	f := Frame{B: []byte("left over from an earlier message, longer")}
	UnmarshalFrame(data, &f)
	if !bytes.Equal(f.B, want) {
		t.Fatalf("unmarshalled %q", f.B)
	}
	out := MarshalFrame(&f)
	f.B[0] = 'X'
	if got := out.Materialize(); !bytes.Equal(got, want) {
		t.Fatalf("marshalled %q", got)
	}
	out.Free()
}

// A frame that owns its buffer hands that very buffer to gRPC, holding
// the frame's bytes, and no longer owns it.
func TestFrameOwned(t *testing.T) {
	bp := Pool.Get(4096)
	*bp = append((*bp)[:0], "a response"...)
	b := *bp
	f := Frame{B: b, Owned: bp}
	out := MarshalFrame(&f)
	if f.Owned != nil {
		t.Fatal("the frame still owns its buffer")
	}
	if len(out) != 1 || !bytes.Equal(out[0].ReadOnlyData(), []byte("a response")) {
		t.Fatalf("marshalled %q", out.Materialize())
	}
	if &out[0].ReadOnlyData()[0] != &b[0] {
		t.Fatal("the owned buffer was copied")
	}
	out.Free()
}

// A small frame's copy is a buffer of Pool that gRPC gives back once it
// has written it, not a slice left to the GC: marshalling one allocates
// only the slice that holds the buffer.
func TestFrameSmallCopyPooled(t *testing.T) {
	f := Frame{B: make([]byte, 150)}
	allocs := testing.AllocsPerRun(100, func() {
		out := MarshalFrame(&f)
		if out.Len() != 150 {
			t.Fatalf("marshalled %d bytes", out.Len())
		}
		out.Free()
	})
	if allocs > 1 {
		t.Fatalf("%v allocations to marshal a frame of 150 bytes, want 1", allocs)
	}
}
