package authorityhook

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/machina-dev/machina/internal/certs"
)

// writeCert writes a fresh serving certificate and its CA into dir as a mounted
// cert-manager Secret holds them, and returns the certificate's DER bytes.
func writeCert(t *testing.T, dir string) []byte {
	t.Helper()
	ca, err := certs.New("test webhook CA")
	if err != nil {
		t.Fatal(err)
	}
	certPEM, keyPEM, err := ca.Sign(certs.Leaf{CommonName: "webhook", DNSNames: []string{"localhost"},
		IPs: []net.IP{net.IPv4(127, 0, 0, 1)}, Usage: x509.ExtKeyUsageServerAuth})
	if err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string][]byte{"ca.crt": ca.CertPEM(), "tls.key": keyPEM, "tls.crt": certPEM} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	block, _ := pem.Decode(certPEM)
	return block.Bytes
}

// A certificate from --webhook-cert-dir is served, replaced when the files are rotated
// (without a restart), and only over TLS 1.2 or newer.
func TestWebhookCertificateRotates(t *testing.T) {
	dir := t.TempDir()
	first := writeCert(t, dir)
	s, ok, err := mounted(dir)
	if err != nil || !ok {
		t.Fatalf("mounted(%s): %v, %v", dir, ok, err)
	}
	if s.watcher == nil || len(s.caPEM) == 0 {
		t.Fatalf("certificate from %s: watcher %v, CA %d bytes", dir, s.watcher, len(s.caPEM))
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = s.watcher.Start(ctx) }()
	ln, err := tls.Listen("tcp", "127.0.0.1:0", s.tlsConfig())
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.NotFoundHandler(), ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Close()

	served := func(maxVersion uint16) ([]byte, error) {
		conn, err := tls.Dial("tcp", ln.Addr().String(), &tls.Config{InsecureSkipVerify: true, MaxVersion: maxVersion})
		if err != nil {
			return nil, err
		}
		defer conn.Close()
		return conn.ConnectionState().PeerCertificates[0].Raw, nil
	}
	if got, err := served(0); err != nil || !bytes.Equal(got, first) {
		t.Fatalf("served %d bytes (%v), want the certificate in %s", len(got), err, dir)
	}
	if _, err := served(tls.VersionTLS11); err == nil {
		t.Fatal("a TLS 1.1 handshake succeeded")
	}
	second := writeCert(t, dir)
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		got, err := served(0)
		return err == nil && bytes.Equal(got, second), nil
	})
	if err != nil {
		t.Fatalf("the rotated certificate was never served: %v", err)
	}
}
