package main

import (
	"context"
	"fmt"
	"os"
	"sort"
	"sync"
	"time"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/machina-dev/machina/internal/cloud/api"
	cloudclient "github.com/machina-dev/machina/internal/cloud/client"
	"github.com/machina-dev/machina/internal/demo"
	"github.com/machina-dev/machina/internal/scheme"
)

const (
	mapiNS        = "openshift-machine-api"
	capiNS        = "openshift-cluster-api"
	machinesPerMS = 50
)

// mirrored starts every controller and n Machine API Machines (MachineSets of 50) and waits
// until each Machine is Running and mirrored into the Cluster API (Synchronized True).
func mirrored(n int) (*env, []string, error) {
	e, err := startEnv("*")
	if err != nil {
		return nil, nil, err
	}
	ctx := context.Background()
	kc, err := os.ReadFile(e.lab.KubeconfigPath)
	if err != nil {
		e.stop()
		return nil, nil, err
	}
	cl := demo.Cluster{Name: "bench", Region: "sim-east-1", MachineAPINamespace: mapiNS, ClusterAPINamespace: capiNS, Kubeconfig: kc}
	if err := demo.EnsureCluster(ctx, e.client, cl); err != nil {
		e.stop()
		return nil, nil, err
	}
	var sets []string
	for left, i := n, 0; left > 0; i++ {
		size := min(left, machinesPerMS)
		name := fmt.Sprintf("bench-%02d", i)
		ms := demo.MachineSet(cl, name, []string{"sim-east-1a", "sim-east-1b"}[i%2], int32(size))
		if err := e.client.Create(ctx, ms); err != nil {
			e.stop()
			return nil, nil, err
		}
		sets = append(sets, name)
		left -= size
	}
	start := time.Now()
	err = waitFor(fmt.Sprintf("%d Machines Running and mirrored", n), 20*time.Minute, func() (int, error) {
		var list machinev1beta1.MachineList
		if err := e.client.List(ctx, &list, client.InNamespace(mapiNS)); err != nil {
			return 0, err
		}
		done := 0
		for _, m := range list.Items {
			if ptr.Deref(m.Status.Phase, "") == machinev1beta1.PhaseRunning && synchronized(m.Status.Conditions) &&
				m.Status.SynchronizedGeneration == m.Generation {
				done++
			}
		}
		return n - done, nil
	})
	if err != nil {
		e.stop()
		return nil, nil, err
	}
	fmt.Fprintf(os.Stderr, "bench: %d Machines Running and mirrored in %s\n", n, time.Since(start).Round(time.Second))
	return e, sets, nil
}

func synchronized(conds []machinev1beta1.Condition) bool {
	for _, c := range conds {
		if c.Type == "Synchronized" {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// waitFor polls left() until it reports nothing left, with progress every 10 seconds.
func waitFor(what string, timeout time.Duration, left func() (int, error)) error {
	start, last := time.Now(), time.Now()
	for {
		n, err := left()
		if err != nil {
			return err
		}
		if n <= 0 {
			return nil
		}
		if time.Since(last) > 10*time.Second {
			fmt.Fprintf(os.Stderr, "bench: waiting for %s: %d left after %s\n", what, n, time.Since(start).Round(time.Second))
			last = time.Now()
		}
		if time.Since(start) > timeout {
			return fmt.Errorf("%s: %d left after %s", what, n, timeout)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// migrateScale hands n mirrored Machines and their MachineSets to the Cluster API at once
// and measures until every one reports status.authoritativeAPI ClusterAPI.
func migrateScale(n int) (result, error) {
	e, sets, err := mirrored(n)
	if err != nil {
		return result{}, err
	}
	defer e.stop()
	ctx := context.Background()
	w0, err := e.managerWrites()
	if err != nil {
		return result{}, err
	}
	start := time.Now()
	var list machinev1beta1.MachineList
	if err := e.client.List(ctx, &list, client.InNamespace(mapiNS)); err != nil {
		return result{}, err
	}
	for _, name := range sets {
		ms := &machinev1beta1.MachineSet{}
		if err := e.client.Get(ctx, client.ObjectKey{Namespace: mapiNS, Name: name}, ms); err != nil {
			return result{}, err
		}
		patch := client.MergeFrom(ms.DeepCopy())
		ms.Spec.AuthoritativeAPI = machinev1beta1.MachineAuthorityClusterAPI
		if err := e.client.Patch(ctx, ms, patch); err != nil {
			return result{}, err
		}
	}
	for i := range list.Items {
		m := &list.Items[i]
		patch := client.MergeFrom(m.DeepCopy())
		m.Spec.AuthoritativeAPI = machinev1beta1.MachineAuthorityClusterAPI
		if err := e.client.Patch(ctx, m, patch); err != nil {
			return result{}, err
		}
	}
	requested := time.Since(start)
	err = waitFor("migrations to ClusterAPI", 20*time.Minute, func() (int, error) {
		var ml machinev1beta1.MachineList
		var sl machinev1beta1.MachineSetList
		if err := e.client.List(ctx, &ml, client.InNamespace(mapiNS)); err != nil {
			return 0, err
		}
		if err := e.client.List(ctx, &sl, client.InNamespace(mapiNS)); err != nil {
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
	})
	if err != nil {
		return result{}, err
	}
	elapsed := time.Since(start)
	w1, err := e.managerWrites()
	if err != nil {
		return result{}, err
	}
	instances, err := e.instanceCount()
	if err != nil {
		return result{}, err
	}
	return result{N: n, Seconds: elapsed.Seconds(), ManagerWrites: w1 - w0, ManagerPeakRSSMiB: e.managerPeakRSS(),
		Extra: fmt.Sprintf("(%d MachineSets; requests written in %.1fs; %d cloud instances for %d Machines)", len(sets), requested.Seconds(), instances, n)}, nil
}

// syncLatency changes the authoritative spec of sampled Machine API Machines one at a time
// among n mirrored ones and measures how long until each Cluster API mirror shows it.
func syncLatency(n int) (result, error) {
	e, _, err := mirrored(n)
	if err != nil {
		return result{}, err
	}
	defer e.stop()
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
	changed := map[string]time.Time{}
	var latencies []time.Duration
	seen := make(chan struct{}, samples)
	w, err := wc.Watch(ctx, &clusterv1.MachineList{}, client.InNamespace(capiNS))
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
	for i := 0; i < samples; i++ {
		m := &list.Items[i*len(list.Items)/samples]
		patch := client.MergeFrom(m.DeepCopy())
		if m.Spec.ObjectMeta.Labels == nil {
			m.Spec.ObjectMeta.Labels = map[string]string{}
		}
		m.Spec.ObjectMeta.Labels[label] = ""
		mu.Lock()
		changed[m.Name] = time.Now()
		mu.Unlock()
		if err := e.client.Patch(ctx, m, patch); err != nil {
			return result{}, err
		}
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
	mu.Lock()
	defer mu.Unlock()
	sort.Slice(latencies, func(a, b int) bool { return latencies[a] < latencies[b] })
	pct := func(p float64) time.Duration { return latencies[int(p*float64(len(latencies)-1))] }
	return result{N: n, Seconds: pct(0.5).Seconds(), ManagerWrites: w1 - w0, ManagerPeakRSSMiB: e.managerPeakRSS(),
		Extra: fmt.Sprintf("sync latency over %d changes: p50 %s, p99 %s, max %s (seconds column = p50; writes are for the %d changes)",
			len(latencies), pct(0.5).Round(time.Millisecond), pct(0.99).Round(time.Millisecond), latencies[len(latencies)-1].Round(time.Millisecond), samples)}, nil
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
