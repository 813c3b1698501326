// Package certstest makes TLS certificates for tests at run time: a CA
// and the server and client certificates it issues (ECDSA P-256), written
// as PEM files into a test's temporary directory. No key is ever committed.
package certstest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// CA is a test certificate authority.
type CA struct {
	Cert *x509.Certificate
	key  *ecdsa.PrivateKey
	// File is the CA certificate as a PEM file.
	File string
	dir  string
}

// NewCA makes a CA named name and writes its certificate to a PEM file in
// a fresh temporary directory of t.
func NewCA(t testing.TB, name string) *CA {
	t.Helper()
	key := newKey(t)
	tmpl := &x509.Certificate{
		SerialNumber:          serial(t),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatalf("certstest: create CA: %v", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	ca := &CA{Cert: cert, key: key, dir: t.TempDir()}
	ca.File = filepath.Join(ca.dir, name+"-ca.pem")
	writeFile(t, ca.File, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
	return ca
}

// Pair is an issued certificate and its key, as PEM files.
type Pair struct {
	CertFile, KeyFile string
	// Serial tells certificates apart (for checking which one a
	// handshake saw).
	Serial *big.Int
}

// TLS returns the pair loaded as a tls.Certificate.
func (p Pair) TLS(t testing.TB) tls.Certificate {
	t.Helper()
	c, err := tls.LoadX509KeyPair(p.CertFile, p.KeyFile)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// Server issues a server certificate for 127.0.0.1, ::1 and localhost,
// valid from an hour ago for a day, written to name.pem and name-key.pem.
func (ca *CA) Server(t testing.TB, name string) Pair {
	t.Helper()
	return ca.ServerWith(t, name, ServerOptions{})
}

// ServerOptions shape a server certificate; a zero field takes Server's
// choice.
type ServerOptions struct {
	// NotBefore and NotAfter bound the validity (default: from an hour
	// ago for a day). A NotAfter in the past makes an expired certificate.
	NotBefore, NotAfter time.Time
	// DNSNames and IPs are the names covered (default: localhost,
	// 127.0.0.1 and ::1). Set either to cover only what it names.
	DNSNames []string
	IPs      []net.IP
}

// ServerWith issues a server certificate shaped by o, written to name.pem
// and name-key.pem.
func (ca *CA) ServerWith(t testing.TB, name string, o ServerOptions) Pair {
	t.Helper()
	tmpl := &x509.Certificate{
		Subject:     pkix.Name{CommonName: "localhost"},
		DNSNames:    []string{"localhost"},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		NotBefore:   o.NotBefore,
		NotAfter:    o.NotAfter,
	}
	if o.DNSNames != nil || o.IPs != nil {
		tmpl.DNSNames, tmpl.IPAddresses = o.DNSNames, o.IPs
	}
	return ca.issue(t, name, tmpl)
}

// Client issues a client certificate with common name cn, written to
// name.pem and name-key.pem.
func (ca *CA) Client(t testing.TB, name, cn string) Pair {
	t.Helper()
	return ca.issue(t, name, &x509.Certificate{
		Subject:     pkix.Name{CommonName: cn},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	})
}

func (ca *CA) issue(t testing.TB, name string, tmpl *x509.Certificate) Pair {
	key := newKey(t)
	tmpl.SerialNumber = serial(t)
	if tmpl.NotBefore.IsZero() {
		tmpl.NotBefore = time.Now().Add(-time.Hour)
	}
	if tmpl.NotAfter.IsZero() {
		tmpl.NotAfter = time.Now().Add(24 * time.Hour)
	}
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatalf("certstest: issue %s: %v", name, err)
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	p := Pair{
		CertFile: filepath.Join(ca.dir, name+".pem"),
		KeyFile:  filepath.Join(ca.dir, name+"-key.pem"),
		Serial:   tmpl.SerialNumber,
	}
	writeFile(t, p.CertFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
	writeFile(t, p.KeyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder}))
	return p
}

// ClientConfig returns a client tls.Config trusting ca, presenting the
// given client certificates (none for plain TLS).
func (ca *CA) ClientConfig(t testing.TB, certs ...Pair) *tls.Config {
	t.Helper()
	pool := x509.NewCertPool()
	pool.AddCert(ca.Cert)
	cfg := &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	for _, p := range certs {
		cfg.Certificates = append(cfg.Certificates, p.TLS(t))
	}
	return cfg
}

// Install copies p's files over dst's, so that a server watching dst's
// files sees new material. The key is written first and the certificate
// last, each through a rename, as a careful operator would.
func Install(t testing.TB, p, dst Pair) {
	t.Helper()
	for _, f := range [][2]string{{p.KeyFile, dst.KeyFile}, {p.CertFile, dst.CertFile}} {
		b, err := os.ReadFile(f[0])
		if err != nil {
			t.Fatal(err)
		}
		tmp := f[1] + ".tmp"
		writeFile(t, tmp, b)
		if err := os.Rename(tmp, f[1]); err != nil {
			t.Fatal(err)
		}
	}
}

func newKey(t testing.TB) *ecdsa.PrivateKey {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return key
}

func serial(t testing.TB) *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func writeFile(t testing.TB, name string, b []byte) {
	if err := os.WriteFile(name, b, 0o600); err != nil {
		t.Fatal(err)
	}
}
