package authorityhook

import (
	"fmt"
	"strconv"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/machina-dev/machina/internal/manager"
)

// GroupName is the --controllers name of the webhook.
const GroupName = "admission"

// Group is this controller group, for the list in internal/controllers.
func Group() manager.Group {
	return manager.Group{
		Name:        GroupName,
		Description: "admission webhook for authority rules across the two APIs (same-named resources, unpaused Cluster API copies)",
		Setup: func(mgr ctrl.Manager, env manager.Env) error {
			svc, err := ParseService(env.Webhook.Service)
			if err != nil {
				return err
			}
			mapiNS, capiNS := env.Namespaces()
			return Setup(mgr, Namespaces{MachineAPI: mapiNS, ClusterAPI: capiNS},
				Options{ListenAddr: env.Webhook.ListenAddr, Service: svc, CertDir: env.Webhook.CertDir})
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
