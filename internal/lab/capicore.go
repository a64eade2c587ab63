package lab

import (
	"context"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/machina-dev/machina/internal/certs"
)

// capiCoreBuild builds the upstream Cluster API core controller manager (the program of the
// core provider's image) from the same pinned module as clusterctl.
var capiCoreBuild = clusterAPIProgram("the Cluster API core controllers "+ClusterctlVersion, "capi-core", "capi-manager", "sigs.k8s.io/cluster-api/core")

// EnsureCAPICore returns the path of the upstream Cluster API core manager, building it from
// the pinned module into the cache directory on first use.
func EnsureCAPICore(ctx context.Context, progress io.Writer) (string, error) {
	dir, err := capiCoreBuild.ensure(ctx, progress)
	if err != nil {
		return "", err
	}
	return filepath.Join(dir, "capi-manager"), nil
}

// capiCoreExtraKinds are the CRDs the upstream core manager watches beyond the Cluster API
// kinds the lab installs for machina.
var capiCoreExtraKinds = []schema.GroupKind{
	{Group: "addons.cluster.x-k8s.io", Kind: "ClusterResourceSet"},
	{Group: "addons.cluster.x-k8s.io", Kind: "ClusterResourceSetBinding"},
	{Group: "ipam.cluster.x-k8s.io", Kind: "IPAddress"},
	{Group: "ipam.cluster.x-k8s.io", Kind: "IPAddressClaim"},
	{Group: "runtime.cluster.x-k8s.io", Kind: "ExtensionConfig"},
}

// CAPICore is the upstream Cluster API core controller manager running against the lab, in
// place of machina's clusterapi controllers: how the benchmarks measure the simulated
// provider under a core that is not machina's.
type CAPICore struct {
	lab  *Lab
	proc *process
	// MetricsURL is its diagnostics endpoint's /metrics (served without authentication).
	MetricsURL string
	LogPath    string
}

// StartCAPICore builds (once) and starts the upstream core manager with the lab's
// administrator credentials and default settings besides extraArgs, after installing the
// core CRDs the lab lacks from the pinned sigs.k8s.io/cluster-api module (moduleDir is that
// module's directory, see ModuleDir). Its webhooks serve a certificate of the lab's CA but
// are not registered: the lab's CRDs and admission do not call them. It returns when the
// manager's /readyz answers ok.
func (l *Lab) StartCAPICore(ctx context.Context, moduleDir string, progress io.Writer, extraArgs ...string) (c *CAPICore, err error) {
	if progress == nil {
		progress = io.Discard
	}
	bin, err := EnsureCAPICore(ctx, progress)
	if err != nil {
		return nil, err
	}
	if _, err := InstallModuleCRDs(ctx, l.Config, filepath.Join(moduleDir, "core"), capiCoreExtraKinds...); err != nil {
		return nil, fmt.Errorf("lab: installing the Cluster API core's CRDs: %w", err)
	}
	certDir := filepath.Join(l.Dir, "capi-core", "webhook-certs")
	if err := l.writeServingCert(certDir, "capi-webhook-service"); err != nil {
		return nil, err
	}
	c = &CAPICore{lab: l, LogPath: filepath.Join(l.Dir, "logs", "capi-core.log")}
	start := time.Now()
	var metricsPort int
	p, err := l.startWithPorts(ctx, "capi-core", 3, func(ports []int) (*process, error) {
		metricsPort = ports[1]
		args := append([]string{
			"--kubeconfig=" + l.KubeconfigPath,
			"--leader-elect=false",
			"--health-addr=127.0.0.1:" + strconv.Itoa(ports[0]),
			"--diagnostics-address=127.0.0.1:" + strconv.Itoa(ports[1]),
			"--insecure-diagnostics",
			"--webhook-port=" + strconv.Itoa(ports[2]),
			"--webhook-cert-dir=" + certDir,
		}, extraArgs...)
		return startProcess("capi-core", c.LogPath, bin, args...)
	}, func(p *process) error {
		return waitHealthy(ctx, p, &http.Client{Timeout: 2 * time.Second}, healthURL(p), "ok", 3*time.Minute)
	})
	if err != nil {
		return nil, fmt.Errorf("lab: starting the Cluster API core controllers: %w", err)
	}
	c.proc, c.MetricsURL = p, "http://127.0.0.1:"+strconv.Itoa(metricsPort)+"/metrics"
	fmt.Fprintf(progress, "lab: Cluster API core controllers %s ready in %s (log %s)\n",
		ClusterctlVersion, time.Since(start).Round(100*time.Millisecond), c.LogPath)
	return c, nil
}

// Failed returns an error if the core manager has exited on its own.
func (c *CAPICore) Failed() error {
	if c == nil || c.proc == nil || !c.proc.exited() {
		return nil
	}
	return c.proc.failure()
}

// Stop ends the core manager; safe to call more than once.
func (c *CAPICore) Stop() {
	if c == nil || c.proc == nil {
		return
	}
	c.proc.stop(15 * time.Second)
	c.lab.removeProc(c.proc)
	c.proc = nil
}

// writeServingCert writes a webhook serving certificate for 127.0.0.1 and localhost, signed
// by the lab's CA, as tls.crt and tls.key in dir.
func (l *Lab) writeServingCert(dir, name string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	certPEM, keyPEM, err := l.pki.ca.Sign(certs.Leaf{CommonName: name, DNSNames: []string{"localhost"},
		IPs: []net.IP{net.ParseIP("127.0.0.1")}, Usage: x509.ExtKeyUsageServerAuth})
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "tls.key"), keyPEM, 0o600); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "tls.crt"), certPEM, 0o600)
}
