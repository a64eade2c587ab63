package main

import (
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/machina-dev/machina/internal/lab"
)

// The soak's managers elect a leader with this Lease, as the Deployment of config/default
// does (its namespace, the default --leader-election-id).
const (
	soakLeaseNamespace = "machina-system"
	soakLeaseName      = "machina-manager"
	// replicaGroup prefixes a group only the client certificate of replica <name>'s process
	// <n> (its nth start) carries, <name>-<n>, so the API server's audit log tells the
	// processes' writes apart (they share the manager's user name, which the admission
	// policies recognise).
	replicaGroup = "machina-soak-replica-"
)

// metricsClient reads a replica's metrics; a stalled process must not stall the soak.
var metricsClient = &http.Client{Timeout: 2 * time.Second}

// replica is one `machina manager` process of the soak. It reaches the API server through a
// proxy of its own, so that it alone can be cut off, and is restarted when it exits, as a
// Deployment's pod is.
type replica struct {
	name        string
	args        []string
	logf        *os.File
	proxy       *lab.Proxy
	metricsAddr string
	lab         *lab.Lab
	kubeconfig  string
	starts      int

	mu       sync.Mutex
	cmd      *exec.Cmd
	done     chan struct{}
	exitedAt time.Time
	killed   bool // the soak SIGKILLed it: not an exit of its own
}

// startReplicas starts n managers with o's groups, each through its own proxy and with its
// own identity group, electing a leader when n > 1 (or leaderElect), and waits for each
// metrics endpoint. One replica logs to manager.log, several to manager-<name>.log.
func (e *env) startReplicas(o envOptions, n int, leaderElect bool) ([]*replica, error) {
	var out []*replica
	for i := range n {
		r := &replica{name: string(rune('a' + i))}
		if err := e.prepareReplica(r, o, n, leaderElect); err != nil {
			return out, err
		}
		out = append(out, r)
		fmt.Fprintf(os.Stderr, "manager %s log: %s\n", r.name, r.logf.Name())
		if err := r.start(); err != nil {
			return out, err
		}
		if err := waitManagerUp(r.metricsAddr, r.logf.Name()); err != nil {
			return out, err
		}
	}
	return out, nil
}

func (e *env) prepareReplica(r *replica, o envOptions, n int, leaderElect bool) error {
	var err error
	if r.proxy, err = lab.NewProxy(strings.TrimPrefix(e.lab.Config.Host, "https://")); err != nil {
		return err
	}
	r.lab, r.kubeconfig = e.lab, filepath.Join(e.dir, "manager-"+r.name+".kubeconfig")
	kc := r.kubeconfig
	if r.metricsAddr, err = freeAddr(); err != nil {
		return err
	}
	r.args = e.managerArgs(o, kc, r.metricsAddr)
	if leaderElect || n > 1 {
		r.args = append(r.args, "--leader-elect=true", "--leader-election-namespace="+soakLeaseNamespace,
			"--leader-election-id="+soakLeaseName)
	} else {
		r.args = append(r.args, "--leader-elect=false")
	}
	logName := "manager.log"
	if n > 1 {
		logName = "manager-" + r.name + ".log"
	}
	r.logf, err = os.OpenFile(filepath.Join(e.dir, logName), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	return err
}

// process names the replica's current process: its name and how many times it was started.
func (r *replica) process() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return fmt.Sprintf("%s-%d", r.name, r.starts)
}

// start launches the replica's process (again), with a client certificate naming that
// process.
func (r *replica) start() error {
	r.mu.Lock()
	r.starts++
	r.mu.Unlock()
	cfg, err := r.lab.UserConfig(lab.ManagerUser, append(slices.Clone(lab.ManagerGroups), replicaGroup+r.process())...)
	if err != nil {
		return err
	}
	if err := lab.WriteKubeconfig(r.kubeconfig, lab.ProxiedConfig(cfg, r.proxy), "bench"); err != nil {
		return err
	}
	cmd, err := launchManager(r.args, r.logf)
	if err != nil {
		return fmt.Errorf("starting manager %s: %w", r.name, err)
	}
	done := make(chan struct{})
	r.mu.Lock()
	r.cmd, r.done, r.killed = cmd, done, false
	r.mu.Unlock()
	go func() {
		_ = cmd.Wait()
		r.mu.Lock()
		r.exitedAt = time.Now()
		r.mu.Unlock()
		close(done)
	}()
	return nil
}

// exited says whether the process has ended, and since when.
func (r *replica) exited() (bool, time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	select {
	case <-r.done:
		return true, r.exitedAt
	default:
		return false, time.Time{}
	}
}

// pid is the running process's id (0 when it has exited).
func (r *replica) pid() int {
	if gone, _ := r.exited(); gone {
		return 0
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.cmd.Process.Pid
}

// kill SIGKILLs the process and waits for it to end.
func (r *replica) kill() error {
	r.mu.Lock()
	cmd, done := r.cmd, r.done
	r.killed = true
	r.mu.Unlock()
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("killing manager %s: %w", r.name, err)
	}
	<-done
	return nil
}

// stop ends the process with SIGTERM, as at the end of a run.
func (r *replica) stop() {
	r.mu.Lock()
	cmd, done := r.cmd, r.done
	r.killed = true
	r.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		<-done
	}
}

// exitStatus describes how the process ended and the last line it logged.
func (r *replica) exitStatus() string {
	r.mu.Lock()
	state := r.cmd.ProcessState
	r.mu.Unlock()
	b, _ := os.ReadFile(r.logf.Name())
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	last := lines[len(lines)-1]
	if len(last) > 300 {
		last = last[:300] + "…"
	}
	return fmt.Sprintf("%v; last log line: %s", state, last)
}

// leading says whether the replica's metrics report it holds the leader-election Lease
// (controller-runtime's leader_election_master_status).
func (r *replica) leading() bool {
	if gone, _ := r.exited(); gone {
		return false
	}
	families, err := scrapeMetricsWith(metricsClient, "http://"+r.metricsAddr+"/metrics")
	if err != nil {
		return false
	}
	for _, m := range families["leader_election_master_status"].GetMetric() {
		if m.GetGauge().GetValue() == 1 {
			return true
		}
	}
	return false
}

// leader is the replica that holds the Lease now, nil between terms.
func (s *soak) leader() *replica {
	for _, r := range s.replicas {
		if r.leading() {
			return r
		}
	}
	return nil
}

// superviseReplicas restarts, as the Deployment's kubelet would, every replica that has been
// down for two seconds; an exit the soak did not cause (a lost lease) is noted and counted.
func (s *soak) superviseReplicas() error {
	for _, r := range s.replicas {
		gone, at := r.exited()
		if !gone || time.Since(at) < 2*time.Second {
			continue
		}
		r.mu.Lock()
		killed := r.killed
		r.mu.Unlock()
		if !killed {
			s.rep.count("replica exits of their own", 1)
			s.check.note("manager %s exited on its own: %s", r.process(), r.exitStatus())
		}
		if err := r.start(); err != nil {
			return err
		}
		s.check.note("manager %s restarted as %s (pid %d)", r.name, r.process(), r.pid())
	}
	return nil
}

// stopReplicas ends every replica and closes their proxies.
func (s *soak) stopReplicas() {
	for _, r := range s.replicas {
		r.stop()
		if r.proxy != nil {
			_ = r.proxy.Close()
		}
	}
}
