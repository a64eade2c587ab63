package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/machina-dev/machina/internal/cli"
	"github.com/machina-dev/machina/internal/cloud/api"
	cloudclient "github.com/machina-dev/machina/internal/cloud/client"
	"github.com/machina-dev/machina/internal/fleet"
	"github.com/machina-dev/machina/internal/scheme"
)

const (
	mapiNS        = "openshift-machine-api"
	capiNS        = "openshift-cluster-api"
	machinesPerMS = 50
)

// mirrored starts every controller of platform p and n Machine API Machines (MachineSets of
// 50) and waits until each Machine is Running and mirrored into the Cluster API
// (Synchronized True).
func mirrored(p migratePlatform, n int) (*env, []string, error) {
	e, err := startEnvWith(p.env)
	if err != nil {
		return nil, nil, err
	}
	sets, err := createWorkload(e, p, n)
	if err == nil {
		err = waitMirrored(e, n)
	}
	if err != nil {
		e.stop()
		return nil, nil, err
	}
	return e, sets, nil
}

// createWorkload seeds p's cluster and creates MachineSets of up to 50 for n Machines,
// returning their names.
func createWorkload(e *env, p migratePlatform, n int) ([]string, error) {
	ctx := context.Background()
	kc, err := os.ReadFile(e.lab.KubeconfigPath)
	if err != nil {
		return nil, err
	}
	newMS, err := p.seed(ctx, e, kc)
	if err != nil {
		return nil, err
	}
	var sets []string
	for left, i := n, 0; left > 0; i++ {
		size := min(left, machinesPerMS)
		name := fmt.Sprintf("bench-%02d", i)
		if err := e.client.Create(ctx, newMS(name, i, int32(size))); err != nil {
			return nil, err
		}
		sets = append(sets, name)
		left -= size
	}
	return sets, nil
}

// waitMirrored waits until n Machine API Machines are Running and mirrored at their latest
// generation.
func waitMirrored(e *env, n int) error {
	ctx := context.Background()
	start := time.Now()
	err := waitFor(fmt.Sprintf("%d Machines Running and mirrored", n), scaleLimit(n), func() (int, error) {
		return machinesLeft(ctx, e.watched, n, func(m *machinev1beta1.Machine) bool {
			return ptr.Deref(m.Status.Phase, "") == machinev1beta1.PhaseRunning && synchronized(m.Status.Conditions) &&
				m.Status.SynchronizedGeneration == m.Generation
		})
	})
	if err == nil {
		fmt.Fprintf(os.Stderr, "bench: %d Machines Running and mirrored in %s\n", n, time.Since(start).Round(time.Second))
	}
	return err
}

func synchronized(conds []machinev1beta1.Condition) bool {
	for _, c := range conds {
		if c.Type == "Synchronized" {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// scaleLimit is how long a wait for n Machines may take: 20 minutes a thousand, started or
// not, so a run at Kubernetes' 5,000-Node limit on a small box is given its time while a stuck
// one still ends.
func scaleLimit(n int) time.Duration {
	return time.Duration(max(1, (n+999)/1000)) * 20 * time.Minute
}

// stallLimit is how long a wait goes on without reaching a new low of what is left: a run
// the box cannot hold (its Nodes falling NotReady as fast as others come up) ends there
// rather than at its scaleLimit.
const stallLimit = 5 * time.Minute

// waitFor polls left() until it reports nothing left, with progress every 10 seconds. It
// gives up after timeout, or after stallLimit without a new low.
func waitFor(what string, timeout time.Duration, left func() (int, error)) error {
	start, last := time.Now(), time.Now()
	low, lowAt := math.MaxInt, start
	for {
		n, err := left()
		if err != nil {
			return err
		}
		if n <= 0 {
			return nil
		}
		if n < low {
			low, lowAt = n, time.Now()
		}
		if time.Since(last) > 10*time.Second {
			fmt.Fprintf(os.Stderr, "bench: waiting for %s: %d left after %s\n", what, n, time.Since(start).Round(time.Second))
			last = time.Now()
		}
		switch {
		case time.Since(start) > timeout:
			return fmt.Errorf("%s: %d left after %s", what, n, timeout)
		case time.Since(lowAt) > stallLimit:
			return fmt.Errorf("%s: %d left after %s, none fewer than %d for %s", what, n, time.Since(start).Round(time.Second), low, stallLimit)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// migrateScale hands n mirrored Machines of the -platform flag's platform and their
// MachineSets to the Cluster API at once and measures until every one reports
// status.authoritativeAPI ClusterAPI and, where the platform's Cluster API provider is a
// separate controller (CAPA on aws), until it has taken over every Machine.
func migrateScale(n int) (result, error) {
	p, err := migratePlatformFor(platform)
	if err != nil {
		return result{}, err
	}
	e, sets, err := mirrored(p, n)
	if err != nil {
		return result{}, err
	}
	defer e.stop()
	ctx := context.Background()
	before, err := e.snapshot(p)
	if err != nil {
		return result{}, err
	}
	q0, err := e.queueSnapshot()
	if err != nil {
		return result{}, err
	}
	logStart, ph := logSize(e), e.startPhase()
	k0 := e.kubeletWrite.Load()
	start := time.Now()
	requested, err := migrateWithCLI(ctx, e, start)
	if err != nil {
		return result{}, err
	}
	authority, takeover, err := waitMigrated(ctx, e, p, n, start)
	if err != nil {
		return result{}, err
	}
	cpu := ph.report(n)
	q1, err := e.queueSnapshot()
	if err != nil {
		return result{}, err
	}
	after, err := e.snapshot(p)
	if err != nil {
		return result{}, err
	}
	instances, err := e.instanceCount()
	if err != nil {
		return result{}, err
	}
	r := result{N: n, Seconds: takeover.Seconds(), ManagerWrites: after.writes - before.writes, KubeletWrites: e.kubeletWrite.Load() - k0,
		ManagerPeakRSSMiB: e.managerPeakRSS(),
		Extra: fmt.Sprintf("(%d MachineSets; machina migrate --all --max-in-flight %d, last request at %.1fs; %d cloud instances for %d Machines)",
			len(sets), maxInFlight, requested.Seconds(), instances, n)}
	if p.takeover != nil {
		r.Lines = append(r.Lines, fmt.Sprintf("status.authoritativeAPI ClusterAPI everywhere after %.1fs; %s after %.1fs (the seconds column)",
			authority.Seconds(), p.takeoverWhat, takeover.Seconds()))
	}
	r.Lines = append(append(r.Lines, cpu...), fmt.Sprintf("during the migration: %d instances launched, %d terminated; %s",
		after.launched-before.launched, after.terminated-before.terminated, callsPerMachine(p.callsLabel, before.calls, after.calls, n))+writeBreakdown(e, logStart, n)+queueReport(q0, q1))
	return r, nil
}

// migrateWithCLI runs `machina migrate --all --to ClusterAPI` against the lab, exactly as a
// user would (the command, its plan and its waves of -max-in-flight), with its progress lines
// and report in the benchmark's directory. It returns when the command does, that is when
// every resource reports the Cluster API's authority, and how long after start the last
// request was made.
func migrateWithCLI(ctx context.Context, e *env, start time.Time) (lastRequest time.Duration, err error) {
	logPath, report := filepath.Join(e.dir, "migrate.log"), filepath.Join(e.dir, "migrate-report.json")
	log, err := os.Create(logPath)
	if err != nil {
		return 0, err
	}
	defer log.Close()
	fmt.Fprintf(os.Stderr, "machina migrate --all --max-in-flight %d: progress in %s\n", maxInFlight, logPath)
	cmd := cli.NewRootCommand()
	cmd.SetOut(log)
	cmd.SetErr(log)
	cmd.SetArgs([]string{"migrate", "--all", "--to", "ClusterAPI", "--kubeconfig", e.lab.KubeconfigPath, "-n", mapiNS,
		"--cluster-api-namespace", capiNS, "--max-in-flight", strconv.Itoa(maxInFlight), "--timeout", "20m", "--report", report})
	if err := cmd.ExecuteContext(ctx); err != nil {
		return 0, fmt.Errorf("machina migrate (see %s): %w", logPath, err)
	}
	data, err := os.ReadFile(report)
	if err != nil {
		return 0, err
	}
	var rep fleet.Report
	if err := json.Unmarshal(data, &rep); err != nil {
		return 0, err
	}
	for _, r := range rep.Resources {
		if r.Start != nil {
			lastRequest = max(lastRequest, r.Start.Sub(start))
		}
	}
	return lastRequest, nil
}

// waitMigrated waits until every Machine and MachineSet reports status.authoritativeAPI
// ClusterAPI, then for p's takeover if it has one; it returns how long after start each was
// reached (both the first when there is no takeover).
func waitMigrated(ctx context.Context, e *env, p migratePlatform, n int, start time.Time) (authority, takeover time.Duration, err error) {
	if err := waitFor("migrations to ClusterAPI", scaleLimit(n), func() (int, error) { return authorityLeft(ctx, e.watched) }); err != nil {
		return 0, 0, err
	}
	authority = time.Since(start)
	if p.takeover == nil {
		return authority, authority, nil
	}
	if err := waitFor(p.takeoverWhat, scaleLimit(n), func() (int, error) { return p.takeover(ctx, e, n) }); err != nil {
		return 0, 0, err
	}
	return authority, time.Since(start), nil
}

// authorityLeft counts the Machine API Machines and MachineSets not yet reporting
// status.authoritativeAPI ClusterAPI.
func authorityLeft(ctx context.Context, c client.Reader) (int, error) {
	var ml machinev1beta1.MachineList
	var sl machinev1beta1.MachineSetList
	if err := c.List(ctx, &ml, client.InNamespace(mapiNS)); err != nil {
		return 0, err
	}
	if err := c.List(ctx, &sl, client.InNamespace(mapiNS)); err != nil {
		return 0, err
	}
	left := 0
	for _, m := range ml.Items {
		if m.Status.AuthoritativeAPI != machinev1beta1.MachineAuthorityClusterAPI {
			left++
		}
	}
	for _, s := range sl.Items {
		if s.Status.AuthoritativeAPI != machinev1beta1.MachineAuthorityClusterAPI {
			left++
		}
	}
	return left, nil
}

// counters are the manager's writes and the cloud's calls and instance launches and
// terminations so far.
type counters struct {
	writes               int64
	calls                map[string]int64
	launched, terminated int64
}

func (e *env) snapshot(p migratePlatform) (counters, error) {
	w, err := e.managerWrites()
	if err != nil {
		return counters{}, err
	}
	st := e.cloud.Stats()
	return counters{writes: w, calls: p.calls(e), launched: st.InstancesCreated, terminated: st.InstancesTerminated}, nil
}

// syncLatency changes the authoritative spec of sampled Machine API Machines one at a time
// among n mirrored ones and measures how long until each Cluster API mirror shows it.
func syncLatency(n int) (result, error) {
	p, err := migratePlatformFor("sim")
	if err != nil {
		return result{}, err
	}
	start := time.Now()
	e, _, err := mirrored(p, n)
	if err != nil {
		return result{}, err
	}
	defer e.stop()
	bringUp := time.Since(start)
	// The last Machines are mirrored while the manager still works through the bring-up's
	// tail (status, counts); the latency is measured among mirrored Machines, so the changes
	// start once its queues are empty — or, at thousands of Machines, whose resyncs alone keep
	// some queue busy, after the limit, and the row says so.
	settled := time.Now()
	quiet := "every queue of the manager was empty for 2s"
	if err := e.waitQueuesEmpty(2*time.Second, 2*time.Minute); err != nil {
		fmt.Fprintf(os.Stderr, "bench: %v; measuring with them busy\n", err)
		quiet = "the changes started with the manager's queues still busy"
	}
	settle := time.Since(settled)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	wc, err := client.NewWithWatch(e.lab.Config, client.Options{Scheme: scheme.Scheme})
	if err != nil {
		return result{}, err
	}
	var list machinev1beta1.MachineList
	if err := e.client.List(ctx, &list, client.InNamespace(mapiNS)); err != nil {
		return result{}, err
	}
	samples := min(200, len(list.Items))
	const label = "node-role.kubernetes.io/bench-latency"

	var mu sync.Mutex
	changed := map[string]time.Time{} // when each change was stored
	var latencies, writes []time.Duration
	type change struct {
		name    string
		stored  time.Time
		latency time.Duration
	}
	var slowest []change
	seen := make(chan struct{}, samples)
	// The watch starts at the collection's current resourceVersion: without one it first
	// replays every Machine as ADDED, and at 5,000 Machines the first changes' events waited
	// about 4 s behind that replay in this very stream (p99 4.1 s, all of it the benchmark's).
	var now clusterv1.MachineList
	if err := e.client.List(ctx, &now, client.InNamespace(capiNS), client.Limit(1)); err != nil {
		return result{}, err
	}
	w, err := wc.Watch(ctx, &clusterv1.MachineList{}, client.InNamespace(capiNS),
		&client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: now.ResourceVersion}})
	if err != nil {
		return result{}, err
	}
	go func() {
		for ev := range w.ResultChan() {
			if ev.Type != watch.Modified {
				continue
			}
			m, ok := ev.Object.(*clusterv1.Machine)
			if !ok {
				continue
			}
			if _, has := m.Labels[label]; !has {
				continue
			}
			mu.Lock()
			if t, ok := changed[m.Name]; ok {
				latencies = append(latencies, time.Since(t))
				slowest = append(slowest, change{m.Name, t, time.Since(t)})
				delete(changed, m.Name)
				seen <- struct{}{}
			}
			mu.Unlock()
		}
	}()
	w0, err := e.managerWrites()
	if err != nil {
		return result{}, err
	}
	bringUpLog := writeBreakdown(e, 0, n)
	logStart := logSize(e)
	q0, err := e.queueSnapshot()
	if err != nil {
		return result{}, err
	}
	for i := 0; i < samples; i++ {
		m := &list.Items[i*len(list.Items)/samples]
		patch := client.MergeFrom(m.DeepCopy())
		if m.Spec.ObjectMeta.Labels == nil {
			m.Spec.ObjectMeta.Labels = map[string]string{}
		}
		m.Spec.ObjectMeta.Labels[label] = ""
		t := time.Now()
		mu.Lock()
		changed[m.Name] = t
		mu.Unlock()
		if err := e.client.Patch(ctx, m, patch); err != nil {
			return result{}, err
		}
		// The latency runs from the moment the change is stored; the apiserver's own time
		// to store it is reported apart.
		stored := time.Now()
		writes = append(writes, stored.Sub(t))
		mu.Lock()
		if _, pending := changed[m.Name]; pending {
			changed[m.Name] = stored
		}
		mu.Unlock()
		time.Sleep(50 * time.Millisecond) // a steady trickle, not a burst
	}
	timeout := time.After(2 * time.Minute)
	for got := 0; got < samples; got++ {
		select {
		case <-seen:
		case <-timeout:
			return result{}, fmt.Errorf("only %d of %d spec changes reached their mirrors in 2 minutes", got, samples)
		}
	}
	w.Stop()
	w1, err := e.managerWrites()
	if err != nil {
		return result{}, err
	}
	q1, err := e.queueSnapshot()
	if err != nil {
		return result{}, err
	}
	mu.Lock()
	defer mu.Unlock()
	slices.Sort(latencies)
	slices.Sort(writes)
	slices.SortFunc(slowest, func(a, b change) int { return int(b.latency - a.latency) })
	var worst []string
	for _, c := range slowest[:min(5, len(slowest))] {
		worst = append(worst, fmt.Sprintf("%s stored %s mirrored after %s", c.name, c.stored.UTC().Format("15:04:05.000"), c.latency.Round(time.Millisecond)))
	}
	pct := func(d []time.Duration, p float64) time.Duration {
		return d[int(p*float64(len(d)-1))].Round(time.Millisecond)
	}
	return result{N: n, Seconds: pct(latencies, 0.5).Seconds(), ManagerWrites: w1 - w0, ManagerPeakRSSMiB: e.managerPeakRSS(),
		Extra: fmt.Sprintf("sync latency over %d changes: p50 %s, p99 %s, max %s (seconds column = p50; writes are for the %d changes); "+
			"the apiserver's time to store each change: p50 %s, p99 %s",
			len(latencies), pct(latencies, 0.5), pct(latencies, 0.99), pct(latencies, 1), samples, pct(writes, 0.5), pct(writes, 0.99)) +
			writeBreakdown(e, logStart, samples) + queueReport(q0, q1) + "\n  slowest: " + strings.Join(worst, "; ") +
			fmt.Sprintf("\n  bring-up (lab included; %d Machines created, Running and mirrored with every group on): %s, %.2f manager writes per Machine; then %s until %s",
				n, bringUp.Round(time.Second), float64(w0)/float64(n), settle.Round(100*time.Millisecond), quiet) + bringUpLog}, nil
}

// instanceCount is how many cloud instances are pending or running.
func (e *env) instanceCount() (int, error) {
	c, err := cloudclient.New(e.cloud.URL(), cloudclient.Options{})
	if err != nil {
		return 0, err
	}
	l, err := c.DescribeInstances(context.Background(), api.DescribeInstancesRequest{States: []api.InstanceState{api.StatePending, api.StateRunning}})
	if err != nil {
		return 0, err
	}
	return len(l), nil
}
