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
