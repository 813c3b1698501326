package engine

import (
	"time"
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protowire"

	pb "github.com/protobase/protobase/gen/protobase/v1"
	"github.com/protobase/protobase/internal/apiwire"
)

// A request of plain primary-key lookups can be run from its wire bytes
// (SearchIO.RecvWire): each query's key is encoded straight from the
// bytes of its type, field and operand, with no Query, Expr, Comparison
// or Value message decoded and then read back (a sixth of the server's CPU
// on batched lookups). wirePoints accepts only bytes in the one shape it
// knows, every field at most once and well formed, strings valid UTF-8, so
// that proto.Unmarshal would decode them without error into queries that
// lookupOrder takes as the same lookups (FuzzWirePoints checks both);
// anything else is decoded as before, and gets the errors it got before.

// The tags wirePoints reads most, as bytes.
const (
	tagReqQueries = byte(apiwire.SearchRequestQueries)<<3 | byte(protowire.BytesType)
	tagWireInt    = byte(apiwire.ValueInt)<<3 | byte(protowire.VarintType)
)

// wirePoints reports whether SearchRequest bytes b hold only plain
// primary-key lookups; when they do, buf holds them as allPoints leaves
// them (ready, in lookup order), their query positions in request order.
func (e *Engine) wirePoints(b []byte, buf *lookupBuf, limit int) bool {
	buf.ready = false
	if e.closed.Load() {
		return false
	}
	cat := e.cat.Load()
	arena := buf.arena[:0]
	ends := buf.ends[:0]
	points := buf.points[:0]
	defer func() { buf.arena, buf.ends, buf.points = arena, ends, points }()
	// The queries of a batch are mostly one query with another operand:
	// a shape is a query read in full, and a query equal to it but for
	// the operand (the Value's content, vs to ve, of equal length) has
	// only its operand read, which is what a full read would find
	// different. Operands of different lengths (ids of one, two and
	// three bytes) make different shapes: the last few are kept.
	var shapes [4]wireShape
	var nShapes, oldest int
	for i := 0; len(b) > 0; i++ {
		if limit > 0 && i == limit {
			return false // over the limit: decode and refuse it
		}
		var qb []byte
		if len(b) >= 2 && b[0] == tagReqQueries && b[1] < 0x80 && int(b[1]) <= len(b)-2 {
			qb, b = b[2:2+b[1]], b[2+b[1]:] // a query under 128 bytes: most are
		} else {
			num, typ, l := protowire.ConsumeTag(b)
			if l < 0 || num != apiwire.SearchRequestQueries || typ != protowire.BytesType {
				return false
			}
			var m int
			if qb, m = protowire.ConsumeBytes(b[l:]); m < 0 {
				return false
			}
			b = b[l+m:]
		}
		var sh *wireShape
		for k := range nShapes {
			if shapes[k].matches(qb) {
				sh = &shapes[k]
				break
			}
		}
		if sh != nil {
			if !readWireValue(qb[sh.vs:sh.ve], &sh.w) {
				return false
			}
		} else {
			if nShapes < len(shapes) {
				sh = &shapes[nShapes]
				nShapes++
			} else {
				sh = &shapes[oldest]
				oldest = (oldest + 1) % len(shapes)
			}
			if !sh.read(qb, cat) {
				return false
			}
		}
		w, last := &sh.w, sh.t
		if last == nil || last.point == nil {
			return false
		}
		var ok bool
		if arena, ok = last.point.KeyWire(arena, w.field, w.num, w.x, w.s); !ok {
			return false
		}
		points = append(points, pointJob{i: i, t: last, count: w.count, keysOnly: w.keysOnly})
		ends = append(ends, len(arena))
	}
	if len(points) == 0 {
		return false // an empty request: nothing to gain
	}
	e.keyPoints(points, arena, ends)
	buf.ready = true
	return true
}

// wireShape is a query wirePoints read in full: its bytes, where its
// operand lies in them, what it read, and its record type.
type wireShape struct {
	b      []byte
	vs, ve int
	w      wireQuery
	t      *recType
}

// matches reports whether qb is the shape's query but for its operand.
func (sh *wireShape) matches(qb []byte) bool {
	return len(qb) == len(sh.b) && string(qb[:sh.vs]) == string(sh.b[:sh.vs]) && string(qb[sh.ve:]) == string(sh.b[sh.ve:])
}

// read reads query qb in full into the shape.
func (sh *wireShape) read(qb []byte, cat *catalog) bool {
	sh.w = wireQuery{}
	if !readWireQuery(qb, &sh.w) {
		return false
	}
	sh.b = qb
	sh.ve = len(qb) - sh.w.afterWhere - sh.w.afterValue
	sh.vs = sh.ve - sh.w.valueLen
	sh.t = cat.lookup(string(sh.w.typ))
	return true
}

// wireQuery is a plain lookup read from a Query's bytes.
type wireQuery struct {
	typ, field      []byte
	num             protowire.Number // the operand's Value field
	x               uint64           // a varint operand
	s               []byte           // a string or bytes operand
	count, keysOnly bool
	// Where the operand lies: its Value's content is valueLen bytes,
	// followed by afterValue bytes of the comparison and afterWhere
	// bytes of the query.
	valueLen, afterValue, afterWhere int
}

// readWireQuery reads Query bytes b of the shape wirePoints takes into w.
func readWireQuery(b []byte, w *wireQuery) bool {
	var seen uint8
	hasWhere := false
	for len(b) > 0 {
		num, typ, l := protowire.ConsumeTag(b)
		if l < 0 || num < 1 || num > 7 || seen&(1<<num) != 0 {
			return false
		}
		seen |= 1 << num
		b = b[l:]
		var m int
		switch {
		case num == apiwire.QueryType && typ == protowire.BytesType:
			w.typ, m = protowire.ConsumeBytes(b)
			if m >= 0 && !utf8.Valid(w.typ) {
				return false
			}
		case num == apiwire.QueryWhere && typ == protowire.BytesType:
			var eb []byte
			if eb, m = protowire.ConsumeBytes(b); m >= 0 && !readWireWhere(eb, w) {
				return false
			}
			w.afterWhere = len(b) - m
			hasWhere = true
		case typ == protowire.VarintType && (num == apiwire.QueryLimit || num == apiwire.QueryKeysOnly || num == apiwire.QueryCount):
			var x uint64
			x, m = protowire.ConsumeVarint(b)
			switch num {
			case apiwire.QueryKeysOnly:
				w.keysOnly = x != 0
			case apiwire.QueryCount:
				w.count = x != 0
			}
		default:
			return false // order, explain, filter, anything unexpected
		}
		if m < 0 {
			return false
		}
		b = b[m:]
	}
	return hasWhere
}

// readWireWhere reads an Expr holding one EQ comparison with one scalar
// operand into w.
func readWireWhere(b []byte, w *wireQuery) bool {
	num, typ, l := protowire.ConsumeTag(b)
	if l < 0 || num != apiwire.ExprCmp || typ != protowire.BytesType {
		return false
	}
	cb, m := protowire.ConsumeBytes(b[l:])
	if m < 0 || l+m != len(b) {
		return false
	}
	var seen uint8
	for len(cb) > 0 {
		num, typ, l := protowire.ConsumeTag(cb)
		if l < 0 || num < 1 || num > 3 || seen&(1<<num) != 0 {
			return false
		}
		seen |= 1 << num
		cb = cb[l:]
		var m int
		switch {
		case num == apiwire.ComparisonField && typ == protowire.BytesType:
			w.field, m = protowire.ConsumeBytes(cb)
			if m >= 0 && !utf8.Valid(w.field) {
				return false
			}
		case num == apiwire.ComparisonOp && typ == protowire.VarintType:
			var x uint64
			x, m = protowire.ConsumeVarint(cb)
			if m >= 0 && pb.Op(int32(x)) != pb.Op_OP_EQ { //nolint:gosec // enums are int32 on the wire; protobuf truncates the same way
				return false
			}
		case num == apiwire.ComparisonValue && typ == protowire.BytesType:
			var vb []byte
			if vb, m = protowire.ConsumeBytes(cb); m >= 0 && !readWireValue(vb, w) {
				return false
			}
			w.valueLen, w.afterValue = len(vb), len(cb)-m
		default:
			return false
		}
		if m < 0 {
			return false
		}
		cb = cb[m:]
	}
	return seen == 1<<apiwire.ComparisonField|1<<apiwire.ComparisonOp|1<<apiwire.ComparisonValue
}

// readWireValue reads a Value holding one scalar into w.
func readWireValue(b []byte, w *wireQuery) bool {
	if len(b) >= 2 && b[0] == tagWireInt && b[len(b)-1] < 0x80 && len(b) <= 10 {
		// An int64 operand of at most 9 bytes (ids under 2^63 take at
		// most 9): what ConsumeVarint would read, without the call.
		w.num = apiwire.ValueInt
		var x uint64
		for i, c := range b[1:] {
			x |= uint64(c&0x7f) << (7 * i)
			if c < 0x80 {
				if i != len(b)-2 {
					return false // bytes after the varint
				}
				w.x = x
				return true
			}
		}
		return false
	}
	num, typ, l := protowire.ConsumeTag(b)
	if l < 0 {
		return false
	}
	b = b[l:]
	w.num = num
	switch {
	case typ == protowire.VarintType && (num == apiwire.ValueInt || num == apiwire.ValueUint || num == apiwire.ValueBool):
		var m int
		w.x, m = protowire.ConsumeVarint(b)
		return m == len(b)
	case typ == protowire.BytesType && (num == apiwire.ValueString || num == apiwire.ValueBytes):
		var m int
		w.s, m = protowire.ConsumeBytes(b)
		return m == len(b) && (num == apiwire.ValueBytes || utf8.Valid(w.s))
	}
	return false
}

// logSlowWire is logSlowSearch for a request run from its bytes, whose
// lookups are points: it names the record type of its first query.
func (e *Engine) logSlowWire(points []pointJob, start time.Time) {
	took := time.Since(start)
	if took < e.opts.SlowQuery {
		return
	}
	name := ""
	for _, p := range points {
		if p.i == 0 {
			name = string(p.t.rt.Name)
		}
	}
	e.log.Info("slow query", "call", "Search", "type", name, "queries", len(points), "took", took.Round(time.Microsecond))
}
