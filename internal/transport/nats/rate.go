package nats

import (
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/protobase/protobase/internal/apierror"
	"github.com/protobase/protobase/internal/auth"
)

// DefaultKeyBytesPerSecond bounds the request bytes one key brings to the
// service per second (Options.KeyBytesPerSecond).
const DefaultKeyBytesPerSecond = 64 << 20

// floodInterval is the least time between two OnFlood calls for a key.
const floodInterval = time.Second

// keyRates bounds each key's request bytes with a token bucket: its rate
// is Options.KeyBytesPerSecond, its burst a second's worth, or twice the
// largest request if that is more (so that any one request can pass a
// bucket that has rested). A request over
// the bucket is refused before it is decoded, and a key whose requests
// keep coming faster is reported (OnFlood), at most once a second, so that
// the embedded NATS server closes its connections: the flood stops at its
// source instead of filling NATS's queue for the service.
type keyRates struct {
	perSecond rate.Limit
	burst     int
	onFlood   func(name string)

	mu   sync.Mutex
	keys map[string]*keyRate // by key name
}

type keyRate struct {
	lim       *rate.Limiter
	lastFlood time.Time
}

func newKeyRates(perSecond int64, maxRequest int, onFlood func(string)) *keyRates {
	if perSecond <= 0 {
		return nil
	}
	return &keyRates{perSecond: rate.Limit(perSecond), burst: max(int(perSecond), 2*maxRequest), onFlood: onFlood, keys: map[string]*keyRate{}}
}

// admit takes n bytes from the bucket of the key id, or refuses the
// request (RESOURCE_EXHAUSTED). Without keys (nil id) there is no bound.
func (k *keyRates) admit(id *auth.Identity, n int) error {
	if k == nil || id == nil {
		return nil
	}
	now := time.Now()
	k.mu.Lock()
	kr := k.keys[id.Name]
	if kr == nil {
		kr = &keyRate{lim: rate.NewLimiter(k.perSecond, k.burst)}
		k.keys[id.Name] = kr
	}
	if kr.lim.AllowN(now, n) {
		k.mu.Unlock()
		return nil
	}
	flood := now.Sub(kr.lastFlood) >= floodInterval
	if flood {
		kr.lastFlood = now
	}
	k.mu.Unlock()
	if flood && k.onFlood != nil {
		k.onFlood(id.Name)
	}
	return apierror.Errorf(apierror.ResourceExhausted,
		"API key %q sends requests faster than %d bytes/s over NATS; slow down, or use gRPC for bulk writes", id.Name, int64(k.perSecond))
}

// forget drops the bucket of a key (revoked).
func (k *keyRates) forget(name string) {
	if k == nil {
		return
	}
	k.mu.Lock()
	delete(k.keys, name)
	k.mu.Unlock()
}
