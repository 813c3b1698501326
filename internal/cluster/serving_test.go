package cluster

import "testing"

// A server's ready line is recognised as text and as the JSON object it
// prints with --log-format json.
func TestServingLine(t *testing.T) {
	for _, tc := range []struct {
		line, addr string
		ok         bool
	}{
		{"protobase serving on 127.0.0.1:7070 (etcd 127.0.0.1:2379)", "127.0.0.1:7070", true},
		{`{"time":"t","level":"INFO","msg":"protobase serving","addr":"127.0.0.1:7071","store":"etcd x"}`, "127.0.0.1:7071", true},
		{`{"msg":"metrics","url":"http://127.0.0.1:9"}`, "", false},
		{"metrics on http://127.0.0.1:9/metrics", "", false},
		{"{", "", false},
	} {
		addr, ok := serving(tc.line)
		if addr != tc.addr || ok != tc.ok {
			t.Errorf("serving(%q) = %q, %v; want %q, %v", tc.line, addr, ok, tc.addr, tc.ok)
		}
	}
}
