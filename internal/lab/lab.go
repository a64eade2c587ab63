// Package lab runs a real Kubernetes control plane on this machine: etcd, kube-apiserver and
// (optionally) kube-controller-manager, built from pinned Go modules and started as child
// processes that die with their parent. It installs every CRD machina serves and hands back a
// rest.Config. `machina up` and the integration tests both start their clusters here.
package lab

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/machina-dev/machina/internal/certs"
)

// Options configure a lab.
type Options struct {
	// Dir holds everything the lab writes: etcd data, certificates, logs and the kubeconfig.
	// A lab started again on the same Dir finds the objects it had.
	Dir string
	// ControllerManager starts kube-controller-manager with the controllers a real cluster
	// gives machina: garbage collection, disruption (PDB status), node lifecycle, namespaces,
	// and ClusterRole aggregation. The manager's rights on provider kinds are aggregated, so a
	// lab whose controllers run as ManagerConfig needs it.
	ControllerManager bool
	// FastDisk turns off etcd's fsync: faster, and fine for throwaway test clusters.
	FastDisk bool
	// NodeMonitorGracePeriod, when set, replaces the lab's (NodeMonitorGracePeriod, also the
	// startup grace period): benchmarks whose kubelets renew at a production cadence (every
	// 10s rather than every 2s) give them a production grace period too.
	NodeMonitorGracePeriod time.Duration
	// Profiling serves the kube-apiserver's /debug/pprof/ endpoints (to the administrator)
	// for benchmarks; off otherwise.
	Profiling bool
	// AuditLog makes the kube-apiserver write a JSON-lines audit log to <Dir>/logs/audit.log
	// (AuditLogPath, ReadAudit): every mutating request (create, update, patch, delete,
	// deletecollection) on every resource, leases included, at level Metadata and only at
	// stage ResponseComplete; no reads.
	AuditLog bool
	// GoGCDefaults runs the kube-apiserver with Go's garbage collector defaults (GOGC=100, no
	// memory limit), as clusters run it, instead of the lab's (apiServerGC). Benchmarks set
	// it: with thousands of Machines the API server's live heap outgrows the lab's 1-GiB soft
	// limit, and above it the collector runs all the time (capi-scale 5000: 58 % of the API
	// server's CPU, and the run never finished).
	GoGCDefaults bool
	// Progress receives human-readable progress (binary builds, component starts). Optional.
	Progress io.Writer
}

// Lab is a running control plane.
type Lab struct {
	// Config authenticates as the lab administrator (system:masters).
	Config *rest.Config
	// KubeconfigPath is the administrator kubeconfig, <Dir>/kubeconfig.
	KubeconfigPath string
	// Dir is the lab's state directory.
	Dir string

	pki      *pki
	mu       sync.Mutex // guards procs
	procs    []*process // in start order
	restarts sync.Mutex // one restart or compaction at a time
	denied   denials    // RBAC refusals of ManagerConfig clients
	auditLog string     // the audit log's path, when Options.AuditLog
	goGC     []string   // the kube-apiserver's GOGC and GOMEMLIMIT, if any (apiServerGC)

	beforeRespawn func(old *process, attempt int) // a test's hook into restarts
}

// Start brings up the control plane and installs the CRDs. If ctx is cancelled during start,
// everything started so far is stopped before Start returns.
func Start(ctx context.Context, opts Options) (l *Lab, err error) {
	if opts.Dir == "" {
		return nil, errors.New("lab: Options.Dir is required")
	}
	progress := opts.Progress
	if progress == nil {
		progress = io.Discard
	}
	dir, err := filepath.Abs(opts.Dir)
	if err != nil {
		return nil, err
	}
	for _, sub := range []string{"logs", "etcd"} {
		if err := os.MkdirAll(filepath.Join(dir, sub), 0o700); err != nil {
			return nil, err
		}
	}
	bins, err := EnsureBinaries(ctx, progress)
	if err != nil {
		return nil, err
	}
	if opts.ControllerManager && bins.KubeControllerManager == "" {
		return nil, errors.New("lab: kube-controller-manager requested but KUBEBUILDER_ASSETS has none")
	}
	p, err := loadOrCreatePKI(filepath.Join(dir, "pki"))
	if err != nil {
		return nil, fmt.Errorf("lab: certificates: %w", err)
	}
	l = &Lab{Dir: dir, pki: p, KubeconfigPath: filepath.Join(dir, "kubeconfig")}
	l.denied.log = l.denialLog()
	defer func() {
		if err != nil {
			l.Stop()
			l = nil
		}
	}()

	start := time.Now()
	etcdURL, err := l.startEtcd(ctx, bins.Etcd, opts.FastDisk)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(progress, "lab: etcd %s ready at %s\n", EtcdVersion, etcdURL)
	if opts.AuditLog {
		l.auditLog = filepath.Join(dir, "logs", "audit.log")
	}
	if !opts.GoGCDefaults {
		l.goGC = apiServerGC()
	}
	host, err := l.startAPIServer(ctx, bins.KubeAPIServer, etcdURL, opts.Profiling)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(progress, "lab: kube-apiserver %s ready at %s\n", KubernetesVersion, host)
	if l.Config, err = l.UserConfig("machina-admin", "system:masters"); err != nil {
		return nil, err
	}
	if err := WriteKubeconfig(l.KubeconfigPath, l.Config, "machina-lab"); err != nil {
		return nil, err
	}
	if opts.ControllerManager {
		if err := l.startControllerManager(ctx, bins.KubeControllerManager, opts.NodeMonitorGracePeriod); err != nil {
			return nil, err
		}
		fmt.Fprintf(progress, "lab: kube-controller-manager %s ready\n", KubernetesVersion)
	}
	n, err := InstallCRDs(ctx, l.Config)
	if err != nil {
		return nil, err
	}
	np, err := InstallAdmission(ctx, l.Config)
	if err != nil {
		return nil, err
	}
	nr, err := InstallRBAC(ctx, l.Config)
	if err != nil {
		return nil, err
	}
	if opts.ControllerManager {
		if err := waitAggregated(ctx, l.Config); err != nil {
			return nil, err
		}
	}
	fmt.Fprintf(progress, "lab: %d CRDs, %d admission policy objects and %d RBAC objects installed; control plane up in %s\n",
		n, np, nr, time.Since(start).Round(100*time.Millisecond))
	return l, nil
}

// Stop ends every component, newest first, and waits for them to exit.
func (l *Lab) Stop() {
	if l == nil {
		return
	}
	l.restarts.Lock()
	defer l.restarts.Unlock()
	procs := l.running()
	for i := len(procs) - 1; i >= 0; i-- {
		procs[i].stop(15 * time.Second)
	}
	l.mu.Lock()
	l.procs = nil
	l.mu.Unlock()
}

// PIDs returns the process IDs of the running components.
func (l *Lab) PIDs() []int {
	var pids []int
	for _, p := range l.running() {
		if !p.exited() {
			pids = append(pids, p.cmd.Process.Pid)
		}
	}
	return pids
}

// Failed returns an error if any component has exited on its own. A component the lab killed
// to restart it (RestartAPIServer, RestartEtcd) is not reported.
func (l *Lab) Failed() error {
	for _, p := range l.running() {
		if p.exited() && !p.killed.Load() {
			return p.failure()
		}
	}
	return nil
}

// running returns a copy of the component list.
func (l *Lab) running() []*process {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]*process(nil), l.procs...)
}

// addProc appends p to the component list.
func (l *Lab) addProc(p *process) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.procs = append(l.procs, p)
}

// removeProc drops p from the component list.
func (l *Lab) removeProc(p *process) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.procs = slices.DeleteFunc(l.procs, func(q *process) bool { return q == p })
}

// replaceProc puts p where old was in the component list.
func (l *Lab) replaceProc(old, p *process) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if i := slices.Index(l.procs, old); i >= 0 {
		l.procs[i] = p
	}
}

// component returns the newest component named name, or nil.
func (l *Lab) component(name string) *process {
	procs := l.running()
	for i := len(procs) - 1; i >= 0; i-- {
		if procs[i].name == name {
			return procs[i]
		}
	}
	return nil
}

// UserConfig returns a rest.Config that authenticates with a client certificate for the given
// user name and groups, signed by the lab's CA. Tests use it to act as distinct users.
func (l *Lab) UserConfig(user string, groups ...string) (*rest.Config, error) {
	certPEM, keyPEM, err := l.pki.ca.Sign(certs.Leaf{CommonName: user, Organization: groups, Usage: x509.ExtKeyUsageClientAuth})
	if err != nil {
		return nil, err
	}
	ca, err := os.ReadFile(l.pki.path("ca.crt"))
	if err != nil {
		return nil, err
	}
	return &rest.Config{
		Host:            l.host(),
		TLSClientConfig: rest.TLSClientConfig{CAData: ca, CertData: certPEM, KeyData: keyPEM},
		QPS:             -1, // the lab is ours: no client-side throttling
	}, nil
}

func (l *Lab) host() string {
	if p := l.component("kube-apiserver"); p != nil {
		return p.url
	}
	return ""
}

// ManagerUser is the identity machina's controllers use in the lab: the name a machina
// manager has in a real cluster (namespace machina-system, ServiceAccount machina-manager),
// which the admission policies recognise as the sync and migration controllers.
const ManagerUser = "system:serviceaccount:machina-system:machina-manager"

// ManagerConfig returns a rest.Config for the lab's controllers: ManagerUser with a
// ServiceAccount's groups and nothing else, so the controllers have exactly the rights
// config/rbac and the aggregated provider roles give them in a real cluster. Requests RBAC
// refuses are recorded (ManagerDenials).
func (l *Lab) ManagerConfig() (*rest.Config, error) {
	cfg, err := l.UserConfig(ManagerUser, ManagerGroups...)
	if err != nil {
		return nil, err
	}
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return denialRecorder{rt: rt, d: &l.denied} })
	return cfg, nil
}

// WriteKubeconfig writes cfg (certificate-authenticated) as a self-contained kubeconfig.
func WriteKubeconfig(path string, cfg *rest.Config, name string) error {
	kc := clientcmdapi.NewConfig()
	kc.Clusters[name] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData}
	kc.AuthInfos[name] = &clientcmdapi.AuthInfo{ClientCertificateData: cfg.CertData, ClientKeyData: cfg.KeyData, Token: cfg.BearerToken}
	kc.Contexts[name] = &clientcmdapi.Context{Cluster: name, AuthInfo: name}
	kc.CurrentContext = name
	tmp := path + ".tmp"
	if err := clientcmd.WriteToFile(*kc, tmp); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// startWithPorts starts a component on fresh loopback ports, retrying with new ports when a
// port was taken between choosing it and binding it.
func (l *Lab) startWithPorts(ctx context.Context, name string, nports int, launch func(ports []int) (*process, error),
	healthy func(p *process) error) (*process, error) {
	var lastErr error
	for attempt := 0; attempt < 3; attempt++ {
		ports, err := freePorts(nports)
		if err != nil {
			return nil, err
		}
		p, err := launch(ports)
		if err != nil {
			return nil, err
		}
		l.addProc(p)
		if lastErr = healthy(p); lastErr == nil {
			return p, nil
		}
		p.stop(5 * time.Second)
		l.removeProc(p)
		if ctx.Err() != nil || !strings.Contains(tail(p.logPath, 40), "address already in use") {
			return nil, lastErr
		}
	}
	return nil, fmt.Errorf("%s: %w", name, lastErr)
}

func (l *Lab) startEtcd(ctx context.Context, bin string, fastDisk bool) (string, error) {
	var url string
	_, err := l.startWithPorts(ctx, "etcd", 2, func(ports []int) (*process, error) {
		url = "http://127.0.0.1:" + strconv.Itoa(ports[0])
		peer := "http://127.0.0.1:" + strconv.Itoa(ports[1])
		args := []string{
			"--name=machina-lab",
			"--data-dir=" + filepath.Join(l.Dir, "etcd"),
			"--listen-client-urls=" + url, "--advertise-client-urls=" + url,
			"--listen-peer-urls=" + peer, "--initial-advertise-peer-urls=" + peer,
			"--initial-cluster=machina-lab=" + peer,
			"--quota-backend-bytes=8589934592",
			"--log-level=warn",
		}
		if fastDisk {
			args = append(args, "--unsafe-no-fsync=true")
		}
		p, err := startProcess("etcd", filepath.Join(l.Dir, "logs", "etcd.log"), bin, args...)
		if p != nil {
			p.url = url
		}
		return p, err
	}, func(p *process) error { return etcdHealthy(ctx, p) })
	return url, err
}

// etcdHealthy waits until etcd p reports itself healthy.
func etcdHealthy(ctx context.Context, p *process) error {
	return waitHealthy(ctx, p, &http.Client{Timeout: 2 * time.Second}, p.url+"/health", `"health":"true"`, 60*time.Second)
}

// apiServerGC is the kube-apiserver's garbage collector setting, unless the environment sets
// one: collect at five times the live heap (GOGC=400) below a soft limit of 1 GiB. A lab's
// apiserver spends most of its CPU collecting garbage, idle included, and the test suite runs
// several at once on two cores: measured on one (lab with kube-controller-manager, idle 30 s
// after start), 5.6–6.7 CPU-seconds per 30 s with Go's default, 3.1–3.8 with this, and start
// 7–11.6 CPU-seconds against 5.4–6.7; its resident memory goes from about 420 MB to 650 MB.
// Options.GoGCDefaults turns it off.
func apiServerGC() []string {
	if os.Getenv("GOGC") != "" || os.Getenv("GOMEMLIMIT") != "" {
		return nil
	}
	return []string{"GOGC=400", "GOMEMLIMIT=1GiB"}
}

func (l *Lab) startAPIServer(ctx context.Context, bin, etcdURL string, profiling bool) (string, error) {
	p, err := l.startWithPorts(ctx, "kube-apiserver", 1, func(ports []int) (*process, error) {
		args := []string{
			"--etcd-servers=" + etcdURL,
			"--bind-address=127.0.0.1", "--advertise-address=127.0.0.1",
			"--secure-port=" + strconv.Itoa(ports[0]),
			"--tls-cert-file=" + l.pki.path("apiserver.crt"), "--tls-private-key-file=" + l.pki.path("apiserver.key"),
			"--client-ca-file=" + l.pki.path("ca.crt"),
			"--service-account-issuer=https://kubernetes.default.svc",
			"--service-account-key-file=" + l.pki.path("sa.pub"),
			"--service-account-signing-key-file=" + l.pki.path("sa.key"),
			"--service-cluster-ip-range=" + serviceCIDR,
			"--authorization-mode=RBAC",
			"--allow-privileged=true",
			// No serviceaccount controller runs in the lab, so pods may not need a token.
			"--disable-admission-plugins=ServiceAccount",
			"--profiling=" + strconv.FormatBool(profiling),
			"--v=1",
		}
		if l.auditLog != "" {
			audit, err := l.auditArgs()
			if err != nil {
				return nil, err
			}
			args = append(args, audit...)
		}
		p, err := startProcessEnv("kube-apiserver", filepath.Join(l.Dir, "logs", "kube-apiserver.log"), bin, l.goGC, args...)
		if p != nil {
			p.url = "https://127.0.0.1:" + strconv.Itoa(ports[0])
		}
		return p, err
	}, func(p *process) error { return l.apiServerReady(ctx, p) })
	if err != nil {
		return "", err
	}
	return p.url, nil
}

// apiServerReady waits until kube-apiserver p answers /readyz.
func (l *Lab) apiServerReady(ctx context.Context, p *process) error {
	admin, err := l.pki.clientTLS("machina-admin", "system:masters")
	if err != nil {
		return err
	}
	return waitHealthy(ctx, p, admin, p.url+"/readyz", "ok", 90*time.Second)
}

func (l *Lab) startControllerManager(ctx context.Context, bin string, grace time.Duration) error {
	startupGrace := NodeStartupGracePeriod
	if grace == 0 {
		grace = NodeMonitorGracePeriod
	} else {
		startupGrace = grace
	}
	kubeconfig := filepath.Join(l.Dir, "pki", "kube-controller-manager.kubeconfig")
	cfg, err := l.UserConfig("system:kube-controller-manager", "system:masters")
	if err != nil {
		return err
	}
	if err := WriteKubeconfig(kubeconfig, cfg, "machina-lab"); err != nil {
		return err
	}
	_, err = l.startWithPorts(ctx, "kube-controller-manager", 1, func(ports []int) (*process, error) {
		args := []string{
			"--kubeconfig=" + kubeconfig,
			"--authentication-kubeconfig=" + kubeconfig,
			"--authorization-kubeconfig=" + kubeconfig,
			"--bind-address=127.0.0.1",
			"--secure-port=" + strconv.Itoa(ports[0]),
			"--cert-dir=" + filepath.Join(l.Dir, "pki", "kube-controller-manager"),
			"--leader-elect=false",
			"--use-service-account-credentials=false",
			"--controllers=garbage-collector-controller,disruption-controller,node-lifecycle-controller,namespace-controller," +
				"clusterrole-aggregation-controller",
			"--node-monitor-period=" + NodeMonitorPeriod.String(),
			"--node-monitor-grace-period=" + grace.String(),
			"--node-startup-grace-period=" + startupGrace.String(),
			"--kube-api-qps=200", "--kube-api-burst=400",
			"--v=1",
		}
		return startProcess("kube-controller-manager", filepath.Join(l.Dir, "logs", "kube-controller-manager.log"), bin, args...)
	}, func(p *process) error {
		return waitHealthy(ctx, p, insecureClient(), "https://127.0.0.1:"+portOf(p)+"/healthz", "ok", 60*time.Second)
	})
	return err
}

func portOf(p *process) string {
	for _, a := range p.cmd.Args {
		if v, ok := strings.CutPrefix(a, "--secure-port="); ok {
			return v
		}
	}
	return ""
}
