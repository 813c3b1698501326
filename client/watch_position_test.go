package client_test

import (
	"math"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/protobase/protobase/client"
	pb "github.com/protobase/protobase/gen/protobase/v1"
)

func TestParsePosition(t *testing.T) {
	idx := func(i uint32) *uint32 { return &i }
	good := []struct {
		in   string
		want *pb.Position
	}{
		{"0", &pb.Position{}},
		{"12", &pb.Position{Commit: 12}},
		{"12.0", &pb.Position{Commit: 12, Index: idx(0)}},
		{"12.999", &pb.Position{Commit: 12, Index: idx(999)}},
		{"18446744073709551615.4294967295", &pb.Position{Commit: math.MaxUint64, Index: idx(math.MaxUint32)}},
		{"007.08", &pb.Position{Commit: 7, Index: idx(8)}},
	}
	for _, c := range good {
		got, err := client.ParsePosition(c.in)
		if err != nil || !proto.Equal(got, c.want) {
			t.Errorf("ParsePosition(%q) = %v, %v; want %v", c.in, got, err, c.want)
		}
	}
	bad := []struct{ in, want string }{
		{"", "commit: want a decimal number, got nothing"},
		{".", "commit"},
		{"12.", "index: want a decimal number, got nothing"},
		{".3", "commit"},
		{"1.2.3", "index"},
		{"-1", "commit"},
		{"+1", "commit"},
		{" 1", "commit"},
		{"1 ", "commit"},
		{"1_000", "commit"},
		{"0x10", "commit"},
		{"1e3", "commit"},
		{"18446744073709551616", "does not fit 64 bits"},
		{"1.4294967296", "does not fit 32 bits"},
		{"now", "commit"},
		{"１２", "commit"}, // full-width digits are not decimal digits here
		{"1.\xff", "index"},
	}
	for _, c := range bad {
		if got, err := client.ParsePosition(c.in); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("ParsePosition(%q) = %v, %v; want an error containing %q", c.in, got, err, c.want)
		}
	}
}

func TestFormatPosition(t *testing.T) {
	idx := uint32(3)
	for _, c := range []struct {
		p    *pb.Position
		want string
	}{
		{&pb.Position{Commit: 12}, "12"},
		{&pb.Position{Commit: 12, Index: &idx}, "12.3"},
		{nil, "0"},
	} {
		if got := client.FormatPosition(c.p); got != c.want {
			t.Errorf("FormatPosition(%v) = %q, want %q", c.p, got, c.want)
		}
	}
}

// FuzzParsePosition: no input panics, and whatever parses prints back to
// text that parses to the same position.
func FuzzParsePosition(f *testing.F) {
	for _, s := range []string{"0", "12", "12.3", "18446744073709551615.4294967295", "1.", ".1", "-1", "1..2", "00.00", "9999999999999999999999"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		p, err := client.ParsePosition(s)
		if err != nil {
			return
		}
		text := client.FormatPosition(p)
		q, err := client.ParsePosition(text)
		if err != nil || !proto.Equal(p, q) {
			t.Fatalf("%q parsed to %v, printed as %q, parsed back to %v, %v", s, p, text, q, err)
		}
	})
}
