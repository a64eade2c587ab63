package lab

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"k8s.io/client-go/rest"
)

// MAONamespace and MAOServiceAccount are where machine-api-operator's install manifests run
// the Machine API controllers: the ServiceAccount of the machine-api-controllers Deployment.
const (
	MAONamespace      = "openshift-machine-api"
	MAOServiceAccount = "machine-api-controllers"
	// MAOUser is the identity the lab's machine-api-operator controllers run as: that
	// ServiceAccount's name, with the rights machine-api-operator's own RBAC manifest gives it.
	MAOUser = "system:serviceaccount:" + MAONamespace + ":" + MAOServiceAccount
)

// maoGroups are the groups a ServiceAccount token of MAOUser carries.
var maoGroups = []string{"system:serviceaccounts", "system:serviceaccounts:" + MAONamespace}

// MAOConfig is a client configuration with the identity the lab runs machine-api-operator's
// controllers as: MAOUser, with a ServiceAccount's groups (a client certificate of the lab's
// CA). Its rights are those InstallMAORBAC gives.
func (l *Lab) MAOConfig() (*rest.Config, error) { return l.UserConfig(MAOUser, maoGroups...) }

// MAOFeatureGates is the --feature-gates value of the machineset command, every other gate at
// its default. MachineAPIMigration on is what makes machine-api-operator's controllers honour
// status.authoritativeAPI: off, they would reconcile a MachineSet the Cluster API owns.
var MAOFeatureGates = []string{"MachineAPIMigration=true"}

// maoReadyLine is what controller-runtime logs once a controller's caches have synced and its
// workers run: the point where each command is really at work (nodelink-controller serves no
// health endpoint, and the others' /readyz answers before their caches sync).
const maoReadyLine = "Starting workers"

// maoStartTimeout bounds the wait for one command: past controller-runtime's two-minute cache
// sync timeout, after which a command that cannot sync exits and says why.
const maoStartTimeout = 150 * time.Second

// MAOOptions configure StartMAO.
type MAOOptions struct {
	// Progress receives the build's and the start's progress. Optional.
	Progress io.Writer

	// extraArgs are appended to a command's flags, by command name (tests only: a flag a
	// command refuses makes it exit at once).
	extraArgs map[string][]string
}

// MAO is machine-api-operator's Machine API controllers running against a lab. Lab.Stop also
// stops them.
type MAO struct {
	// KubeconfigPath is the kubeconfig the commands use (MAOUser's client certificate).
	KubeconfigPath string
	// LogPaths are the commands' logs (<lab>/logs/mao-<command>.log), by command name.
	LogPaths map[string]string
	// HealthURLs are the /readyz endpoints of the commands that serve one, by command name.
	HealthURLs map[string]string
	// MetricsURLs are the /metrics endpoints of the commands that serve one, by command name.
	MetricsURLs map[string]string
	// Build is the executables and manifests they run from.
	Build MAOBuild

	lab   *Lab
	procs []*process
}

// StartMAO builds (on first use, see EnsureMAO) and starts machine-api-operator's machineset,
// machine-healthcheck and nodelink-controller commands, unchanged, against the lab, as
// OpenShift's machine-api-controllers Deployment runs them: watching MAONamespace, the
// machineset command with MAOFeatureGates, no leader election, metrics and health on free
// loopback ports. The Machine API webhooks of the machineset command stay off: the lab does
// not register them (machina's admission policies stand in their place).
//
// The machineset command reads the cluster's Infrastructure "cluster" (its status.platformStatus)
// when it starts; the caller creates it first (machina's controllers read it too, so the lab
// does not make one up). Before the commands
// start, the lab gets what they need besides: the namespaces MAONamespace, openshift-config and
// openshift-config-managed, the config.openshift.io DNS CRD and DNS "cluster" if absent, and
// the ServiceAccount, Roles, ClusterRoles and bindings of machine-api-operator's RBAC manifest
// that grant MAOServiceAccount its rights. The commands authenticate as MAOUser with a client
// certificate of the lab's CA. StartMAO returns once each command's controller runs; on any
// failure it stops what it started and returns an error naming the command and quoting its log.
func (l *Lab) StartMAO(ctx context.Context, opts MAOOptions) (m *MAO, err error) {
	progress := opts.Progress
	if progress == nil {
		progress = io.Discard
	}
	if err := l.checkMAOInfrastructure(ctx); err != nil {
		return nil, err
	}
	build, err := EnsureMAO(ctx, progress)
	if err != nil {
		return nil, err
	}
	m = &MAO{lab: l, Build: build, LogPaths: map[string]string{}, HealthURLs: map[string]string{}, MetricsURLs: map[string]string{}}
	defer func() {
		if err != nil {
			m.Stop()
			m, err = nil, fmt.Errorf("lab: starting machine-api-operator's controllers: %w", err)
		}
	}()
	if err := l.installMAO(ctx, build); err != nil {
		return m, err
	}
	dir := filepath.Join(l.Dir, "mao")
	if err := m.writeKubeconfig(dir); err != nil {
		return m, err
	}
	start := time.Now()
	for _, name := range maoCommands {
		if err := m.launch(ctx, name, dir, opts.extraArgs[name]); err != nil {
			return m, err
		}
	}
	fmt.Fprintf(progress, "lab: machine-api-operator %s controllers (%s) ready in %s as %s (logs %s)\n",
		MAOVersion, strings.Join(maoCommands, ", "), time.Since(start).Round(100*time.Millisecond), MAOUser,
		filepath.Join(l.Dir, "logs", "mao-*.log"))
	return m, nil
}

// Stop ends the commands, newest first, and waits for them to exit. The objects StartMAO
// installed stay. It is safe to call more than once.
func (m *MAO) Stop() {
	if m == nil {
		return
	}
	for i := len(m.procs) - 1; i >= 0; i-- {
		p := m.procs[i]
		p.stop(15 * time.Second)
		m.lab.removeProc(p)
	}
	m.procs = nil
}

// Failed returns an error if a command has exited on its own.
func (m *MAO) Failed() error {
	for _, p := range m.procs {
		if p.exited() {
			return p.failure()
		}
	}
	return nil
}

// writeKubeconfig writes the commands' kubeconfig: MAOUser with a ServiceAccount's groups.
func (m *MAO) writeKubeconfig(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	cfg, err := m.lab.MAOConfig()
	if err != nil {
		return err
	}
	m.KubeconfigPath = filepath.Join(dir, "kubeconfig")
	return WriteKubeconfig(m.KubeconfigPath, cfg, "machina-lab")
}

// launch starts command name on fresh ports and waits until its controller runs.
func (m *MAO) launch(ctx context.Context, name, dir string, extra []string) error {
	logPath := filepath.Join(m.lab.Dir, "logs", "mao-"+name+".log")
	m.LogPaths[name] = logPath
	// The command's whole environment: its kubeconfig, and nothing of the test's or of an
	// in-cluster setting that controller-runtime would prefer.
	env := []string{"PATH=/usr/bin:/bin", "HOME=" + dir, "KUBECONFIG=" + m.KubeconfigPath}
	nports := maoPorts(name)
	p, err := m.lab.startWithPorts(ctx, "mao-"+name, nports, func(ports []int) (*process, error) {
		args := append(maoArgs(name, ports), extra...)
		return startProcessWithEnv(name, logPath, env, m.Build.Command(name), args...)
	}, func(p *process) error {
		err := waitMAOCommand(ctx, p)
		if err != nil && p.exited() {
			return maoFailure(p)
		}
		return err
	})
	if err != nil {
		return err // it names the command and quotes its log
	}
	m.procs = append(m.procs, p)
	if u := maoURL(p, "--health-addr=", "/readyz"); u != "" {
		m.HealthURLs[name] = u
	}
	if u := maoURL(p, "--metrics-bind-address=", "/metrics"); u != "" {
		m.MetricsURLs[name] = u
	}
	return nil
}

// waitMAOCommand waits until p serves its /readyz (if it has one) and its controller runs.
func waitMAOCommand(ctx context.Context, p *process) error {
	if u := maoURL(p, "--health-addr=", "/readyz"); u != "" {
		if err := waitHealthy(ctx, p, &http.Client{Timeout: 2 * time.Second}, u, "ok", maoStartTimeout); err != nil {
			return err
		}
	}
	return waitLogged(ctx, p, maoReadyLine, maoStartTimeout)
}

// maoFailure describes the exit of p. A command that refuses its flags prints the complaint
// and then its whole usage (Go's flag package), so the log's last lines would only show the
// usage: the complaint is quoted instead.
func maoFailure(p *process) error {
	b, err := os.ReadFile(p.logPath)
	before, _, usage := strings.Cut(string(b), "Usage of ")
	if err != nil || !usage {
		return p.failure()
	}
	lines := strings.Split(strings.TrimSpace(before), "\n")
	return fmt.Errorf("%s exited: %v: %s (usage follows in %s)", p.name, p.err, lines[len(lines)-1], p.logPath)
}

// maoPorts is how many ports command name binds: metrics and health, except nodelink-controller,
// which turns its metrics off in code and has no health flag.
func maoPorts(name string) int {
	if name == MAONodeLink {
		return 0
	}
	return 2
}

// maoArgs are command name's flags (see each cmd/<name>/main.go): ports[0] metrics, ports[1]
// health, when it has them.
func maoArgs(name string, ports []int) []string {
	args := []string{"--namespace=" + MAONamespace, "--leader-elect=false"}
	if len(ports) == 2 {
		args = append(args,
			"--metrics-bind-address=127.0.0.1:"+strconv.Itoa(ports[0]),
			"--health-addr=127.0.0.1:"+strconv.Itoa(ports[1]))
	}
	if name == MAOMachineSet {
		args = append(args, "--webhook-enabled=false", "--feature-gates="+strings.Join(MAOFeatureGates, ","))
	}
	return args
}

// maoURL is http://<address of flag>/<path> for the flag p was started with, or "".
func maoURL(p *process, flag, path string) string {
	for _, a := range p.cmd.Args {
		if v, ok := strings.CutPrefix(a, flag); ok {
			return "http://" + v + path
		}
	}
	return ""
}

// waitLogged waits until p's log holds want, p exits, or timeout passes.
func waitLogged(ctx context.Context, p *process, want string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		if p.exited() {
			return p.failure()
		}
		if b, err := os.ReadFile(p.logPath); err == nil && strings.Contains(string(b), want) {
			return nil
		}
		select {
		case <-ctx.Done():
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				return fmt.Errorf("%s did not log %q within %s\n--- last lines of %s ---\n%s",
					p.name, want, timeout, p.logPath, tail(p.logPath, 20))
			}
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}
