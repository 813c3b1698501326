package certs

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"strings"
	"time"
)

// checkServable refuses a server certificate that clients would refuse
// while prev (the certificate served so far, nil at start) still works:
//
//   - one outside its validity period at now: every client checks it, so an
//     expired certificate, or one not valid yet, fails every handshake;
//   - one that no longer covers a DNS name or IP address of prev: clients
//     that reach the server by that name would fail verification.
//
// A prev that is itself outside its validity serves no one, so names are
// not held against its replacement: renewing an expired certificate under
// other names works. Changing the names a valid certificate serves takes a
// restart, which is a deliberate act.
func checkServable(next *x509.Certificate, prev *tls.Certificate, now time.Time) error {
	if err := checkValidity(next, now); err != nil {
		return err
	}
	if prev == nil || prev.Leaf == nil || !validAt(prev.Leaf, now) {
		return nil
	}
	var lost []string
	for _, name := range prev.Leaf.DNSNames {
		if next.VerifyHostname(name) != nil {
			lost = append(lost, name)
		}
	}
	for _, ip := range prev.Leaf.IPAddresses {
		if !coversIP(next, ip) {
			lost = append(lost, ip.String())
		}
	}
	if len(lost) > 0 {
		return fmt.Errorf("tls: the new certificate (serial %s) does not cover %s, which the certificate in use covers; "+
			"clients reaching the server by those names would be refused (restart the server to change the names it serves)",
			next.SerialNumber, strings.Join(lost, ", "))
	}
	return nil
}

// notYetValidError is checkValidity's error for a certificate whose
// validity starts after now; the reloader tries it again from then.
type notYetValidError struct {
	serial    string
	notBefore time.Time
}

func (e *notYetValidError) Error() string {
	return fmt.Sprintf("tls: the certificate (serial %s) is not valid before %s", e.serial, e.notBefore.UTC().Format(time.RFC3339))
}

// checkValidity refuses a certificate that is not valid at now.
func checkValidity(c *x509.Certificate, now time.Time) error {
	switch {
	case now.Before(c.NotBefore):
		return &notYetValidError{serial: c.SerialNumber.String(), notBefore: c.NotBefore}
	case now.After(c.NotAfter):
		return fmt.Errorf("tls: the certificate (serial %s) expired at %s", c.SerialNumber, c.NotAfter.UTC().Format(time.RFC3339))
	}
	return nil
}

// validAt reports whether c is within its validity period at now.
func validAt(c *x509.Certificate, now time.Time) bool {
	return !now.Before(c.NotBefore) && !now.After(c.NotAfter)
}

// coversIP reports whether c names ip among its IP addresses.
func coversIP(c *x509.Certificate, ip net.IP) bool {
	for _, a := range c.IPAddresses {
		if a.Equal(ip) {
			return true
		}
	}
	return false
}
