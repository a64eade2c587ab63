package main

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/machina-dev/machina/internal/cloud/api"
	cloudclient "github.com/machina-dev/machina/internal/cloud/client"
	"github.com/machina-dev/machina/internal/scheme"
)

// The floor scenarios measure what the apiserver of this machine needs for a scale-up's
// writes when nothing but the writes costs anything: no manager runs; the benchmark itself,
// with the manager's identity (so the same admission policies apply), sends per Machine the
// writes the manager sends in the matching scenario (MACHINA_DEBUG_WRITES=1 lists them:
// docs/performance.md), from floorWorkers goroutines, each write built from the previous
// one's answer, never reading, never retrying. The instances are launched in the simulated
// cloud as the providers launch them, so its kubelets register the Nodes and renew their
// Leases as in the scenario, and informers of the benchmark watch the kinds the manager
// watches, so the apiserver fans the changes out as it would. The time runs until every
// Machine's writes are done and every Node is Ready: the scenario's seconds divided by
// these are how far the controllers are from what the apiserver allows.

// floorWorkers is how many Machines are written at once: enough to keep both cores busy.
const floorWorkers = 64

// floorMix is one scenario's writes.
type floorMix struct {
	// setup creates what the Machines refer to, before the clock starts.
	setup func(ctx context.Context, f *floorEnv) error
	// before, if set, prepares Machine i before the clock starts (mirror's floor: its
	// Running Machine API Machine); the clock starts once every Node is Ready.
	before func(ctx context.Context, f *floorEnv, i int) error
	// machine sends Machine i's writes.
	machine func(ctx context.Context, f *floorEnv, i int) error
	// watch are the kinds the manager of the matching scenario watches.
	watch []client.Object
}

// floorEnv is a lab, a cloud and the writer.
type floorEnv struct {
	*env
	writer client.Client
	writes atomic.Int64
	cloud  *cloudclient.Client
	// owner is the MachineSet the Machines belong to.
	owner metav1.OwnerReference
	// state holds what a mix's before step left of Machine i for its timed writes.
	state []any
	// later runs a Machine's writes that wait for something (its Node) without holding a
	// worker; the writes are done when it is.
	later errgroup.Group
}

// launch starts Machine i's instance the way the providers do (a client token per
// Machine), so the simulated kubelets make its Node.
func (f *floorEnv) launch(ctx context.Context, i int) (*api.Instance, error) {
	resp, err := f.cloud.RunInstances(ctx, api.RunInstancesRequest{ClientToken: fmt.Sprintf("floor-%d", i),
		Region: "sim-east-1", Zone: "sim-east-1a", InstanceType: "s1.small", Image: "sim-rhcos-9",
		Tags: map[string]string{"bench": "floor"}})
	if err != nil {
		return nil, err
	}
	return &resp.Instance, nil
}

// event writes one Normal event about obj, as a controller's recorder does.
func (f *floorEnv) event(ctx context.Context, obj client.Object, kind, reason, message string) error {
	now := metav1.Now()
	return f.writer.Create(ctx, &corev1.Event{
		ObjectMeta: metav1.ObjectMeta{GenerateName: obj.GetName() + ".", Namespace: obj.GetNamespace()},
		InvolvedObject: corev1.ObjectReference{APIVersion: obj.GetObjectKind().GroupVersionKind().GroupVersion().String(),
			Kind: kind, Namespace: obj.GetNamespace(), Name: obj.GetName(), UID: obj.GetUID(), ResourceVersion: obj.GetResourceVersion()},
		Reason: reason, Message: message, Type: corev1.EventTypeNormal, Source: corev1.EventSource{Component: "machina"},
		FirstTimestamp: now, LastTimestamp: now, Count: 1,
	})
}

// floorRun starts a lab and a cloud without a manager and measures mix for n Machines.
func floorRun(n int, mix floorMix) (result, error) {
	e, err := startEnvWith(envOptions{noManager: true})
	if err != nil {
		return result{}, err
	}
	defer e.stop()
	ctx := context.Background()
	f := &floorEnv{env: e, state: make([]any, n)}
	mcfg, err := e.lab.ManagerConfig()
	if err != nil {
		return result{}, err
	}
	wcfg := rest.CopyConfig(mcfg)
	wcfg.QPS, wcfg.Burst = 1000, 2000 // the manager's flags in the scenarios
	wcfg.Wrap(countWrites(&f.writes))
	if f.writer, err = client.New(wcfg, client.Options{Scheme: scheme.Scheme}); err != nil {
		return result{}, err
	}
	if f.cloud, err = cloudclient.New(e.cloud.URL(), cloudclient.Options{}); err != nil {
		return result{}, err
	}
	if err := f.watch(ctx, append(mix.watch, &corev1.Node{})); err != nil {
		return result{}, err
	}
	if err := mix.setup(ctx, f); err != nil {
		return result{}, err
	}
	if mix.before != nil {
		if err := eachMachine(ctx, n, func(ctx context.Context, i int) error { return mix.before(ctx, f, i) }); err != nil {
			return result{}, err
		}
		if err := waitNodesReady(ctx, e.watched, n); err != nil {
			return result{}, err
		}
	}
	w0, k0 := f.writes.Load(), e.kubeletWrite.Load()
	ph := e.startPhase()
	start := time.Now()
	if err := eachMachine(ctx, n, func(ctx context.Context, i int) error { return mix.machine(ctx, f, i) }); err != nil {
		return result{}, err
	}
	if err := f.later.Wait(); err != nil {
		return result{}, err
	}
	written := time.Since(start)
	if err := waitNodesReady(ctx, e.watched, n); err != nil {
		return result{}, err
	}
	elapsed, cpu := time.Since(start), ph.report(n)
	return result{N: n, Seconds: elapsed.Seconds(), ManagerWrites: f.writes.Load() - w0, KubeletWrites: e.kubeletWrite.Load() - k0,
		Extra: fmt.Sprintf("(no manager: the benchmark's own writes; all written after %.1f s)", written.Seconds()),
		Lines: cpu}, nil
}

// eachMachine runs op for Machines 0 to n-1, floorWorkers at a time.
func eachMachine(ctx context.Context, n int, op func(ctx context.Context, i int) error) error {
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(floorWorkers)
	for i := range n {
		g.Go(func() error { return op(gctx, i) })
	}
	return g.Wait()
}

// watch starts informers of kinds on the benchmark's cache and waits until they synced.
func (f *floorEnv) watch(ctx context.Context, kinds []client.Object) error {
	c := f.informers
	for _, k := range kinds {
		if _, err := c.GetInformer(ctx, k); err != nil {
			return err
		}
	}
	if !c.WaitForCacheSync(ctx) {
		return fmt.Errorf("informers did not sync")
	}
	return nil
}

// waitNodesReady waits until n Nodes report Ready, reporting progress.
func waitNodesReady(ctx context.Context, c client.Reader, n int) error {
	return waitFor(fmt.Sprintf("%d Nodes Ready", n), scaleLimit(n), func() (int, error) {
		var nodes corev1.NodeList
		if err := c.List(ctx, &nodes); err != nil {
			return 0, err
		}
		ready := 0
		for _, node := range nodes.Items {
			for _, cond := range node.Status.Conditions {
				if cond.Type == corev1.NodeReady && cond.Status == corev1.ConditionTrue {
					ready++
				}
			}
		}
		return n - ready, nil
	})
}
