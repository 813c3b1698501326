package engine

import (
	pb "github.com/protobase/protobase/gen/protobase/v1"
)

// WirePoint is a lookup as the engine runs it: its record key and flags.
type WirePoint struct {
	Key             string
	Count, KeysOnly bool
}

// WirePoints reads SearchRequest bytes b as a request run from its bytes
// would be: its lookups by query position, or false when b must be
// decoded.
func (e *Engine) WirePoints(b []byte) (map[int]WirePoint, bool) {
	var buf lookupBuf
	if !e.wirePoints(b, &buf, 0) {
		return nil, false
	}
	return pointsByQuery(buf.points), true
}

// QueryPoints is WirePoints for decoded queries (allPoints).
func (e *Engine) QueryPoints(qs []*pb.Query) (map[int]WirePoint, bool) {
	var buf lookupBuf
	if !e.allPoints(qs, &buf) {
		return nil, false
	}
	return pointsByQuery(buf.points), true
}

func pointsByQuery(points []pointJob) map[int]WirePoint {
	m := map[int]WirePoint{}
	for _, p := range points {
		m[p.i] = WirePoint{Key: string(p.key), Count: p.count, KeysOnly: p.keysOnly}
	}
	return m
}
