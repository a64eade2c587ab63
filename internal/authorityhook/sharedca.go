package authorityhook

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/machina-dev/machina/internal/certs"
)

// CASecretName is the Secret in which the manager's replicas keep the webhook's self-signed
// CA when --webhook-cert-dir gives them no certificate.
const CASecretName = "machina-webhook-ca" //nolint:gosec // G101: the name of a Secret, not a credential

// DefaultCASecretNamespace holds the CA Secret when the webhook has no Service (machina up,
// the lab): the manager's namespace in config/. With a Service, the Service's namespace.
const DefaultCASecretNamespace = "machina-system"

// Keys of the CA Secret: the CA's certificate and its private key, PEM.
const (
	caCertKey = "ca.crt"
	caKeyKey  = "ca.key"
)

// renewBefore: a stored CA this close to its expiry is replaced, and a replica signs itself a
// new serving certificate this long before its own expires.
const renewBefore = 30 * 24 * time.Hour

// The CA Secret in the manager's namespace: any replica may create it (create cannot be limited
// to a name), read and replace only it. config/openshift moves this Role with the manager.
// +kubebuilder:rbac:groups="",resources=secrets,verbs=create,namespace=machina-system
// +kubebuilder:rbac:groups="",resources=secrets,resourceNames=machina-webhook-ca,verbs=get;update,namespace=machina-system

// sharedCA is the webhook's self-signed CA kept in a Secret, so that every replica serves a
// certificate the one registered caBundle trusts, whichever replica the Service sends the
// apiserver to. The first replica to find no Secret makes the CA and creates it; one that loses
// that race (AlreadyExists) reads the winner's. Each replica signs its own serving certificate
// with the CA, for its own names, and reads the Secret again every period: when the CA in it
// changed (deleted and made anew, or replaced near its expiry), the replica serves a
// certificate of the new one, and the registrar registers the new one.
type sharedCA struct {
	c      client.Client
	r      client.Reader // uncached: no informer over the namespace's Secrets
	key    client.ObjectKey
	leaf   certs.Leaf
	period time.Duration

	mu    sync.RWMutex
	caPEM []byte
	cert  *tls.Certificate
	ready chan struct{} // closed once the first certificate is served
	once  sync.Once
}

func newSharedCA(c client.Client, r client.Reader, key client.ObjectKey, leaf certs.Leaf, period time.Duration) *sharedCA {
	return &sharedCA{c: c, r: r, key: key, leaf: leaf, period: period, ready: make(chan struct{})}
}

// NeedLeaderElection: every replica serves, so every replica needs the certificate.
func (*sharedCA) NeedLeaderElection() bool { return false }

// Start reads (or creates) the Secret, then again every period until ctx ends.
func (s *sharedCA) Start(ctx context.Context) error {
	log := ctrl.LoggerFrom(ctx).WithValues("secret", s.key.String())
	for {
		err := s.refresh(ctx)
		if err != nil && ctx.Err() == nil {
			log.Error(err, "authority webhook CA; retrying")
		}
		wait := s.period
		if err != nil && !s.isReady() {
			wait = min(wait, 2*time.Second)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(wait):
		}
	}
}

func (s *sharedCA) isReady() bool {
	select {
	case <-s.ready:
		return true
	default:
		return false
	}
}

// refresh signs a new serving certificate when the Secret's CA is not the one served, or the
// served certificate nears its expiry.
func (s *sharedCA) refresh(ctx context.Context) error {
	ca, err := s.load(ctx)
	if err != nil {
		return err
	}
	caPEM := ca.CertPEM()
	s.mu.RLock()
	current := s.cert != nil && bytes.Equal(caPEM, s.caPEM) && time.Until(s.cert.Leaf.NotAfter) > renewBefore
	s.mu.RUnlock()
	if current {
		return nil
	}
	certPEM, keyPEM, err := ca.Sign(s.leaf)
	if err != nil {
		return fmt.Errorf("signing the webhook's serving certificate: %w", err)
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return fmt.Errorf("the webhook's serving certificate: %w", err)
	}
	s.mu.Lock()
	s.caPEM, s.cert = caPEM, &cert
	s.mu.Unlock()
	s.once.Do(func() { close(s.ready) })
	ctrl.LoggerFrom(ctx).Info("authority webhook serves a certificate of the CA in its Secret", "secret", s.key.String(),
		"ca", ca.Cert.SerialNumber.String())
	return nil
}

// load returns the CA in the Secret: it creates the Secret when there is none, and replaces a
// CA that cannot be read or is about to expire.
func (s *sharedCA) load(ctx context.Context) (*certs.Authority, error) {
	sec := &corev1.Secret{}
	err := s.r.Get(ctx, s.key, sec)
	if apierrors.IsNotFound(err) {
		return s.create(ctx)
	}
	if err != nil {
		return nil, fmt.Errorf("reading Secret %s: %w", s.key, err)
	}
	ca, err := parseCA(sec)
	if err == nil {
		return ca, nil
	}
	ctrl.LoggerFrom(ctx).Info("replacing the authority webhook CA", "secret", s.key.String(), "reason", err.Error())
	return s.replace(ctx, sec)
}

// parseCA reads the CA of the Secret; an error says why it is unusable.
func parseCA(sec *corev1.Secret) (*certs.Authority, error) {
	ca, err := certs.Parse(sec.Data[caCertKey], sec.Data[caKeyKey])
	if err != nil {
		return nil, err
	}
	if left := time.Until(ca.Cert.NotAfter); left < renewBefore {
		return nil, fmt.Errorf("CA expires in %s", left.Round(time.Hour))
	}
	return ca, nil
}

// create makes a CA and stores it in a new Secret; when another replica was first, its CA.
func (s *sharedCA) create(ctx context.Context) (*certs.Authority, error) {
	ca, data, err := newCA()
	if err != nil {
		return nil, err
	}
	sec := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: s.key.Name, Namespace: s.key.Namespace,
			Labels: map[string]string{"app.kubernetes.io/managed-by": "machina"}},
		Type: corev1.SecretTypeOpaque,
		Data: data,
	}
	err = s.c.Create(ctx, sec)
	if apierrors.IsAlreadyExists(err) {
		got := &corev1.Secret{}
		if err := s.r.Get(ctx, s.key, got); err != nil {
			return nil, fmt.Errorf("reading Secret %s another replica created: %w", s.key, err)
		}
		return parseCA(got)
	}
	if err != nil {
		return nil, fmt.Errorf("creating Secret %s: %w", s.key, err)
	}
	return ca, nil
}

// replace writes a new CA over sec, conditional on its resourceVersion: when another replica
// changed the Secret meanwhile, the next look reads what it wrote.
func (s *sharedCA) replace(ctx context.Context, sec *corev1.Secret) (*certs.Authority, error) {
	ca, data, err := newCA()
	if err != nil {
		return nil, err
	}
	sec.Data = data
	if err := s.c.Update(ctx, sec); err != nil {
		return nil, fmt.Errorf("replacing the CA in Secret %s: %w", s.key, err)
	}
	return ca, nil
}

func newCA() (*certs.Authority, map[string][]byte, error) {
	ca, err := certs.New("machina authority webhook CA")
	if err != nil {
		return nil, nil, err
	}
	key, err := ca.KeyPEM()
	if err != nil {
		return nil, nil, err
	}
	return ca, map[string][]byte{caCertKey: ca.CertPEM(), caKeyKey: key}, nil
}

// GetCertificate serves the certificate signed by the Secret's CA (tls.Config.GetCertificate).
func (s *sharedCA) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.cert == nil {
		return nil, errors.New("authority webhook: no serving certificate yet (its CA Secret is not read yet)")
	}
	return s.cert, nil
}

// CA waits until the Secret has been read and returns its CA, PEM.
func (s *sharedCA) CA(ctx context.Context) ([]byte, error) {
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-s.ready:
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.caPEM, nil
}
