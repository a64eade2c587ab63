package lab

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"syscall"
	"time"
)

// childAttrs makes a child die with its parent: if machina is killed (even with SIGKILL),
// the kernel sends SIGKILL to the child, so no apiserver or etcd is ever orphaned.
func childAttrs() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}

// process is one running control-plane component.
type process struct {
	name    string
	cmd     *exec.Cmd
	logPath string
	url     string   // where the component serves, when it does
	env     []string // added to the inherited environment
	done    chan struct{}
	err     error
	killed  atomic.Bool // the lab killed it on purpose (a restart): not a failure
}

func startProcess(name, logPath, binary string, args ...string) (*process, error) {
	return startProcessEnv(name, logPath, binary, nil, args...)
}

// startProcessEnv is startProcess with env added to the process's inherited environment.
func startProcessEnv(name, logPath, binary string, env []string, args ...string) (*process, error) {
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(binary, args...)
	if len(env) > 0 {
		cmd.Env = append(os.Environ(), env...)
	}
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = childAttrs()
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	p := &process{name: name, cmd: cmd, logPath: logPath, env: env, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		logFile.Close()
		close(p.done)
	}()
	return p, nil
}

// exited reports whether the process has ended.
func (p *process) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// failure describes an unexpected exit with the tail of the component's log.
func (p *process) failure() error {
	return fmt.Errorf("%s exited: %v\n--- last lines of %s ---\n%s", p.name, p.err, p.logPath, tail(p.logPath, 20))
}

// stop asks the process to end, and kills it if it has not after the grace period.
func (p *process) stop(grace time.Duration) {
	if p == nil || p.exited() {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(grace):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

// kill SIGKILLs the process and waits for it to end; Lab.Failed does not report it.
func (p *process) kill() {
	p.killed.Store(true)
	_ = p.cmd.Process.Kill()
	<-p.done
}

// respawn starts the same command line again: same binary, arguments and environment.
func (p *process) respawn() (*process, error) {
	q, err := startProcessEnv(p.name, p.logPath, p.cmd.Path, p.env, p.cmd.Args[1:]...)
	if q != nil {
		q.url = p.url
	}
	return q, err
}

func tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// waitHealthy polls url until it answers 200 with a body containing want, the process dies,
// or the deadline passes.
func waitHealthy(ctx context.Context, p *process, client *http.Client, url, want string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var last string
	for {
		if p.exited() {
			return p.failure()
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		resp, err := client.Do(req)
		if err == nil {
			buf := make([]byte, 512)
			n, _ := resp.Body.Read(buf)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK && strings.Contains(string(buf[:n]), want) {
				return nil
			}
			last = fmt.Sprintf("HTTP %d: %s", resp.StatusCode, strings.TrimSpace(string(buf[:n])))
		} else {
			last = err.Error()
		}
		select {
		case <-ctx.Done():
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				return fmt.Errorf("%s not healthy after %s (last: %s)\n--- last lines of %s ---\n%s",
					p.name, timeout, last, p.logPath, tail(p.logPath, 20))
			}
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// freePorts reserves n distinct loopback ports. The listeners are closed before returning,
// so there is a small window in which another process could take a port; callers retry.
func freePorts(n int) ([]int, error) {
	var ports []int
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

func insecureClient() *http.Client {
	return &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // health probe of our own self-signed component
	}}
}
