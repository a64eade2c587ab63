package certs_test

import (
	"crypto/ecdsa"
	"crypto/tls"
	"crypto/x509"
	"net"
	"strings"
	"testing"

	"k8s.io/client-go/util/cert"

	"github.com/machina-dev/machina/internal/certs"
)

// A serving certificate signed by a new CA verifies against it for its names, and only for
// server authentication; a client certificate carries its user and groups.
func TestSignVerifies(t *testing.T) {
	ca, err := certs.New("test-ca")
	if err != nil {
		t.Fatal(err)
	}
	certPEM, keyPEM, err := ca.Sign(certs.Leaf{CommonName: "svc", DNSNames: []string{"svc.ns.svc"},
		IPs: []net.IP{net.IPv4(127, 0, 0, 1)}, Usage: x509.ExtKeyUsageServerAuth})
	if err != nil {
		t.Fatal(err)
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatalf("the signed pair does not load: %v", err)
	}
	if _, ok := pair.PrivateKey.(*ecdsa.PrivateKey); !ok {
		t.Errorf("key is %T, want ECDSA", pair.PrivateKey)
	}
	leaf, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AddCert(ca.Cert)
	for _, name := range []string{"svc.ns.svc", "127.0.0.1"} {
		if _, err := leaf.Verify(x509.VerifyOptions{DNSName: name, Roots: roots}); err != nil {
			t.Errorf("serving certificate for %s does not verify: %v", name, err)
		}
	}
	if _, err := leaf.Verify(x509.VerifyOptions{DNSName: "other", Roots: roots}); err == nil {
		t.Error("serving certificate verified for a name it does not carry")
	}
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err == nil {
		t.Error("serving certificate verified for client authentication")
	}

	certPEM, _, err = ca.Sign(certs.Leaf{CommonName: "alice", Organization: []string{"system:masters"}, Usage: x509.ExtKeyUsageClientAuth})
	if err != nil {
		t.Fatal(err)
	}
	client := parse(t, certPEM)
	if client.Subject.CommonName != "alice" || strings.Join(client.Subject.Organization, ",") != "system:masters" {
		t.Errorf("client subject %v", client.Subject)
	}
	if _, err := client.Verify(x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		t.Errorf("client certificate does not verify: %v", err)
	}
}

// A CA written out and read back signs certificates the original's clients trust (the lab
// keeps its CA on disk across restarts); what is not a CA is refused.
func TestParseRoundTrip(t *testing.T) {
	ca, err := certs.New("lab-ca")
	if err != nil {
		t.Fatal(err)
	}
	keyPEM, err := ca.KeyPEM()
	if err != nil {
		t.Fatal(err)
	}
	again, err := certs.Parse(ca.CertPEM(), keyPEM)
	if err != nil {
		t.Fatalf("reading the CA back: %v", err)
	}
	certPEM, leafKey, err := again.Sign(certs.Leaf{CommonName: "x", Usage: x509.ExtKeyUsageClientAuth})
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AddCert(ca.Cert)
	if _, err := parse(t, certPEM).Verify(x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}}); err != nil {
		t.Errorf("signed by the re-read CA, not trusted by the original: %v", err)
	}
	if _, err := certs.Parse(certPEM, leafKey); err == nil || !strings.Contains(err.Error(), "not a CA") {
		t.Errorf("a leaf certificate read as a CA: %v", err)
	}
	if _, err := certs.Parse([]byte("junk"), keyPEM); err == nil {
		t.Error("junk read as a CA certificate")
	}
	if _, err := certs.Parse(ca.CertPEM(), []byte("junk")); err == nil {
		t.Error("junk read as a CA key")
	}
}

func parse(t *testing.T, certPEM []byte) *x509.Certificate {
	t.Helper()
	cs, err := cert.ParseCertsPEM(certPEM)
	if err != nil {
		t.Fatal(err)
	}
	return cs[0]
}
