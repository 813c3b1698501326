package client

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	pb "github.com/protobase/protobase/gen/protobase/v1"
)

// FormatPosition renders a position as text: "C.I" for change I of commit
// C, or "C" for a whole commit (a write acknowledgement's position, as
// StartAfterCommit takes it). ParsePosition reads both back.
func FormatPosition(p *pb.Position) string {
	if p == nil || p.Index == nil {
		return strconv.FormatUint(p.GetCommit(), 10)
	}
	return strconv.FormatUint(p.GetCommit(), 10) + "." + strconv.FormatUint(uint64(p.GetIndex()), 10)
}

// ParsePosition reads a position written by FormatPosition: "C" (after the
// whole commit C) or "C.I" (after change I of commit C), both decimal; C
// fits 64 bits and I 32.
func ParsePosition(s string) (*pb.Position, error) {
	c, i, dotted := strings.Cut(s, ".")
	commit, err := parseDecimal(c, 64)
	if err != nil {
		return nil, fmt.Errorf("position %q: commit: %w", s, err)
	}
	p := &pb.Position{Commit: commit}
	if !dotted {
		return p, nil
	}
	index, err := parseDecimal(i, 32)
	if err != nil {
		return nil, fmt.Errorf("position %q: index: %w", s, err)
	}
	idx := uint32(index)
	p.Index = &idx
	return p, nil
}

// parseDecimal reads an unsigned decimal number of at most bits bits:
// digits only (no sign, no spaces, no underscores).
func parseDecimal(s string, bits int) (uint64, error) {
	if s == "" {
		return 0, errors.New("want a decimal number, got nothing")
	}
	for _, r := range s {
		if r < '0' || r > '9' {
			return 0, fmt.Errorf("want a decimal number, got %q", s)
		}
	}
	n, err := strconv.ParseUint(s, 10, bits)
	if err != nil {
		return 0, fmt.Errorf("%s does not fit %d bits", s, bits)
	}
	return n, nil
}
