package lab

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"
)

// The faults below a controller manager that a soak or a test injects into a running lab:
// a SIGKILLed kube-apiserver or etcd, and etcd's history compacted away. Partitions are the
// Proxy's (proxy.go).

// restartPortWait bounds how long a restart retries a port still held after the SIGKILL.
const restartPortWait = 30 * time.Second

// RestartAPIServer SIGKILLs the kube-apiserver and starts it again with the same arguments on
// the same port against the same etcd, and returns once it answers /readyz. The URL and the
// certificates are unchanged, so Config, KubeconfigPath and every client made from them
// work again afterwards (their open connections break: requests in flight fail). Failed does
// not report the killed process.
func (l *Lab) RestartAPIServer(ctx context.Context) error {
	return l.restart(ctx, "kube-apiserver", func(p *process) error { return l.apiServerReady(ctx, p) })
}

// RestartEtcd SIGKILLs etcd and starts it again on the same data directory and client and
// peer ports, and returns once etcd is healthy and the kube-apiserver (which reconnects on
// its own) answers /readyz again. Every write etcd acknowledged survives: without fsync
// (Options.FastDisk) it is still in the kernel's page cache, which a killed process does
// not take with it.
func (l *Lab) RestartEtcd(ctx context.Context) error {
	if err := l.restart(ctx, "etcd", func(p *process) error { return etcdHealthy(ctx, p) }); err != nil {
		return err
	}
	if api := l.component("kube-apiserver"); api != nil {
		if err := l.apiServerReady(ctx, api); err != nil {
			return fmt.Errorf("kube-apiserver after the etcd restart: %w", err)
		}
	}
	return nil
}

// restart SIGKILLs the component named name and starts its command line again until it is
// healthy, retrying while its port is still taken (for up to restartPortWait). If it cannot,
// it says why, and a component left down is reported by Failed.
func (l *Lab) restart(ctx context.Context, name string, healthy func(*process) error) error {
	l.restarts.Lock()
	defer l.restarts.Unlock()
	old := l.component(name)
	if old == nil {
		return fmt.Errorf("lab: restarting %s: it is not running", name)
	}
	old.kill()
	deadline := time.Now().Add(restartPortWait)
	for attempt := 0; ; attempt++ {
		if l.beforeRespawn != nil {
			l.beforeRespawn(old, attempt)
		}
		logStart := logSize(old.logPath)
		p, err := old.respawn()
		if err != nil {
			old.killed.Store(false) // the component is down: Failed says so
			return fmt.Errorf("lab: restarting %s: %w", name, err)
		}
		l.replaceProc(old, p)
		err = healthy(p)
		if err == nil {
			return nil
		}
		if !p.exited() || !portTaken(p.logPath, logStart) || time.Now().After(deadline) {
			return fmt.Errorf("lab: restarting %s: %w", name, err)
		}
		p.killed.Store(true) // it could not bind: the next attempt replaces it
		old = p
		select {
		case <-ctx.Done():
			p.killed.Store(false)
			return fmt.Errorf("lab: restarting %s: %w", name, ctx.Err())
		case <-time.After(200 * time.Millisecond): // a retry interval, not a wait for a condition
		}
	}
}

// logSize returns the current size of a log, 0 if it cannot be read.
func logSize(path string) int64 {
	fi, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return fi.Size()
}

// portTaken reports whether the log, from offset on, says a port could not be bound.
func portTaken(path string, offset int64) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	if _, err := f.Seek(offset, io.SeekStart); err != nil {
		return false
	}
	b, err := io.ReadAll(f)
	return err == nil && strings.Contains(string(b), "address already in use")
}

// CompactEtcd compacts etcd's history up to its current revision, physically (the call
// returns once the old revisions are gone), and returns that revision. A watch of etcd from
// an older revision is then refused as compacted; the kube-apiserver serves watches from its
// watch cache, which still holds the events it has seen, and answers 410 Gone (Expired) only
// for a resourceVersion older than its cache (after a restart of the kube-apiserver, any
// resourceVersion from before it). kube-apiserver compacts too, every 5 minutes; a revision
// it has compacted already is not an error.
func (l *Lab) CompactEtcd(ctx context.Context) (int64, error) {
	l.restarts.Lock()
	defer l.restarts.Unlock()
	etcd := l.component("etcd")
	if etcd == nil {
		return 0, fmt.Errorf("lab: compacting etcd: it is not running")
	}
	rev, err := etcdRevision(ctx, etcd.url)
	if err != nil {
		return 0, fmt.Errorf("lab: compacting etcd: reading its revision: %w", err)
	}
	req := map[string]any{"revision": strconv.FormatInt(rev, 10), "physical": true}
	if err := etcdPost(ctx, etcd.url, "/v3/kv/compaction", req, nil); err != nil &&
		!strings.Contains(err.Error(), "required revision has been compacted") {
		return 0, fmt.Errorf("lab: compacting etcd at revision %d: %w", rev, err)
	}
	return rev, nil
}

// etcdRevision returns etcd's current revision, from the header of a range request.
func etcdRevision(ctx context.Context, etcdURL string) (int64, error) {
	var resp struct {
		Header struct {
			Revision string `json:"revision"`
		} `json:"header"`
	}
	// key "\x00", count only: an empty answer whose header carries the store's revision.
	if err := etcdPost(ctx, etcdURL, "/v3/kv/range", map[string]any{"key": "AA==", "count_only": true}, &resp); err != nil {
		return 0, err
	}
	rev, err := strconv.ParseInt(resp.Header.Revision, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("etcd answered revision %q: %w", resp.Header.Revision, err)
	}
	return rev, nil
}

// etcdPost calls etcd's JSON gRPC gateway and decodes its answer into out (when not nil).
func etcdPost(ctx context.Context, etcdURL, path string, in, out any) error {
	body, err := json.Marshal(in)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, etcdURL+path, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := (&http.Client{Timeout: 30 * time.Second}).Do(req)
	if err != nil {
		return fmt.Errorf("POST %s: %w", path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return fmt.Errorf("POST %s: reading the answer: %w", path, err)
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("POST %s: HTTP %d: %s", path, resp.StatusCode, bytes.TrimSpace(b))
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(b, out); err != nil {
		return fmt.Errorf("POST %s: decoding %q: %w", path, b, err)
	}
	return nil
}
