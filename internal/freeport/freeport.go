// Package freeport picks free TCP ports on loopback for processes that
// must be told their port before they listen: an etcd member names its
// peer URL in the cluster's membership before it binds it, and a server a
// test kills comes back at the address its clients know.
//
// A port found by listening on port 0 comes from the kernel's ephemeral
// range, the same range from which it picks the local port of every
// outgoing connection; between the pick and the member's bind, any
// connection of any process on the machine may take it. The ports picked
// here lie below that range, where the kernel never picks on its own, so
// only a program that binds a chosen port can take one first.
package freeport

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
)

// rangeFile holds the kernel's ephemeral range, "low high".
const rangeFile = "/proc/sys/net/ipv4/ip_local_port_range"

// floor is the lowest port picked: above the ports of well-known
// services, which a machine may run.
const floor = 10000

// attempts bounds the tries per port before Loopback gives up.
const attempts = 200

// Loopback returns n distinct TCP ports on 127.0.0.1, each free when it
// returns (it listened on each). Where the ephemeral range cannot be read,
// or leaves no room below it, it falls back to ports the kernel picks.
func Loopback(n int) ([]int, error) {
	low := ephemeralLow()
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	ports := make([]int, 0, n)
	for range n {
		l, err := listen(low)
		if err != nil {
			return nil, fmt.Errorf("free port on loopback: %w", err)
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// Addr is one such port as an address, "127.0.0.1:PORT".
func Addr() (string, error) {
	ports, err := Loopback(1)
	if err != nil {
		return "", err
	}
	return "127.0.0.1:" + strconv.Itoa(ports[0]), nil
}

// listen listens on a random free port in [floor, low), or on one the
// kernel picks if that range is too small to pick from.
func listen(low int) (net.Listener, error) {
	if low-floor < 1000 {
		return net.Listen("tcp", "127.0.0.1:0")
	}
	var err error
	for range attempts {
		p := floor + rand.IntN(low-floor) //nolint:gosec // a port, not a secret
		var l net.Listener
		if l, err = net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p)); err == nil {
			return l, nil
		}
	}
	return nil, fmt.Errorf("no free port in %d-%d after %d tries: %w", floor, low-1, attempts, err)
}

// ephemeralLow is the low end of the kernel's ephemeral range, or 0 if it
// cannot be read.
func ephemeralLow() int {
	b, err := os.ReadFile(rangeFile)
	if err != nil {
		return 0
	}
	low, _ := parseLow(string(b)) // 0 when it cannot be parsed
	return low
}

// parseLow reads the low end of "low high".
func parseLow(s string) (int, error) {
	f := strings.Fields(s)
	if len(f) != 2 {
		return 0, errors.New("want two ports")
	}
	low, err := strconv.Atoi(f[0])
	if err != nil || low < 1 || low > 65535 {
		return 0, fmt.Errorf("bad low port %q", f[0])
	}
	return low, nil
}
