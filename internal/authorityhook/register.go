package authorityhook

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/spf13/pflag"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/machina-dev/machina/internal/manager"
)

// GroupName is the --controllers name of the webhook.
const GroupName = "admission"

// Flags are the webhook's command-line settings: where it listens and how the apiserver
// reaches it.
type Flags struct {
	// ListenAddr is the HTTPS address; 127.0.0.1:0 when empty (an apiserver on this host).
	ListenAddr string
	// Service is "namespace/name:port" of the Service in front of the manager in a cluster;
	// empty means the apiserver calls https://<ListenAddr> directly.
	Service string
	// CertDir may hold tls.crt, tls.key and ca.crt; otherwise the replicas share a self-signed
	// CA in the Secret CASecretName.
	CertDir string
}

// AddFlags registers the webhook's flags, which set f.
func (f *Flags) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&f.ListenAddr, "webhook-bind-address", f.ListenAddr, `HTTPS address of the admission webhook (group "admission"); default 127.0.0.1 on a free port, for an apiserver on this host`)
	fs.StringVar(&f.Service, "webhook-service", f.Service, `Service through which the apiserver reaches the webhook, "namespace/name:port" (in a cluster; then --webhook-bind-address is typically ":9443")`)
	fs.StringVar(&f.CertDir, "webhook-cert-dir", f.CertDir, "directory with tls.crt, tls.key and ca.crt for the webhook (for example a mounted cert-manager Secret); when empty, the replicas share a self-signed CA in the Secret "+CASecretName+" in the --webhook-service's namespace (machina-system without one)")
}

// Group is this controller group, for the list in internal/controllers; its Setup reads f.
func Group(f *Flags) manager.Group {
	return manager.Group{
		Name:        GroupName,
		Description: "admission webhook for authority rules across the two APIs (same-named resources, unpaused Cluster API copies)",
		AddFlags:    f.AddFlags,
		Setup: func(mgr ctrl.Manager, env manager.Env) error {
			svc, err := ParseService(f.Service)
			if err != nil {
				return err
			}
			mapiNS, capiNS := env.Namespaces()
			return Setup(mgr, Namespaces{MachineAPI: mapiNS, ClusterAPI: capiNS},
				Options{ListenAddr: f.ListenAddr, Service: svc, CertDir: f.CertDir})
		},
	}
}

// ParseService reads "namespace/name:port" (port 443 when left out); "" is no Service.
func ParseService(s string) (*admissionregistrationv1.ServiceReference, error) {
	if s == "" {
		return nil, nil
	}
	nsName, port, hasPort := strings.Cut(s, ":")
	ns, name, ok := strings.Cut(nsName, "/")
	if !ok || ns == "" || name == "" {
		return nil, fmt.Errorf("webhook service %q: want namespace/name:port", s)
	}
	ref := &admissionregistrationv1.ServiceReference{Namespace: ns, Name: name, Port: ptr.To[int32](443)}
	if hasPort {
		p, err := strconv.ParseInt(port, 10, 32)
		if err != nil || p < 1 || p > 65535 {
			return nil, fmt.Errorf("webhook service %q: port %q is not a number from 1 to 65535", s, port)
		}
		ref.Port = ptr.To(int32(p))
	}
	return ref, nil
}
