package record

import (
	"fmt"
	"math"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// patchState is what one Apply learns about the stored bytes and the
// record's at each message level: a slot per entry and per oneof of every
// node. Each node is applied at most once per Apply (occurrences of a
// message are merged before the level below sees them), so the slots are
// never shared.
type patchState struct {
	entries []entryState
	groups  []groupState
}

// entryState is where a named field last occurs on each side.
type entryState struct {
	s, r occurrenceOf
}

type occurrenceOf struct {
	has  bool
	last int // offset of the last occurrence's value
	wt   protowire.Type
}

// groupState is a oneof's live member on each side, and the decision
// Apply takes for it.
type groupState struct {
	s, r liveMember
	keep bool // no live member is named: the stored members stay as they are
	win  int  // the winning entry, index+1
	// useS and useR say whether the stored and the record's occurrences of
	// the winner count.
	useS, useR bool
}

// liveMember is the member of a oneof that occurred last and the offset of
// the first tag of its run: occurrences before it were cleared by another
// member.
type liveMember struct {
	num  protowire.Number
	from int
}

// Apply appends to dst the stored record with the patch applied, rec being
// the record the patch came with, and returns the extended slice. stored
// and rec are read, never modified; they may lie in dst[:len(dst)] but not
// in its spare capacity, which Apply writes (also as scratch for merged
// messages). On error dst is returned as it was: a *PatchError for an add that overflows or a
// required field the patch would clear, an *Error when stored or rec
// cannot be parsed (Offset is then within the message being patched at
// that level).
func (p *Patch) Apply(dst, stored, rec []byte) ([]byte, error) {
	st := p.pool.Get().(*patchState)
	defer p.pool.Put(st)
	n := len(dst)
	out, err := p.root.apply(dst, stored, rec, st)
	if err != nil {
		return dst[:n], err
	}
	return out, nil
}

// apply patches one message level: s holds the stored fields, r the
// record's.
func (n *patchNode) apply(dst, s, r []byte, st *patchState) ([]byte, error) {
	for i := range n.entries {
		st.entries[n.entries[i].state] = entryState{}
	}
	for i := range n.groups {
		st.groups[n.groups[i].state] = groupState{}
	}
	if err := n.scan(s, st, false); err != nil {
		return dst, err
	}
	if err := n.scan(r, st, true); err != nil {
		return dst, err
	}
	n.decide(st)
	dst = n.copyKept(dst, s, st)
	dst, err := n.appendSets(dst, r, st)
	if err != nil {
		return dst, err
	}
	for i := range n.entries {
		e := &n.entries[i]
		switch e.op {
		case patchAdd:
			dst, err = n.appendSum(dst, e, s, r, st)
		case patchInner:
			dst, err = n.appendMerged(dst, e, s, r, st)
		}
		if err != nil {
			return dst, err
		}
	}
	return dst, nil
}

// fieldAt reads the field whose tag starts at b[i]: its number, wire type,
// where its value starts and where it ends.
func fieldAt(b []byte, i int) (num protowire.Number, wt protowire.Type, val, end int, err *Error) {
	num, wt, k, err := readTag(b[i:], i)
	if err != nil {
		return 0, 0, 0, 0, err
	}
	m, reason := skipField(num, wt, b[i+k:])
	if reason != "" {
		return 0, 0, 0, 0, &Error{Number: num, Offset: i, Reason: reason}
	}
	return num, wt, i + k, i + k + m, nil
}

// scan notes, for one side, where each named field last occurs and which
// member of each oneof is live.
func (n *patchNode) scan(b []byte, st *patchState, rec bool) *Error {
	for i := 0; i < len(b); {
		num, wt, val, end, err := fieldAt(b, i)
		if err != nil {
			return err
		}
		sl := n.slot(num)
		if sl.group != 0 {
			gs := &st.groups[n.groups[sl.group-1].state]
			m := &gs.s
			if rec {
				m = &gs.r
			}
			if m.num != num {
				*m = liveMember{num: num, from: i}
			}
		}
		if sl.entry != 0 {
			es := &st.entries[n.entries[sl.entry-1].state]
			o := &es.s
			if rec {
				o = &es.r
			}
			*o = occurrenceOf{has: true, last: val, wt: wt}
		}
		i = end
	}
	return nil
}

// decide settles each oneof: the record's live member wins when the patch
// names it; else a named member the stored record holds is the one the
// patch acts on, with nothing from the record; else the oneof is kept.
func (n *patchNode) decide(st *patchState) {
	for g := range n.groups {
		gs := &st.groups[n.groups[g].state]
		if e := n.named(gs.r.num); e != 0 {
			gs.win, gs.useR, gs.useS = e, true, gs.s.num == gs.r.num
			continue
		}
		if e := n.named(gs.s.num); e != 0 {
			gs.win, gs.useS = e, true
			continue
		}
		gs.keep = true
	}
}

// named returns the entry (index+1) the node has for field num, or 0.
func (n *patchNode) named(num protowire.Number) int {
	if num == 0 {
		return 0
	}
	return int(n.slot(num).entry)
}

// sides says whether entry e is acted on and which sides count for it:
// whether the stored and the record's occurrences are used, and from which
// offsets (a oneof member's occurrences before its live run are dead).
func (n *patchNode) sides(e *patchEntry, st *patchState) (on, useS, useR bool, sFrom, rFrom int) {
	es := &st.entries[e.state]
	if e.group < 0 {
		return true, es.s.has, es.r.has, 0, 0
	}
	gs := &st.groups[n.groups[e.group].state]
	if gs.keep || &n.entries[gs.win-1] != e {
		return false, false, false, 0, 0
	}
	return true, gs.useS && es.s.has, gs.useR && es.r.has, gs.s.from, gs.r.from
}

// cut reports whether the stored occurrence of field num is replaced.
func (n *patchNode) cut(num protowire.Number, st *patchState) bool {
	sl := n.slot(num)
	if sl.group != 0 {
		return !st.groups[n.groups[sl.group-1].state].keep
	}
	return sl.entry != 0
}

// copyKept appends the stored fields the patch does not replace, verbatim
// and in order. s has been scanned: it parses.
func (n *patchNode) copyKept(dst, s []byte, st *patchState) []byte {
	run := 0 // start of the run of kept fields not yet copied
	for i := 0; i < len(s); {
		num, _, _, end, _ := fieldAt(s, i)
		if n.cut(num, st) {
			dst = append(dst, s[run:i]...)
			run = end
		}
		i = end
	}
	return append(dst, s[run:]...)
}

// appendSets appends the record's occurrences of the fields it sets, in
// the record's order. A required field the record lacks would leave the
// message invalid: that is an error.
func (n *patchNode) appendSets(dst, r []byte, st *patchState) ([]byte, error) {
	for i := range n.entries {
		e := &n.entries[i]
		if e.op != patchSet || !e.required {
			continue
		}
		if on, _, useR, _, _ := n.sides(e, st); on && !useR {
			return dst, &PatchError{Field: e.path, Reason: "a required field: the patch's record lacks it, and a patch cannot clear it"}
		}
	}
	for i := 0; i < len(r); {
		num, _, _, end, _ := fieldAt(r, i)
		if sl := n.slot(num); sl.entry != 0 {
			e := &n.entries[sl.entry-1]
			if on, _, useR, _, rFrom := n.sides(e, st); e.op == patchSet && on && useR && i >= rFrom {
				dst = append(dst, r[i:end]...)
			}
		}
		i = end
	}
	return dst, nil
}

// appendSum appends field e holding the stored value plus the record's. A
// field that tracks presence is written when either side holds it, one
// that does not when the sum is not zero, as proto.Marshal would.
func (n *patchNode) appendSum(dst []byte, e *patchEntry, s, r []byte, st *patchState) ([]byte, error) {
	on, useS, useR, _, _ := n.sides(e, st)
	if !on || (!useS && !useR) {
		return dst, nil
	}
	es := &st.entries[e.state]
	a, b := Scalar{Kind: e.kind}, Scalar{Kind: e.kind}
	var reason string
	if useS {
		if a, _, reason = decodeScalar(&e.step, es.s.wt, s[es.s.last:]); reason != "" {
			return dst, &Error{Field: e.path, Number: e.num, Offset: es.s.last, Reason: reason}
		}
	}
	if useR {
		if b, _, reason = decodeScalar(&e.step, es.r.wt, r[es.r.last:]); reason != "" {
			return dst, &Error{Field: e.path, Number: e.num, Offset: es.r.last, Reason: reason}
		}
	}
	sum, err := addScalars(e, a, b)
	if err != nil {
		return dst, err
	}
	if !e.presence && sum.Int == 0 && sum.Uint == 0 && math.Float64bits(sum.Float) == 0 {
		return dst, nil
	}
	return appendNumber(protowire.AppendTag(dst, e.num, e.wt), sum), nil
}

// addScalars adds two values of e's kind in the kind's own width.
func addScalars(e *patchEntry, a, b Scalar) (Scalar, error) {
	s := Scalar{Kind: e.kind}
	var lo, hi int64
	switch e.kind {
	case protoreflect.FloatKind:
		s.Float = float64(float32(a.Float) + float32(b.Float))
		return s, nil
	case protoreflect.DoubleKind:
		s.Float = a.Float + b.Float
		return s, nil
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind:
		s.Uint = a.Uint + b.Uint // both below 2^32: no wrap
		if s.Uint > math.MaxUint32 {
			return s, overflow(e, a, b)
		}
		return s, nil
	case protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		s.Uint = a.Uint + b.Uint
		if s.Uint < a.Uint {
			return s, overflow(e, a, b)
		}
		return s, nil
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind:
		lo, hi = math.MinInt32, math.MaxInt32
	default: // the 64-bit signed kinds
		lo, hi = math.MinInt64, math.MaxInt64
	}
	s.Int = a.Int + b.Int
	if (b.Int > 0 && s.Int < a.Int) || (b.Int < 0 && s.Int > a.Int) || s.Int < lo || s.Int > hi {
		return s, overflow(e, a, b)
	}
	return s, nil
}

func overflow(e *patchEntry, a, b Scalar) *PatchError {
	x, y := fmt.Sprint(a.Int), fmt.Sprint(b.Int)
	if a.Uint != 0 || b.Uint != 0 {
		x, y = fmt.Sprint(a.Uint), fmt.Sprint(b.Uint)
	}
	return &PatchError{Field: e.path, Overflow: true,
		Reason: fmt.Sprintf("adding %s to %s overflows %v", y, x, e.kind)}
}

// appendNumber appends the value of a numeric scalar as proto.Marshal
// encodes it.
func appendNumber(dst []byte, v Scalar) []byte {
	switch v.Kind {
	case protoreflect.Int32Kind, protoreflect.Int64Kind:
		return protowire.AppendVarint(dst, uint64(v.Int))
	case protoreflect.Sint32Kind, protoreflect.Sint64Kind:
		return protowire.AppendVarint(dst, protowire.EncodeZigZag(v.Int))
	case protoreflect.Uint32Kind, protoreflect.Uint64Kind:
		return protowire.AppendVarint(dst, v.Uint)
	case protoreflect.Fixed32Kind:
		return protowire.AppendFixed32(dst, uint32(v.Uint))
	case protoreflect.Sfixed32Kind:
		return protowire.AppendFixed32(dst, uint32(int32(v.Int)))
	case protoreflect.Fixed64Kind:
		return protowire.AppendFixed64(dst, v.Uint)
	case protoreflect.Sfixed64Kind:
		return protowire.AppendFixed64(dst, uint64(v.Int))
	case protoreflect.FloatKind:
		return protowire.AppendFixed32(dst, math.Float32bits(float32(v.Float)))
	}
	return protowire.AppendFixed64(dst, math.Float64bits(v.Float))
}

// appendMerged appends message field e patched by the level below: the
// stored occurrences merged, then the record's, each side's concatenated
// in dst's spare room (a decoder merges occurrences of a message the same
// way), the level below's result after them, and finally the field's tag
// and new length moved in front of that result over the scratch.
func (n *patchNode) appendMerged(dst []byte, e *patchEntry, s, r []byte, st *patchState) ([]byte, error) {
	on, useS, useR, sFrom, rFrom := n.sides(e, st)
	if !on || (!useS && !useR) {
		return dst, nil
	}
	base := len(dst)
	var err *Error
	if useS {
		if dst, err = appendPayloads(dst, e, s, sFrom); err != nil {
			return dst[:base], err
		}
	}
	sEnd := len(dst)
	if useR {
		if dst, err = appendPayloads(dst, e, r, rFrom); err != nil {
			return dst[:base], err
		}
	}
	rEnd := len(dst)
	// The level below appends after the scratch and never writes below
	// rEnd, so its inputs stay intact even when dst grows.
	out, perr := e.child.apply(dst, dst[base:sEnd], dst[sEnd:rEnd], st)
	if perr != nil {
		return dst[:base], perr
	}
	// The tag (at most 5 bytes) and the length (at most 10).
	var hdr [15]byte
	h := protowire.AppendTag(hdr[:0], e.num, e.wt)
	content := len(out) - rEnd
	size := content
	if e.class == classGroup {
		size += protowire.SizeTag(e.num) // the end-group tag
	} else {
		h = protowire.AppendVarint(h, uint64(size))
	}
	end := base + len(h) + size
	if end > len(out) {
		out = append(out, make([]byte, end-len(out))...)
	}
	copy(out[base+len(h):], out[rEnd:rEnd+content]) // overlapping: copy moves
	copy(out[base:], h)
	if e.class == classGroup {
		protowire.AppendTag(out[:base+len(h)+content], e.num, protowire.EndGroupType)
	}
	return out[:end], nil
}

// appendPayloads appends the content of every occurrence of message field
// e in b at or after offset from.
func appendPayloads(dst []byte, e *patchEntry, b []byte, from int) ([]byte, *Error) {
	for i := from; i < len(b); {
		num, wt, val, end, err := fieldAt(b, i)
		if err != nil {
			return dst, err
		}
		if num == e.num {
			payload, _, _, reason := e.messagePayload(wt, b[val:])
			if reason != "" {
				return dst, &Error{Field: e.path, Number: e.num, Offset: i, Reason: reason}
			}
			dst = append(dst, payload...)
		}
		i = end
	}
	return dst, nil
}
