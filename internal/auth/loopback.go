package auth

import "net"

// IsLoopback reports whether addr (host:port, or a bare host) names only
// the loopback interface: the one place the rule "a key may travel, and
// auth may be off, on loopback alone" decides what loopback is, for the
// server's listeners and the client's plaintext check alike. An empty
// host, 0.0.0.0 and :: bind every interface, so they are not loopback.
func IsLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		host = addr
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
