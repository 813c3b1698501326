package engine

import (
	"time"

	"google.golang.org/protobuf/encoding/protowire"

	pb "github.com/protobase/protobase/gen/protobase/v1"
	"github.com/protobase/protobase/internal/wire"
)

// A request of plain primary-key lookups can be run from its wire bytes
// (WireSource): each query's key is encoded straight from the
// bytes of its type, field and operand, with no Query, Expr, Comparison
// or Value message decoded and then read back (a sixth of the server's CPU
// on batched lookups). wirePoints accepts only bytes in the one shape it
// knows (wire.ReadQuery's, narrowed to one EQ comparison), so
// that proto.Unmarshal would decode them without error into queries that
// lookupOrder takes as the same lookups (FuzzWirePoints checks both);
// anything else is decoded by proto.Unmarshal, and gets its errors.

// tagReqQueries is the tag wirePoints reads most, as a byte.
const tagReqQueries = byte(wire.SearchRequestQueries)<<3 | byte(protowire.BytesType)

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
	// The queries of a batch, and of a stream's requests, are mostly one
	// query with another operand: a shape is a query read in full, and a
	// query equal to it but for the operand (the Value's content, vs to
	// ve, of equal length) has only its operand read, which is what a
	// full read would find different. Operands of different lengths (ids
	// of one, two and three bytes) make different shapes: the last few
	// are kept, from request to request while the catalog, which gave
	// their record types, stays the same.
	sc := &buf.shapes
	sc.start(cat)
	for i := 0; len(b) > 0; i++ {
		if limit > 0 && i == limit {
			return false // over the limit: decode and refuse it
		}
		var qb []byte
		if len(b) >= 2 && b[0] == tagReqQueries && b[1] < 0x80 && int(b[1]) <= len(b)-2 {
			qb, b = b[2:2+b[1]], b[2+b[1]:] // a query under 128 bytes: most are
		} else {
			num, typ, l := protowire.ConsumeTag(b)
			if l < 0 || num != wire.SearchRequestQueries || typ != protowire.BytesType {
				return false
			}
			var m int
			if qb, m = protowire.ConsumeBytes(b[l:]); m < 0 {
				return false
			}
			b = b[l+m:]
		}
		sh := sc.find(qb)
		if sh != nil {
			if !wire.ReadOperand(qb[sh.vs:sh.ve], &sh.q.Cmp.Value) {
				return false
			}
		} else if sh = sc.next(); !sh.read(qb, cat) {
			return false
		}
		q, last := &sh.q, sh.t
		if last == nil || last.point == nil {
			return false
		}
		var ok bool
		if arena, ok = last.point.KeyWire(arena, q.Cmp.Field, q.Cmp.Value.Num, q.Cmp.Value.X, q.Cmp.Value.S); !ok {
			return false
		}
		points = append(points, pointJob{i: i, t: last, count: q.Count, keysOnly: q.KeysOnly})
		ends = append(ends, len(arena))
	}
	if len(points) == 0 {
		return false // an empty request: nothing to gain
	}
	e.keyPoints(points, arena, ends)
	buf.ready = true
	return true
}

// wireShapes are the shapes wirePoints keeps, a stream's (lookupBuf), and
// the catalog their record types are from.
type wireShapes struct {
	cat    *catalog
	s      [4]wireShape
	n      int // shapes made so far, up to len(s)
	oldest int // the shape next replaced once all are made
}

// start readies the shapes for a request read with catalog cat: those of
// another catalog are forgotten, and so are those that point into the
// previous request's bytes.
func (sc *wireShapes) start(cat *catalog) {
	if sc.cat != cat {
		*sc = wireShapes{cat: cat}
		return
	}
	for k := range sc.n {
		if sh := &sc.s[k]; !sh.own {
			sh.ok, sh.b = false, nil
		}
	}
}

// find returns the shape whose query qb is but for its operand, or nil.
func (sc *wireShapes) find(qb []byte) *wireShape {
	for k := range sc.n {
		if sh := &sc.s[k]; sh.ok && sh.matches(qb) {
			return sh
		}
	}
	return nil
}

// next returns the shape to read a new query into.
func (sc *wireShapes) next() *wireShape {
	if sc.n < len(sc.s) {
		sc.n++
		return &sc.s[sc.n-1]
	}
	sh := &sc.s[sc.oldest]
	sc.oldest = (sc.oldest + 1) % len(sc.s)
	return sh
}

// wireShape is a query wirePoints read in full: its bytes, where its
// operand lies in them, what it read, and its record type; ok when it is
// a plain lookup. own says b is the shape's copy, kept for the stream's
// next requests (the request's bytes are overwritten by the next one);
// the bytes of a query over maxKeptShape are not copied, and the shape
// lasts for its request only, so that a stream keeps little.
type wireShape struct {
	b       []byte
	vs, ve  int
	q       wire.Query
	t       *recType
	ok, own bool
}

// maxKeptShape is the largest query a shape keeps a copy of: a lookup by
// a key of a few hundred bytes.
const maxKeptShape = 512

// matches reports whether qb is the shape's query but for its operand.
func (sh *wireShape) matches(qb []byte) bool {
	return len(qb) == len(sh.b) && string(qb[:sh.vs]) == string(sh.b[:sh.vs]) && string(qb[sh.ve:]) == string(sh.b[sh.ve:])
}

// read reads query qb in full into the shape, if it is a plain lookup:
// one EQ comparison with an operand, no explain, no versions (a limit
// changes nothing for a lookup's one record). The shape's query is read
// from its bytes (a copy of qb when kept), which its type and field then
// point into.
func (sh *wireShape) read(qb []byte, cat *catalog) bool {
	if sh.own = len(qb) <= maxKeptShape; sh.own {
		sh.b = append(sh.b[:0], qb...)
	} else {
		sh.b = qb
	}
	q := &sh.q
	sh.ok = wire.ReadQuery(sh.b, q) && q.Where && q.Cmp.HasValue && q.Cmp.Op == int32(pb.Op_OP_EQ) && !q.Explain && !q.Versions
	if !sh.ok {
		return false
	}
	sh.ve = len(qb) - q.AfterWhere - q.AfterValue
	sh.vs = sh.ve - q.ValueLen
	sh.t = cat.lookup(string(q.Type))
	return true
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
	e.log.Info("slow query", "call", "Search", "type", name, "queries", len(points), "took_ms", millis(took))
}
