package watch

import (
	"errors"
	"slices"
	"time"

	"google.golang.org/protobuf/encoding/protowire"
)

// changeTally is what one watcher received, read from the encoded
// WatchResponses (bench.WireTally) so that decoding records is not what
// the experiment measures: per message, its arrival time and how many of
// its changes belong to each commit. Owned by the watcher's goroutine
// until the run collects it.
type changeTally struct {
	messages int
	changes  int64
	last     time.Time // arrival of the last message holding changes
	arrivals []arrival // in arrival order
}

// arrival is n changes of one commit that arrived in one message at at.
type arrival struct {
	commit uint64
	n      int64
	at     time.Time
}

var errMalformed = errors.New("malformed WatchResponse")

// AddWire implements bench.WireTally: it tallies one encoded
// WatchResponse (changes: field 1; a change's position: field 6, whose
// commit is field 1).
func (t *changeTally) AddWire(b []byte) error {
	now := time.Now()
	t.messages++
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return errMalformed
		}
		b = b[n:]
		if num != 1 || typ != protowire.BytesType {
			if n = protowire.ConsumeFieldValue(num, typ, b); n < 0 {
				return errMalformed
			}
			b = b[n:]
			continue
		}
		change, n := protowire.ConsumeBytes(b)
		if n < 0 {
			return errMalformed
		}
		b = b[n:]
		commit, err := commitOf(change)
		if err != nil {
			return err
		}
		t.changes++
		t.last = now
		if k := len(t.arrivals); k > 0 && t.arrivals[k-1].commit == commit && t.arrivals[k-1].at.Equal(now) {
			t.arrivals[k-1].n++
			continue
		}
		t.arrivals = append(t.arrivals, arrival{commit: commit, n: 1, at: now})
	}
	return nil
}

// commitOf returns Change.position.commit.
func commitOf(change []byte) (uint64, error) {
	pos, err := field(change, 6)
	if err != nil || pos == nil {
		return 0, errMalformed
	}
	for len(pos) > 0 {
		num, typ, n := protowire.ConsumeTag(pos)
		if n < 0 {
			return 0, errMalformed
		}
		pos = pos[n:]
		if num == 1 && typ == protowire.VarintType {
			v, n := protowire.ConsumeVarint(pos)
			if n < 0 {
				return 0, errMalformed
			}
			return v, nil
		}
		if n = protowire.ConsumeFieldValue(num, typ, pos); n < 0 {
			return 0, errMalformed
		}
		pos = pos[n:]
	}
	return 0, nil // commit 0 is left out of the encoding
}

// field returns the bytes of the last length-delimited field num of msg,
// or nil when it has none. Fields of a one-byte tag and length, all of a
// change but its records, are stepped over without protowire's general
// decoding: the tally runs on the cores it measures.
func field(msg []byte, num protowire.Number) ([]byte, error) {
	var out []byte
	for len(msg) > 0 {
		if tag := msg[0]; tag < 0x80 && tag>>3 != 0 && len(msg) > 2 {
			switch protowire.Type(tag & 7) {
			case protowire.BytesType:
				l, at := int(msg[1]), 2 // a length of one or two bytes
				if l >= 0x80 {
					l, at = l&0x7f|int(msg[2])<<7, 3
				}
				if msg[at-1] < 0x80 {
					if l > len(msg)-at {
						return nil, errMalformed
					}
					if protowire.Number(tag>>3) == num {
						out = msg[at : at+l]
					}
					msg = msg[at+l:]
					continue
				}
			case protowire.VarintType:
				if msg[1] < 0x80 {
					msg = msg[2:]
					continue
				}
			}
		}
		f, typ, n := protowire.ConsumeTag(msg)
		if n < 0 {
			return nil, errMalformed
		}
		msg = msg[n:]
		if f == num && typ == protowire.BytesType {
			v, n := protowire.ConsumeBytes(msg)
			if n < 0 {
				return nil, errMalformed
			}
			out, msg = v, msg[n:]
			continue
		}
		if n = protowire.ConsumeFieldValue(f, typ, msg); n < 0 {
			return nil, errMalformed
		}
		msg = msg[n:]
	}
	return out, nil
}

// latencies is a weighted set of delivery latencies in milliseconds.
type latencies struct {
	points []latency
	total  int64
}

type latency struct {
	ms float64
	n  int64
}

func (l *latencies) add(d time.Duration, n int64) {
	l.points = append(l.points, latency{ms: float64(d) / float64(time.Millisecond), n: n})
	l.total += n
}

// quantile returns the smallest latency that q of the changes did not
// exceed (q in (0, 1]; 1 is the maximum). Sorts the points.
func (l *latencies) quantile(q float64) float64 {
	if l.total == 0 {
		return 0
	}
	slices.SortFunc(l.points, func(a, b latency) int {
		switch {
		case a.ms < b.ms:
			return -1
		case a.ms > b.ms:
			return 1
		}
		return 0
	})
	need := q * float64(l.total)
	var seen int64
	for _, p := range l.points {
		seen += p.n
		if float64(seen) >= need {
			return p.ms
		}
	}
	return l.points[len(l.points)-1].ms
}
