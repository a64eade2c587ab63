package lab

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/machina-dev/machina/internal/certs"
)

// pki holds the lab's certificate authority. Its files live in <dir>/pki and are reused
// across restarts of a persistent lab, so kubeconfigs handed out earlier keep working.
type pki struct {
	dir string
	ca  *certs.Authority
}

func (p *pki) path(name string) string { return filepath.Join(p.dir, name) }

// loadOrCreatePKI ensures the CA, the apiserver serving certificate and the service-account
// signing key exist in dir.
func loadOrCreatePKI(dir string) (*pki, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	p := &pki{dir: dir}
	if err := p.loadCA(); errors.Is(err, os.ErrNotExist) {
		if err := p.createCA(); err != nil {
			return nil, err
		}
	} else if err != nil {
		return nil, err
	}
	if _, err := os.Stat(p.path("apiserver.crt")); errors.Is(err, os.ErrNotExist) {
		ips := []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP(serviceIP)}
		dns := []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc",
			"kubernetes.default.svc.cluster.local"}
		leaf := certs.Leaf{CommonName: "kube-apiserver", DNSNames: dns, IPs: ips, Usage: x509.ExtKeyUsageServerAuth}
		if err := p.issue("apiserver", leaf); err != nil {
			return nil, err
		}
	}
	if _, err := os.Stat(p.path("sa.key")); errors.Is(err, os.ErrNotExist) {
		if err := p.createServiceAccountKey(); err != nil {
			return nil, err
		}
	}
	return p, nil
}

func (p *pki) createCA() error {
	ca, err := certs.New("machina-lab-ca")
	if err != nil {
		return err
	}
	key, err := ca.KeyPEM()
	if err != nil {
		return err
	}
	if err := os.WriteFile(p.path("ca.key"), key, 0o600); err != nil {
		return err
	}
	if err := os.WriteFile(p.path("ca.crt"), ca.CertPEM(), 0o644); err != nil {
		return err
	}
	return p.loadCA()
}

func (p *pki) loadCA() error {
	certPEM, err := os.ReadFile(p.path("ca.crt"))
	if err != nil {
		return err
	}
	keyPEM, err := os.ReadFile(p.path("ca.key"))
	if err != nil {
		return err
	}
	ca, err := certs.Parse(certPEM, keyPEM)
	if err != nil {
		return fmt.Errorf("%s: %w", p.dir, err)
	}
	p.ca = ca
	return nil
}

// createServiceAccountKey writes the key kube-apiserver signs ServiceAccount tokens with
// (sa.key) and its public half (sa.pub).
func (p *pki) createServiceAccountKey() error {
	key, err := certs.NewKey()
	if err != nil {
		return err
	}
	keyPEM, err := certs.KeyPEM(key)
	if err != nil {
		return err
	}
	if err := os.WriteFile(p.path("sa.key"), keyPEM, 0o600); err != nil {
		return err
	}
	pub, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		return err
	}
	return os.WriteFile(p.path("sa.pub"), pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pub}), 0o644)
}

// issue writes <name>.crt and <name>.key signed by the CA.
func (p *pki) issue(name string, leaf certs.Leaf) error {
	certPEM, keyPEM, err := p.ca.Sign(leaf)
	if err != nil {
		return err
	}
	if err := os.WriteFile(p.path(name+".key"), keyPEM, 0o600); err != nil {
		return err
	}
	return os.WriteFile(p.path(name+".crt"), certPEM, 0o644)
}

// clientTLS returns an HTTP client that trusts the lab CA and presents a client certificate.
func (p *pki) clientTLS(user string, groups ...string) (*http.Client, error) {
	certPEM, keyPEM, err := p.ca.Sign(certs.Leaf{CommonName: user, Organization: groups, Usage: x509.ExtKeyUsageClientAuth})
	if err != nil {
		return nil, err
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	pool.AddCert(p.ca.Cert)
	return &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12},
	}}, nil
}
