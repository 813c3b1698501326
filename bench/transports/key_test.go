package transports

import (
	"crypto/tls"
	"testing"
)

// The lab's REST and NATS hops carry the API key only where the Go client
// would: over TLS, or to loopback.
func TestKeyInTheClear(t *testing.T) {
	for _, tc := range []struct {
		key  string
		tls  *tls.Config
		addr string
		ok   bool
	}{
		{"", nil, "db.example:8080", true},
		{"pb_k", nil, "127.0.0.1:8080", true},
		{"pb_k", nil, "localhost:4222", true},
		{"pb_k", &tls.Config{}, "db.example:8080", true},
		{"pb_k", nil, "db.example:8080", false},
		{"pb_k", nil, "", false},
	} {
		if err := keyInTheClear(tc.key, tc.tls, tc.addr); (err == nil) != tc.ok {
			t.Errorf("keyInTheClear(%q, tls %v, %q) = %v", tc.key, tc.tls != nil, tc.addr, err)
		}
	}
}
