package manager

import (
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"

	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

// DefaultMetricsAddr is where the manager serves /metrics over HTTPS unless told otherwise.
const DefaultMetricsAddr = ":8443"

// The metrics endpoint authenticates callers with TokenReviews and authorizes them with
// SubjectAccessReviews (get on the non-resource URL, e.g. /metrics) against the apiserver.
// +kubebuilder:rbac:groups=authentication.k8s.io,resources=tokenreviews,verbs=create
// +kubebuilder:rbac:groups=authorization.k8s.io,resources=subjectaccessreviews,verbs=create

// metricsServer turns the metrics options into controller-runtime's: HTTPS with
// authentication and authorization by default; plain HTTP only when asked for and only on a
// loopback address; profiling only on that same server.
func (o Options) metricsServer() (metricsserver.Options, error) {
	addr := o.MetricsAddr
	if addr == "" {
		addr = DefaultMetricsAddr
	}
	if addr == "0" {
		if o.Pprof {
			return metricsserver.Options{}, fmt.Errorf("profiling is served on the metrics endpoint, which is disabled (metrics address 0)")
		}
		return metricsserver.Options{BindAddress: "0"}, nil
	}
	s := metricsserver.Options{BindAddress: addr}
	if o.MetricsInsecure {
		if !isLoopback(addr) {
			return s, fmt.Errorf("plain-HTTP metrics are served only on a loopback address (127.0.0.1:port, [::1]:port or localhost:port), not %q", addr)
		}
	} else {
		s.SecureServing = true
		s.FilterProvider = filters.WithAuthenticationAndAuthorization
		s.CertDir = o.MetricsCertDir
		s.TLSOpts = []func(*tls.Config){secureTLS}
	}
	if o.Pprof {
		s.ExtraHandlers = map[string]http.Handler{
			"/debug/pprof/":        http.HandlerFunc(pprof.Index), // also serves the named profiles (heap, goroutine, ...)
			"/debug/pprof/cmdline": http.HandlerFunc(pprof.Cmdline),
			"/debug/pprof/profile": http.HandlerFunc(pprof.Profile),
			"/debug/pprof/symbol":  http.HandlerFunc(pprof.Symbol),
			"/debug/pprof/trace":   http.HandlerFunc(pprof.Trace),
		}
	}
	return s, nil
}

// secureTLS is the TLS policy of every server the manager starts: TLS 1.2 or newer, and
// HTTP/1.1 only (HTTP/2's stream handling has had denial-of-service flaws, e.g. CVE-2023-44487,
// and nothing here needs it).
func secureTLS(c *tls.Config) {
	c.MinVersion = tls.VersionTLS12
	c.NextProtos = []string{"http/1.1"}
}

// SecureTLS applies the manager's TLS policy to c (for servers outside this package).
func SecureTLS(c *tls.Config) { secureTLS(c) }

func isLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
