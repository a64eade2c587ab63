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
	authenticationv1 "k8s.io/api/authentication/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
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
	// front of the manager). When nil the configuration uses https://<listen address>,
	// which suits an apiserver on the same host (machina up, tests).
	Service *admissionregistrationv1.ServiceReference
	// CertDir may hold tls.crt, tls.key and ca.crt (for example a mounted cert-manager
	// Secret). Without them a self-signed certificate is made at start.
	CertDir string
}

// +kubebuilder:rbac:groups=admissionregistration.k8s.io,resources=validatingwebhookconfigurations,verbs=get;create;update
// +kubebuilder:rbac:groups=authentication.k8s.io,resources=selfsubjectreviews,verbs=create
// +kubebuilder:rbac:groups=machine.openshift.io,resources=machines;machinesets;machinehealthchecks,verbs=get
// +kubebuilder:rbac:groups=cluster.x-k8s.io,resources=machines;machinesets;machinehealthchecks,verbs=get

// Setup serves the webhook from mgr and registers its configuration.
func Setup(mgr ctrl.Manager, ns Namespaces, o Options) error {
	if o.ListenAddr == "" {
		o.ListenAddr = "127.0.0.1:0"
	}
	cert, err := certificate(o)
	if err != nil {
		return fmt.Errorf("authority webhook certificate: %w", err)
	}
	if cert.watcher != nil {
		if err := mgr.Add(cert.watcher); err != nil {
			return err
		}
	}
	ln, err := net.Listen("tcp", o.ListenAddr)
	if err != nil {
		return fmt.Errorf("authority webhook: %w", err)
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
	if tcp, ok := ln.Addr().(*net.TCPAddr); ok && o.Service == nil && tcp.IP.IsUnspecified() {
		_ = ln.Close()
		return fmt.Errorf("authority webhook: listening on all addresses (%s) needs a Service for the apiserver to call (--webhook-service namespace/name:port)", o.ListenAddr)
	}
	reg := &registrar{c: mgr.GetClient(), r: mgr.GetAPIReader(), ns: ns, caPEM: cert.caPEM, service: o.Service, url: "https://" + ln.Addr().String()}
	return mgr.Add(reg)
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

// registrar writes the ValidatingWebhookConfiguration once the manager runs.
type registrar struct {
	c       client.Client
	r       client.Reader // uncached: one configuration needs no informer
	ns      Namespaces
	caPEM   []byte
	service *admissionregistrationv1.ServiceReference
	url     string
}

func (*registrar) NeedLeaderElection() bool { return false }

func (r *registrar) Start(ctx context.Context) error {
	// The manager's own creates (mirrors, MachineSet replicas) skip the webhook.
	review := &authenticationv1.SelfSubjectReview{}
	if err := r.c.Create(ctx, review); err != nil {
		return fmt.Errorf("authority webhook: who am I (SelfSubjectReview): %w", err)
	}
	want := r.configuration(review.Status.UserInfo.Username)
	for {
		err := r.apply(ctx, want)
		if err == nil {
			ctrl.LoggerFrom(ctx).Info("authority webhook registered", "configuration", ConfigurationName)
			<-ctx.Done()
			return nil
		}
		ctrl.LoggerFrom(ctx).Error(err, "registering the authority webhook; retrying")
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(2 * time.Second):
		}
	}
}

func (r *registrar) apply(ctx context.Context, want *admissionregistrationv1.ValidatingWebhookConfiguration) error {
	got := &admissionregistrationv1.ValidatingWebhookConfiguration{}
	err := r.r.Get(ctx, client.ObjectKey{Name: ConfigurationName}, got)
	if apierrors.IsNotFound(err) {
		return r.c.Create(ctx, want)
	}
	if err != nil {
		return err
	}
	if equality.Semantic.DeepEqual(got.Webhooks, want.Webhooks) && got.Labels["app.kubernetes.io/managed-by"] == "machina" {
		return nil
	}
	got.Webhooks = want.Webhooks
	got.Labels = want.Labels
	return r.c.Update(ctx, got)
}

func (r *registrar) configuration(self string) *admissionregistrationv1.ValidatingWebhookConfiguration {
	notSelf := admissionregistrationv1.MatchCondition{Name: "not-machina",
		Expression: fmt.Sprintf("request.userInfo.username != %q", self)}
	unpaused := admissionregistrationv1.MatchCondition{Name: "unpaused",
		Expression: fmt.Sprintf("!has(object.metadata.annotations) || !(%q in object.metadata.annotations)", clusterv1.PausedAnnotation)}
	creates := []string{"machines", "machinesets", "machinehealthchecks"}
	scales := []string{"machinesets/scale"}
	hook := func(name, path, group, ns string, op admissionregistrationv1.OperationType, resources []string,
		conds ...admissionregistrationv1.MatchCondition) admissionregistrationv1.ValidatingWebhook {
		cc := admissionregistrationv1.WebhookClientConfig{CABundle: r.caPEM}
		if r.service != nil {
			svc := *r.service
			svc.Path = ptr.To(path)
			cc.Service = &svc
		} else {
			cc.URL = ptr.To(r.url + path)
		}
		return admissionregistrationv1.ValidatingWebhook{
			Name:         name,
			ClientConfig: cc,
			Rules: []admissionregistrationv1.RuleWithOperations{{
				Operations: []admissionregistrationv1.OperationType{op},
				Rule: admissionregistrationv1.Rule{APIGroups: []string{group}, APIVersions: []string{"*"},
					Resources: resources, Scope: ptr.To(admissionregistrationv1.NamespacedScope)},
			}},
			NamespaceSelector:       &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": ns}},
			MatchConditions:         append([]admissionregistrationv1.MatchCondition{notSelf}, conds...),
			MatchPolicy:             ptr.To(admissionregistrationv1.Exact),
			FailurePolicy:           ptr.To(admissionregistrationv1.Fail),
			SideEffects:             ptr.To(admissionregistrationv1.SideEffectClassNone),
			AdmissionReviewVersions: []string{"v1"},
			TimeoutSeconds:          ptr.To[int32](5),
		}
	}
	return &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: ConfigurationName, Labels: map[string]string{"app.kubernetes.io/managed-by": "machina"}},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{
			hook("machine-api-create.authority.machina.dev", MachineAPIPath, "machine.openshift.io", r.ns.MachineAPI, admissionregistrationv1.Create, creates),
			hook("cluster-api-create.authority.machina.dev", ClusterAPIPath, "cluster.x-k8s.io", r.ns.ClusterAPI, admissionregistrationv1.Create, creates, unpaused),
			hook("machine-api-scale.authority.machina.dev", MachineAPIScalePath, "machine.openshift.io", r.ns.MachineAPI, admissionregistrationv1.Update, scales),
			hook("cluster-api-scale.authority.machina.dev", ClusterAPIScalePath, "cluster.x-k8s.io", r.ns.ClusterAPI, admissionregistrationv1.Update, scales),
		},
	}
}

// servingCert is the webhook's certificate and the CA the apiserver is told to trust.
type servingCert struct {
	static  *tls.Certificate         // a self-signed certificate made at start
	watcher *certwatcher.CertWatcher // or tls.crt/tls.key of CertDir, reloaded when they change
	caPEM   []byte
}

// tlsConfig serves the certificate with the manager's TLS policy (TLS 1.2 or newer).
func (s servingCert) tlsConfig() *tls.Config {
	c := &tls.Config{}
	if s.watcher != nil {
		c.GetCertificate = s.watcher.GetCertificate
	} else {
		c.Certificates = []tls.Certificate{*s.static}
	}
	machina.SecureTLS(c)
	return c
}

// certificate serves tls.crt and tls.key from o.CertDir, watched so a rotated Secret takes
// effect without a restart (ca.crt is read once: a new CA needs a restart to be registered),
// or makes a self-signed one.
func certificate(o Options) (servingCert, error) {
	if o.CertDir != "" {
		crt, key := filepath.Join(o.CertDir, "tls.crt"), filepath.Join(o.CertDir, "tls.key")
		if _, err := os.Stat(crt); err == nil {
			ca, err := os.ReadFile(filepath.Join(o.CertDir, "ca.crt"))
			if err != nil {
				return servingCert{}, fmt.Errorf("%s has tls.crt but no ca.crt for the apiserver to trust: %w", o.CertDir, err)
			}
			w, err := certwatcher.New(crt, key)
			if err != nil {
				return servingCert{}, fmt.Errorf("--webhook-cert-dir %s: %w", o.CertDir, err)
			}
			return servingCert{watcher: w, caPEM: ca}, nil
		}
	}
	var dns []string
	if s := o.Service; s != nil {
		dns = append(dns, s.Name, s.Name+"."+s.Namespace, s.Name+"."+s.Namespace+".svc", s.Name+"."+s.Namespace+".svc.cluster.local")
	}
	cert, ca, err := selfSigned(append(dns, "localhost"), []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback})
	if err != nil {
		return servingCert{}, err
	}
	return servingCert{static: &cert, caPEM: ca}, nil
}

// selfSigned makes a CA and a serving certificate it signs (internal/certs), and returns the
// certificate and the CA's PEM.
func selfSigned(dns []string, ips []net.IP) (tls.Certificate, []byte, error) {
	ca, err := certs.New("machina authority webhook CA")
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	certPEM, keyPEM, err := ca.Sign(certs.Leaf{CommonName: "machina-authority-webhook", DNSNames: dns, IPs: ips,
		Usage: x509.ExtKeyUsageServerAuth})
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	return cert, ca.CertPEM(), err
}

var _ manager.Runnable = serveRunnable{}
