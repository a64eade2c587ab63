package lab

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"
)

// pki holds the lab's certificate authority. Its files live in <dir>/pki and are reused
// across restarts of a persistent lab, so kubeconfigs handed out earlier keep working.
type pki struct {
	dir    string
	caCert *x509.Certificate
	caKey  crypto.Signer
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
		if err := p.issue("apiserver", "kube-apiserver", nil, dns, ips, x509.ExtKeyUsageServerAuth); err != nil {
			return nil, err
		}
	}
	if _, err := os.Stat(p.path("sa.key")); errors.Is(err, os.ErrNotExist) {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			return nil, err
		}
		if err := writeKey(p.path("sa.key"), key); err != nil {
			return nil, err
		}
		pub, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
		if err != nil {
			return nil, err
		}
		if err := writePEM(p.path("sa.pub"), "PUBLIC KEY", pub); err != nil {
			return nil, err
		}
	}
	return p, nil
}

func (p *pki) createCA() error {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: "machina-lab-ca"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().AddDate(10, 0, 0),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return err
	}
	if err := writeKey(p.path("ca.key"), key); err != nil {
		return err
	}
	if err := writePEM(p.path("ca.crt"), "CERTIFICATE", der); err != nil {
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
	cb, _ := pem.Decode(certPEM)
	kb, _ := pem.Decode(keyPEM)
	if cb == nil || kb == nil {
		return fmt.Errorf("%s: CA certificate or key is not PEM", p.dir)
	}
	cert, err := x509.ParseCertificate(cb.Bytes)
	if err != nil {
		return fmt.Errorf("%s: %w", p.path("ca.crt"), err)
	}
	key, err := x509.ParsePKCS8PrivateKey(kb.Bytes)
	if err != nil {
		return fmt.Errorf("%s: %w", p.path("ca.key"), err)
	}
	signer, ok := key.(crypto.Signer)
	if !ok {
		return fmt.Errorf("%s: not a signing key", p.path("ca.key"))
	}
	p.caCert, p.caKey = cert, signer
	return nil
}

// issue writes <name>.crt and <name>.key signed by the CA.
func (p *pki) issue(name, cn string, orgs, dns []string, ips []net.IP, usage x509.ExtKeyUsage) error {
	certPEM, keyPEM, err := p.sign(cn, orgs, dns, ips, usage)
	if err != nil {
		return err
	}
	if err := os.WriteFile(p.path(name+".key"), keyPEM, 0o600); err != nil {
		return err
	}
	return os.WriteFile(p.path(name+".crt"), certPEM, 0o644)
}

// sign returns a PEM certificate and key for the given identity.
func (p *pki) sign(cn string, orgs, dns []string, ips []net.IP, usage x509.ExtKeyUsage) (certPEM, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: cn, Organization: orgs},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().AddDate(1, 0, 0),
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage:  []x509.ExtKeyUsage{usage},
		DNSNames:     dns,
		IPAddresses:  ips,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, p.caCert, &key.PublicKey, p.caKey)
	if err != nil {
		return nil, nil, err
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder}), nil
}

func serial() *big.Int {
	n, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 120))
	return n
}

func writeKey(path string, key *ecdsa.PrivateKey) error {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return err
	}
	return writePEM(path, "PRIVATE KEY", der)
}

func writePEM(path, typ string, der []byte) error {
	mode := os.FileMode(0o644)
	if typ == "PRIVATE KEY" {
		mode = 0o600
	}
	return os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), mode)
}

// clientTLS returns an HTTP client that trusts the lab CA and presents a client certificate.
func (p *pki) clientTLS(user string, groups ...string) (*http.Client, error) {
	certPEM, keyPEM, err := p.sign(user, groups, nil, nil, x509.ExtKeyUsageClientAuth)
	if err != nil {
		return nil, err
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	pool.AddCert(p.caCert)
	return &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12},
	}}, nil
}
