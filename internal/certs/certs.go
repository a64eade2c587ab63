// Package certs is machina's one certificate authority: the lab's CA (kept on disk, it signs
// the kube-apiserver's serving certificate and every user's client certificate) and the
// authority webhook's self-signed CA (made at start when no certificate is mounted) are both
// an Authority. Keys are ECDSA P-256; the CA certificate itself comes from client-go's
// cert.NewSelfSignedCACert.
package certs

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"time"

	"k8s.io/client-go/util/cert"
	"k8s.io/client-go/util/keyutil"
)

// skew is how far back certificates' validity starts, so a clock slightly behind the
// signer's still accepts them.
const skew = time.Hour

// LeafValidity is how long a certificate signed by an Authority is valid.
const LeafValidity = 365 * 24 * time.Hour

// Authority is a certificate authority: its certificate and the key that signs with it.
type Authority struct {
	Cert *x509.Certificate
	Key  crypto.Signer
}

// New makes a self-signed CA named commonName with a fresh key (valid ten years).
func New(commonName string) (*Authority, error) {
	key, err := NewKey()
	if err != nil {
		return nil, err
	}
	c, err := cert.NewSelfSignedCACert(cert.Config{CommonName: commonName, NotBefore: time.Now().Add(-skew)}, key)
	if err != nil {
		return nil, fmt.Errorf("making CA %s: %w", commonName, err)
	}
	return &Authority{Cert: c, Key: key}, nil
}

// Parse reads a CA from its PEM certificate and PEM private key (PKCS #8, SEC 1 or PKCS #1).
func Parse(certPEM, keyPEM []byte) (*Authority, error) {
	cs, err := cert.ParseCertsPEM(certPEM)
	if err != nil {
		return nil, fmt.Errorf("CA certificate: %w", err)
	}
	key, err := keyutil.ParsePrivateKeyPEM(keyPEM)
	if err != nil {
		return nil, fmt.Errorf("CA key: %w", err)
	}
	signer, ok := key.(crypto.Signer)
	if !ok {
		return nil, errors.New("CA key: not a signing key")
	}
	if !cs[0].IsCA {
		return nil, fmt.Errorf("CA certificate %s is not a CA", cs[0].Subject.CommonName)
	}
	return &Authority{Cert: cs[0], Key: signer}, nil
}

// CertPEM returns the CA's certificate, PEM-encoded: what a client is told to trust.
func (a *Authority) CertPEM() []byte {
	return pem.EncodeToMemory(&pem.Block{Type: cert.CertificateBlockType, Bytes: a.Cert.Raw})
}

// KeyPEM returns the CA's private key, PEM-encoded as PKCS #8.
func (a *Authority) KeyPEM() ([]byte, error) { return KeyPEM(a.Key) }

// Leaf is what a certificate an Authority signs says about its holder.
type Leaf struct {
	// CommonName is the subject's name: the user name of a client certificate.
	CommonName string
	// Organization is the subject's organisations: the groups of a client certificate.
	Organization []string
	// DNSNames and IPs are the names a serving certificate is valid for.
	DNSNames []string
	IPs      []net.IP
	// Usage is what the certificate is for: x509.ExtKeyUsageServerAuth or ClientAuth.
	Usage x509.ExtKeyUsage
}

// Sign issues a certificate for l with a fresh key, valid for LeafValidity, and returns both
// PEM-encoded (the key as PKCS #8), ready for tls.X509KeyPair or files.
func (a *Authority) Sign(l Leaf) (certPEM, keyPEM []byte, err error) {
	key, err := NewKey()
	if err != nil {
		return nil, nil, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 120))
	if err != nil {
		return nil, nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: l.CommonName, Organization: l.Organization},
		NotBefore:    now.Add(-skew),
		NotAfter:     now.Add(LeafValidity),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{l.Usage},
		DNSNames:     l.DNSNames,
		IPAddresses:  l.IPs,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, a.Cert, key.Public(), a.Key)
	if err != nil {
		return nil, nil, fmt.Errorf("signing a certificate for %s: %w", l.CommonName, err)
	}
	if keyPEM, err = KeyPEM(key); err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: cert.CertificateBlockType, Bytes: der}), keyPEM, nil
}

// NewKey makes an ECDSA P-256 key, the kind every certificate here has.
func NewKey() (*ecdsa.PrivateKey, error) { return ecdsa.GenerateKey(elliptic.P256(), rand.Reader) }

// KeyPEM encodes a private key as a PEM PKCS #8 block.
func KeyPEM(key crypto.PrivateKey) ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), nil
}
