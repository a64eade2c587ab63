package authorityhook

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/certwatcher"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/machina-dev/machina/internal/certs"
	machina "github.com/machina-dev/machina/internal/manager"
)

// ConfigurationName is the ValidatingWebhookConfiguration the manager keeps up to date.
const ConfigurationName = "machina-authority"

// Paths the webhook serves.
const (
	MachineAPIPath = "/validate-machine-api-create"
	ClusterAPIPath = "/validate-cluster-api-create"
)

// Options say where the webhook listens and how the apiserver reaches it.
type Options struct {
	// ListenAddr is the HTTPS listen address; 127.0.0.1:0 (any free local port) when empty.
	ListenAddr string
	// Service, when set, is how the apiserver reaches the webhook in a cluster (the Service in
	// front of the manager's replicas). When nil the configuration uses https://<listen
	// address> of the leader, which suits an apiserver on the same host (machina up, tests).
	Service *admissionregistrationv1.ServiceReference
	// CertDir may hold tls.crt, tls.key and ca.crt (for example a mounted cert-manager
	// Secret). Without them the replicas share a self-signed CA kept in the Secret CASecret.
	CertDir string
	// CASecret is the Secret of the self-signed CA; when empty, CASecretName in the Service's
	// namespace, or in DefaultCASecretNamespace without a Service.
	CASecret client.ObjectKey
	// Recheck is how often the registration and the CA Secret are looked at again, and put
	// right when someone changed them; DefaultRecheck when zero.
	Recheck time.Duration
}

// DefaultRecheck is how often the leader checks the configuration, and every replica the CA
// Secret: a deleted or edited configuration is put back within it.
const DefaultRecheck = 10 * time.Second

// withDefaults fills in what o leaves empty.
func (o Options) withDefaults() Options {
	if o.ListenAddr == "" {
		o.ListenAddr = "127.0.0.1:0"
	}
	if o.Recheck <= 0 {
		o.Recheck = DefaultRecheck
	}
	if o.CASecret.Name == "" {
		o.CASecret.Name = CASecretName
	}
	if o.CASecret.Namespace == "" {
		o.CASecret.Namespace = DefaultCASecretNamespace
		if o.Service != nil {
			o.CASecret.Namespace = o.Service.Namespace
		}
	}
	return o
}

// +kubebuilder:rbac:groups=admissionregistration.k8s.io,resources=validatingwebhookconfigurations,verbs=get;create;update
// +kubebuilder:rbac:groups=authentication.k8s.io,resources=selfsubjectreviews,verbs=create
// +kubebuilder:rbac:groups=machine.openshift.io,resources=machines;machinesets;machinehealthchecks,verbs=get
// +kubebuilder:rbac:groups=cluster.x-k8s.io,resources=machines;machinesets;machinehealthchecks,verbs=get

// Setup serves the webhook from mgr (on every replica) and registers its configuration (from
// the leader; see registrar).
func Setup(mgr ctrl.Manager, ns Namespaces, o Options) error {
	o = o.withDefaults()
	ln, err := net.Listen("tcp", o.ListenAddr)
	if err != nil {
		return fmt.Errorf("authority webhook: %w", err)
	}
	tcp, _ := ln.Addr().(*net.TCPAddr)
	if tcp != nil && o.Service == nil && tcp.IP.IsUnspecified() {
		_ = ln.Close()
		return fmt.Errorf("authority webhook: listening on all addresses (%s) needs a Service for the apiserver to call (--webhook-service namespace/name:port)", o.ListenAddr)
	}
	cert, err := certificate(mgr, o, tcp)
	if err != nil {
		_ = ln.Close()
		return fmt.Errorf("authority webhook certificate: %w", err)
	}
	if err := mgr.Add(cert.runnable()); err != nil {
		return err
	}
	rules := &Rules{Reader: mgr.GetAPIReader(), Namespaces: ns}
	mux := http.NewServeMux()
	mux.Handle(MachineAPIPath, &admission.Webhook{Handler: admission.HandlerFunc(rules.MachineAPICreate)})
	mux.Handle(ClusterAPIPath, &admission.Webhook{Handler: admission.HandlerFunc(rules.ClusterAPICreate)})
	mux.Handle(MachineAPIScalePath, &admission.Webhook{Handler: admission.HandlerFunc(rules.MachineAPIScale)})
	mux.Handle(ClusterAPIScalePath, &admission.Webhook{Handler: admission.HandlerFunc(rules.ClusterAPIScale)})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, TLSConfig: cert.tlsConfig()}
	if err := mgr.Add(serveRunnable{srv: srv, ln: ln}); err != nil {
		return err
	}
	return mgr.Add(&registrar{c: mgr.GetClient(), r: mgr.GetAPIReader(), ns: ns, ca: cert.ca, service: o.Service,
		url: "https://" + ln.Addr().String(), period: o.Recheck})
}

type serveRunnable struct {
	srv *http.Server
	ln  net.Listener
}

// NeedLeaderElection: every replica answers admission requests.
func (serveRunnable) NeedLeaderElection() bool { return false }

func (s serveRunnable) Start(ctx context.Context) error {
	errc := make(chan error, 1)
	go func() { errc <- s.srv.ServeTLS(s.ln, "", "") }()
	select {
	case <-ctx.Done():
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		return s.srv.Shutdown(sctx)
	case err := <-errc:
		if errors.Is(err, http.ErrServerClosed) {
			return nil
		}
		return err
	}
}

// servingCert is the webhook's certificate and the CA the apiserver is told to trust.
type servingCert struct {
	watcher *certwatcher.CertWatcher // tls.crt/tls.key of CertDir, reloaded when they change
	caPEM   []byte                   // and its ca.crt
	shared  *sharedCA                // or a certificate of the self-signed CA the replicas share
}

// tlsConfig serves the certificate with the manager's TLS policy (TLS 1.2 or newer).
func (s servingCert) tlsConfig() *tls.Config {
	c := &tls.Config{}
	if s.watcher != nil {
		c.GetCertificate = s.watcher.GetCertificate
	} else {
		c.GetCertificate = s.shared.GetCertificate
	}
	machina.SecureTLS(c)
	return c
}

// runnable keeps the certificate current: the watcher of CertDir, or the shared CA.
func (s servingCert) runnable() manager.Runnable {
	if s.watcher != nil {
		return s.watcher
	}
	return s.shared
}

// ca returns the CA to register, once known.
func (s servingCert) ca(ctx context.Context) ([]byte, error) {
	if s.shared != nil {
		return s.shared.CA(ctx)
	}
	return s.caPEM, nil
}

// certificate serves the certificate of o.CertDir (mounted), or one signed by the CA the
// replicas share in o.CASecret, valid for the Service's names, localhost and the listen
// address when it is a specific IP.
func certificate(mgr ctrl.Manager, o Options, addr *net.TCPAddr) (servingCert, error) {
	if s, ok, err := mounted(o.CertDir); ok || err != nil {
		return s, err
	}
	dns := []string{"localhost"}
	if s := o.Service; s != nil {
		dns = append(dns, s.Name, s.Name+"."+s.Namespace, s.Name+"."+s.Namespace+".svc", s.Name+"."+s.Namespace+".svc.cluster.local")
	}
	ips := []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}
	if addr != nil && !addr.IP.IsUnspecified() && !addr.IP.IsLoopback() {
		ips = append(ips, addr.IP)
	}
	leaf := certs.Leaf{CommonName: "machina-authority-webhook", DNSNames: dns, IPs: ips, Usage: x509.ExtKeyUsageServerAuth}
	return servingCert{shared: newSharedCA(mgr.GetClient(), mgr.GetAPIReader(), o.CASecret, leaf, o.Recheck)}, nil
}

// mounted serves tls.crt and tls.key from dir, watched so a rotated Secret takes effect
// without a restart (ca.crt is read once: a new CA needs a restart to be registered); ok is
// false when dir holds no tls.crt.
func mounted(dir string) (s servingCert, ok bool, err error) {
	if dir == "" {
		return servingCert{}, false, nil
	}
	crt, key := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	if _, err := os.Stat(crt); err != nil {
		return servingCert{}, false, nil
	}
	ca, err := os.ReadFile(filepath.Join(dir, "ca.crt"))
	if err != nil {
		return servingCert{}, true, fmt.Errorf("%s has tls.crt but no ca.crt for the apiserver to trust: %w", dir, err)
	}
	w, err := certwatcher.New(crt, key)
	if err != nil {
		return servingCert{}, true, fmt.Errorf("--webhook-cert-dir %s: %w", dir, err)
	}
	return servingCert{watcher: w, caPEM: ca}, true, nil
}

var _ manager.Runnable = serveRunnable{}
