package client

import (
	"fmt"

	"google.golang.org/protobuf/types/known/anypb"

	"github.com/protobase/protobase/internal/record"
)

// applyPatch computes what a Patch of base by patch leaves, with the
// server's own patch code (internal/record), so that a transaction reads
// its own patches exactly as the commit will store them: each path of
// fields takes patch's value (cleared when patch lacks it), each path of
// add has patch's value added to base's (an absent value counts as 0; an
// integer overflow is an error), and everything else base holds stays,
// unknown fields included. What the transaction sends is the patch
// itself. A nil base (no record) stays nil: the commit fails with
// NOT_FOUND.
func (t *Types) applyPatch(base, patch *anypb.Any, fields, add []string) (*anypb.Any, error) {
	if base == nil {
		return nil, nil
	}
	name := typeName(base.GetTypeUrl())
	md, err := t.Descriptor(name)
	if err != nil {
		return nil, err
	}
	rt, err := record.Compile(md)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	p, err := rt.CompilePatch(fields, add, t.keys[name])
	if err != nil {
		return nil, fmt.Errorf("patch of %s: %w", name, err)
	}
	out, err := p.Apply(nil, base.GetValue(), patch.GetValue())
	if err != nil {
		return nil, fmt.Errorf("patch of %s: %w", name, err)
	}
	return &anypb.Any{TypeUrl: base.GetTypeUrl(), Value: out}, nil
}
