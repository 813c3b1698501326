package engine

import (
	"math"
	"time"

	"google.golang.org/protobuf/reflect/protoreflect"

	pb "github.com/protobase/protobase/gen/protobase/v1"
	"github.com/protobase/protobase/internal/record"
	"github.com/protobase/protobase/internal/schema"
)

// instant is a time as seconds and nanoseconds since the Unix epoch:
// expiries far from today (an int64 of seconds, a Timestamp's full range)
// do not fit an int64 of nanoseconds, so times are compared as pairs.
type instant struct {
	sec, nsec int64
}

func instantOf(t time.Time) instant { return instant{t.Unix(), int64(t.Nanosecond())} }

// notAfter reports whether a is at or before b.
func (a instant) notAfter(b instant) bool {
	return a.sec < b.sec || a.sec == b.sec && a.nsec <= b.nsec
}

// now is the time reads compare expiries with.
func (e *Engine) now() instant {
	if e.opts.Now != nil {
		return instantOf(e.opts.Now())
	}
	return instantOf(time.Now())
}

// expiry reads a record's expiry time from its stored bytes, without
// decoding the record.
type expiry struct {
	field *record.Path // the integer field, or the Timestamp's seconds
	nanos *record.Path // the Timestamp's nanos; nil for an integer field
	unit  pb.TTLUnit
}

func newExpiry(rec *record.Type, ttl *schema.TTL) (*expiry, error) {
	name := string(ttl.Field.Name())
	if !ttl.Timestamp() {
		p, err := rec.Path(name)
		if err != nil {
			return nil, err
		}
		return &expiry{field: p, unit: ttl.Unit}, nil
	}
	sec, err := rec.Path(name + ".seconds")
	if err != nil {
		return nil, err
	}
	nanos, err := rec.Path(name + ".nanos")
	if err != nil {
		return nil, err
	}
	return &expiry{field: sec, nanos: nanos}, nil
}

// at returns when rec expires; ok is false when it never does (a zero or
// absent expiry). A record whose expiry field cannot be read never
// expires: writes validate records, so only a damaged one could fail, and
// the checker, not a read, reports damage.
func (x *expiry) at(rec []byte) (at instant, ok bool) {
	v, _, err := x.field.Get(rec)
	if err != nil {
		return instant{}, false
	}
	if x.nanos != nil {
		n, _, err := x.nanos.Get(rec)
		if err != nil {
			return instant{}, false
		}
		at = instant{v.Int, n.Int}
		return at, at != instant{}
	}
	if unsignedKind(v.Kind) {
		return x.ofUint(v.Uint), v.Uint != 0
	}
	return x.ofInt(v.Int), v.Int != 0
}

// ofUint is the instant of an unsigned integer expiry v.
func (x *expiry) ofUint(v uint64) instant {
	if x.unit == pbMillis {
		return instant{int64(v / 1000), int64(v%1000) * 1e6} //nolint:gosec // v/1000 < 2^63
	}
	if v > math.MaxInt64 {
		return instant{math.MaxInt64, 0}
	}
	return instant{int64(v), 0}
}

// ofInt is the instant of a signed integer expiry v.
func (x *expiry) ofInt(v int64) instant {
	if x.unit == pbMillis {
		sec, ms := v/1000, v%1000
		if ms < 0 { // floor, so that the nanoseconds are never negative
			sec, ms = sec-1, ms+1000
		}
		return instant{sec, ms * 1e6}
	}
	return instant{v, 0}
}

// pbMillis is the unit of an integer expiry in milliseconds.
const pbMillis = pb.TTLUnit_TTL_UNIT_MILLISECONDS

// expired reports whether rec has expired at now.
func (x *expiry) expired(rec []byte, now instant) bool {
	at, ok := x.at(rec)
	return ok && at.notAfter(now)
}

// expired reports whether rec, a record of t, has expired at now: it then
// reads as absent.
func (t *recType) expired(rec []byte, now instant) bool {
	return t.exp != nil && t.exp.expired(rec, now)
}

// expiredNow is expired at e's clock, which it reads only for a type with
// an expiry: a clock read is not free, and most types have none.
func (e *Engine) expiredNow(t *recType, rec []byte) bool {
	return t.exp != nil && t.exp.expired(rec, e.now())
}

func unsignedKind(k protoreflect.Kind) bool {
	switch k {
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind, protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		return true
	}
	return false
}
