package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/machina-dev/machina/internal/cloud/ec2"
	"github.com/machina-dev/machina/internal/cloud/kubelet"
	"github.com/machina-dev/machina/internal/cloud/server"
	"github.com/machina-dev/machina/internal/lab"
	"github.com/machina-dev/machina/internal/scheme"
)

// result is one row of figures.
type result struct {
	N                 int
	Seconds           float64
	ManagerWrites     int64
	KubeletWrites     int64
	ManagerPeakRSSMiB float64
	// OtherWrites are the writes of controllers run beside the manager (capi-scale's upstream
	// core and trivial provider); compare adds them to the manager's.
	OtherWrites int64
	// APIServerCPU is the kube-apiserver's CPU-seconds in the measured interval (for compare).
	APIServerCPU float64
	Extra        string
	// Lines are printed under the row, indented.
	Lines []string
}

func printTable(scenario string, rows []result) {
	fmt.Printf("\n%s on %d CPUs (%s/%s, %s)\n", scenario, runtime.NumCPU(), runtime.GOOS, runtime.GOARCH, cpuModel())
	fmt.Printf("%8s %10s %14s %14s %16s %s\n", "N", "seconds", "mgr writes/M", "kubelet wr/M", "mgr peak RSS", "")
	for _, r := range rows {
		fmt.Printf("%8d %10.1f %14.2f %14.2f %13.0f MiB %s\n", r.N, r.Seconds,
			float64(r.ManagerWrites)/float64(r.N), float64(r.KubeletWrites)/float64(r.N), r.ManagerPeakRSSMiB, r.Extra)
		for _, l := range r.Lines {
			fmt.Printf("%8s %s\n", "", l)
		}
	}
}

func cpuModel() string {
	b, _ := os.ReadFile("/proc/cpuinfo")
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "model name") {
			return strings.TrimSpace(strings.SplitN(l, ":", 2)[1])
		}
	}
	return "unknown CPU"
}

// env is a lab, a cloud and a manager child process.
type env struct {
	dir          string
	lab          *lab.Lab
	client       client.Client
	cloud        *server.Server
	kubeletWrite atomic.Int64
	mgr          *exec.Cmd
	managers     int // managers started so far
	// watched reads from informers (see startCache); the wait loops poll it.
	watched     client.Reader
	informers   cache.Cache
	stopCache   context.CancelFunc
	metricsAddr string
	// keep leaves dir (manager log, lab data) in place on stop, e.g. after a failed soak.
	keep bool
	// selfProfile receives this process's CPU profile (the cloud, its kubelets, the
	// benchmark's informers and writers) with MACHINA_BENCH_PROFILE=1.
	selfProfile *os.File
}

func startEnv(groups string) (*env, error) { return startEnvWith(envOptions{groups: groups}) }

// envOptions configure startEnvWith.
type envOptions struct {
	groups string
	// ec2 serves the cloud's EC2 front and points the manager's AWS provider at it.
	ec2 bool
	// verbosity is the manager's --verbosity (1 = debug logs in manager.log).
	verbosity int
	// noManager starts no manager (the floor scenarios write themselves; the soak starts
	// its own replicas).
	noManager bool
	// audit has the API server write an audit log of every write (lab.Options.AuditLog).
	audit bool
	// labGC keeps the lab's own garbage collector setting for the API server (the soak, a
	// test of behaviour rather than a measure, which the test suite runs beside others);
	// otherwise it runs with Go's defaults, as in a cluster (lab.Options.GoGCDefaults).
	labGC bool
}

func startEnvWith(o envOptions) (*env, error) {
	dir, err := os.MkdirTemp("", "machina-bench-")
	if err != nil {
		return nil, err
	}
	e := &env{dir: dir}
	ctx := context.Background()
	profiling := os.Getenv("MACHINA_BENCH_PROFILE") != ""
	lo := lab.Options{Dir: filepath.Join(dir, "lab"), FastDisk: true, ControllerManager: true, Profiling: profiling, Progress: os.Stderr,
		AuditLog: o.audit, GoGCDefaults: !o.labGC}
	renew, leaseDuration, statusEvery := lab.KubeletHeartbeatInterval, lab.NodeMonitorGracePeriod, time.Duration(0)
	if heartbeat > lab.KubeletHeartbeatInterval {
		// Production cadence: also a real kubelet's nodeStatusReportFrequency (5m) for an
		// unchanged Node status; the simulated kubelet's 1m default re-posted every Node's
		// status 4.6 times in the seven minutes of capi-scale -n 3000.
		renew, leaseDuration, statusEvery = heartbeat, 4*heartbeat, 5*time.Minute
		lo.NodeMonitorGracePeriod = leaseDuration
	}
	if e.lab, err = lab.Start(ctx, lo); err != nil {
		return nil, err
	}
	if profiling {
		e.keep = true
		go e.apiserverProfileLoop()
		if e.selfProfile, err = os.Create(filepath.Join(dir, "bench-cpu.pb.gz")); err == nil {
			err = pprof.StartCPUProfile(e.selfProfile)
		}
		if err != nil {
			return nil, err
		}
	}
	if e.client, err = client.New(e.lab.Config, client.Options{Scheme: scheme.Scheme}); err != nil {
		return nil, err
	}
	if err := e.startCache(); err != nil {
		return nil, err
	}
	kcfg := rest.CopyConfig(e.lab.Config)
	kcfg.Wrap(countWrites(&e.kubeletWrite))
	so := server.Options{StateDir: filepath.Join(dir, "cloud"), NoSync: true, KubeConfig: kcfg,
		Kubelet: kubelet.Options{RenewInterval: renew, LeaseDuration: leaseDuration, StatusInterval: statusEvery},
		Logger:  logr.Discard(), Delays: server.Delays{Pending: bootDelay}}
	if o.ec2 {
		so.EC2 = &ec2.Options{}
	}
	e.cloud, err = server.New(so)
	if err != nil {
		return nil, err
	}
	if err := e.cloud.Start(ctx); err != nil {
		return nil, err
	}
	if o.noManager {
		return e, nil
	}
	if err := e.startManager(o); err != nil {
		return nil, err
	}
	return e, nil
}

// startManager starts `machina manager` with o's groups as a child process, as it runs in a
// real cluster (its ServiceAccount identity with the generated roles), appending to
// manager.log, and waits until its metrics endpoint answers.
func (e *env) startManager(o envOptions) error {
	var err error
	e.metricsAddr, err = freeAddr()
	if err != nil {
		return err
	}
	logf, err := os.OpenFile(filepath.Join(e.dir, "manager.log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	mcfg, err := e.lab.ManagerConfig()
	if err != nil {
		return err
	}
	mkc := filepath.Join(e.dir, "manager.kubeconfig")
	if err := lab.WriteKubeconfig(mkc, mcfg, "bench"); err != nil {
		return err
	}
	args := e.managerArgs(o, mkc, e.metricsAddr)
	args = append(args, "--leader-elect=false")
	profiling := os.Getenv("MACHINA_BENCH_PROFILE") != ""
	if profiling {
		args = append(args, "--pprof")
		e.keep = true
	}
	fmt.Fprintln(os.Stderr, "manager log:", logf.Name())
	if e.mgr, err = launchManager(args, logf); err != nil {
		return err
	}
	if err := waitManagerUp(e.metricsAddr, logf.Name()); err != nil {
		return err
	}
	e.managers++
	if profiling {
		go e.profileLoop(e.managers)
	}
	return nil
}

// managerArgs is the manager's command line for o's groups, without leader election
// settings: its kubeconfig, the cloud, the metrics endpoint (plain HTTP on loopback, read by
// the benchmarks) and no client-side throttling.
func (e *env) managerArgs(o envOptions, kubeconfig, metricsAddr string) []string {
	args := []string{"manager", "--kubeconfig", kubeconfig, "--cloud-url", e.cloud.URL(),
		"--controllers", o.groups, "--metrics-bind-address", metricsAddr, "--metrics-insecure",
		"--health-probe-bind-address", "0", "--kube-api-qps", "1000", "--kube-api-burst", "2000"}
	if o.ec2 {
		args = append(args, "--aws-endpoint", e.cloud.EC2().URL())
	}
	if o.verbosity > 0 {
		args = append(args, "--verbosity", strconv.Itoa(o.verbosity))
	}
	return append(args, managerFlags...)
}

// launchManager starts this binary with args (a `manager` command line) as a child process
// that dies with this one, its output appended to logf.
func launchManager(args []string, logf *os.File) (*exec.Cmd, error) {
	cmd := exec.Command(os.Args[0], args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	if len(managerEnv) > 0 {
		cmd.Env = append(os.Environ(), managerEnv...)
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	return cmd, nil
}

// waitManagerUp waits until the manager's metrics endpoint at addr answers.
func waitManagerUp(addr, logName string) error {
	deadline := time.Now().Add(60 * time.Second)
	for {
		if _, err := writesAt("http://" + addr + "/metrics"); err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("manager did not start; see %s", logName)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// stopManager stops the manager child process and waits for it.
func (e *env) stopManager() {
	if e.mgr != nil && e.mgr.Process != nil {
		_ = e.mgr.Process.Signal(syscall.SIGTERM)
		_ = e.mgr.Wait()
	}
}

// apiserverProfileLoop saves the kube-apiserver's CPU profile in consecutive 2-second
// pieces (apiserver-cpu-NNN.pb.gz in the run's directory, merged by `go tool pprof -top
// dir/apiserver-cpu-*.pb.gz`) until the lab stops. MACHINA_BENCH_PROFILE=1 turns it on, in
// every scenario, the floors included.
func (e *env) apiserverProfileLoop() {
	fmt.Fprintln(os.Stderr, "bench: saving kube-apiserver profiles in", e.dir)
	api, err := rest.HTTPClientFor(e.lab.Config)
	if err != nil {
		return
	}
	for i := 0; ; i++ {
		if saveProfile(api, e.lab.Config.Host, "profile?seconds=2", filepath.Join(e.dir, fmt.Sprintf("apiserver-cpu-%03d.pb.gz", i))) != nil {
			return
		}
	}
}

// profileLoop saves the manager's CPU profiles in consecutive 2-second pieces
// (cpu-G-NNN.pb.gz, G counting the managers started) and its heap profile after each, until
// the manager stops. MACHINA_BENCH_PROFILE=1 turns it on.
func (e *env) profileLoop(gen int) {
	fmt.Fprintln(os.Stderr, "bench: saving manager profiles in", e.dir)
	mgr := &http.Client{}
	base := "http://" + e.metricsAddr
	for i := 0; ; i++ {
		if saveProfile(mgr, base, "profile?seconds=2", filepath.Join(e.dir, fmt.Sprintf("cpu-%d-%03d.pb.gz", gen, i))) != nil {
			return
		}
		if saveProfile(mgr, base, "heap", filepath.Join(e.dir, fmt.Sprintf("heap-%d-%03d.pb.gz", gen, i))) != nil {
			return
		}
	}
}

func saveProfile(c *http.Client, base, query, path string) error {
	resp, err := c.Get(base + "/debug/pprof/" + query)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s", query, resp.Status)
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = io.Copy(f, resp.Body)
	return err
}

// startCache starts e.watched, a reader served by informers on the lab: the benchmark's
// wait loops poll it four times a second, which as List calls on the apiserver (a thousand
// Machines at a time) would take CPU from what is measured.
func (e *env) startCache() error {
	c, err := cache.New(e.lab.Config, cache.Options{Scheme: scheme.Scheme})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	e.stopCache = cancel
	go func() { _ = c.Start(ctx) }()
	e.informers, e.watched = c, uncopied{c}
	return nil
}

// uncopied lists from the informers without copying each object: the wait loops only read,
// and copying every Machine four times a second was, at 3000 Machines, CPU taken from what
// is measured that grew with N × the run's length.
type uncopied struct{ client.Reader }

func (u uncopied) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	return u.Reader.List(ctx, list, append(opts, client.UnsafeDisableDeepCopy)...)
}

func (e *env) stop() {
	if e.selfProfile != nil {
		pprof.StopCPUProfile()
		_ = e.selfProfile.Close()
	}
	if e.stopCache != nil {
		e.stopCache()
	}
	e.stopManager()
	if e.cloud != nil {
		e.cloud.Close()
	}
	e.lab.Stop()
	if e.keep || os.Getenv("MACHINA_BENCH_KEEP") != "" {
		fmt.Fprintln(os.Stderr, "kept for inspection:", e.dir)
		return
	}
	_ = os.RemoveAll(e.dir)
}

// managerPeakRSS reads the manager process's peak resident set (VmHWM) and prints how its
// resident set is made up now: anonymous memory (heap, stacks) and the pages of the binary.
func (e *env) managerPeakRSS() float64 {
	if e.mgr == nil {
		return 0
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", e.mgr.Process.Pid))
	if err != nil {
		return 0
	}
	mib := map[string]float64{}
	for _, l := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(l, ":"); ok && (k == "VmHWM" || strings.HasPrefix(k, "Rss")) {
			kb, _ := strconv.ParseFloat(strings.Fields(v)[0], 64)
			mib[k] = kb / 1024
		}
	}
	fmt.Fprintf(os.Stderr, "bench: manager resident set: peak %.0f MiB; now %.0f MiB anonymous + %.0f MiB of the binary's pages\n",
		mib["VmHWM"], mib["RssAnon"], mib["RssFile"])
	return mib["VmHWM"]
}

type countingRT struct {
	next http.RoundTripper
	n    *atomic.Int64
}

func (c countingRT) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		c.n.Add(1)
	}
	return c.next.RoundTrip(r)
}

func countWrites(n *atomic.Int64) func(http.RoundTripper) http.RoundTripper {
	return func(rt http.RoundTripper) http.RoundTripper { return countingRT{next: rt, n: n} }
}

func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}
