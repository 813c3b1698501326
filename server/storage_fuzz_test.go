package server

import (
	"net"
	"net/url"
	"strings"
	"testing"
)

// FuzzEtcdEndpoint holds validEndpoint (the parser of --etcd-endpoints
// values) to its promise: it never panics, and what it accepts is HOST:PORT
// or an http(s) URL of one, with a host and a port, that the etcd client
// can dial.
func FuzzEtcdEndpoint(f *testing.F) {
	for _, s := range []string{"127.0.0.1:2379", "http://h:1", "https://[::1]:2379/", "h", ":1", "h:",
		"ftp://h:1", "http://u:p@h:1", "http://h:1/x", "h:1,h:2", "[::1]:1", "http://", "\x00:1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, ep string) {
		if validEndpoint(ep) != nil {
			return
		}
		host := ep
		if strings.Contains(ep, "://") {
			u, err := url.Parse(ep)
			if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.User != nil {
				t.Fatalf("accepted %q: not an http(s) URL without credentials", ep)
			}
			host = u.Host
		}
		h, port, err := net.SplitHostPort(host)
		if err != nil || h == "" || port == "" || strings.ContainsAny(h, ", \t\r\n/") {
			t.Fatalf("accepted %q: host %q port %q (%v)", ep, h, port, err)
		}
		cfg := Config{DataDir: "d", Store: StoreEtcd, Etcd: EtcdConfig{Endpoints: []string{ep}}}
		if err := cfg.Validate(); err != nil {
			t.Fatalf("validEndpoint accepts %q, Validate refuses it: %v", ep, err)
		}
	})
}
