package main

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/machina-dev/machina/api/infrastructure/v1alpha1"
	"github.com/machina-dev/machina/internal/cloud/ec2"
	"github.com/machina-dev/machina/internal/demo"
	"github.com/machina-dev/machina/internal/manager"
)

// mapiPlatform is what mapi-scale needs of a platform.
type mapiPlatform struct {
	env envOptions
	// machineSet creates what the platform's Machines need and returns the MachineSet to
	// scale, not yet created, at zero replicas.
	machineSet func(ctx context.Context, c client.Client) (*machinev1beta1.MachineSet, error)
	// calls counts the cloud calls so far, by operation; callsLabel names them.
	calls      func(e *env) map[string]int64
	callsLabel string
}

func mapiPlatformFor(name string) (mapiPlatform, error) {
	switch name {
	case "sim":
		return mapiPlatform{env: envOptions{groups: "machineapi,sim"}, machineSet: simMachineSet, callsLabel: "cloud API calls/M", calls: simCalls}, nil
	case "aws":
		groups := "machineapi,aws"
		if machineAPI == "upstream" {
			groups = "opsmetrics" // machine-api-operator's controllers do the Machine API's work
		}
		return mapiPlatform{env: envOptions{groups: groups, ec2: true, audit: auditWrites || machineAPI == "upstream"},
			machineSet: awsMachineSet, callsLabel: "EC2 calls/M",
			calls: func(e *env) map[string]int64 { return e.cloud.EC2().Calls() }}, nil
	}
	return mapiPlatform{}, fmt.Errorf("-platform %q: want sim or aws", name)
}

func simMachineSet(_ context.Context, _ client.Client) (*machinev1beta1.MachineSet, error) {
	ps, _ := json.Marshal(&infrav1.SimMachineProviderSpec{
		TypeMeta: metav1.TypeMeta{APIVersion: infrav1.GroupVersion.String(), Kind: "SimMachineProviderSpec"},
		Region:   "sim-east-1", Zone: "sim-east-1a", InstanceType: "s1.small", Image: "sim-rhcos-9"})
	labels := map[string]string{"bench": "mapi-scale"}
	return &machinev1beta1.MachineSet{ObjectMeta: metav1.ObjectMeta{Name: "bench", Namespace: "default"},
		Spec: machinev1beta1.MachineSetSpec{Replicas: ptr.To[int32](0), Selector: metav1.LabelSelector{MatchLabels: labels},
			Template: machinev1beta1.MachineTemplateSpec{ObjectMeta: machinev1beta1.ObjectMeta{Labels: labels},
				Spec: machinev1beta1.MachineSpec{ProviderSpec: machinev1beta1.ProviderSpec{Value: &runtime.RawExtension{Raw: ps}}}}}}, nil
}

// awsMachineSet seeds the AWS lab's cluster objects (Infrastructure, credentials and user
// data Secrets) and returns one of its worker MachineSets: the EC2 front's RHCOS AMI, the
// zone's private subnet and the security groups found by tag filters.
func awsMachineSet(ctx context.Context, c client.Client) (*machinev1beta1.MachineSet, error) {
	mapiNS, capiNS := manager.Env{}.Namespaces()
	cl := demo.DefaultAWSCluster(mapiNS, capiNS, nil)
	if err := demo.EnsureAWSClusterObjects(ctx, c, cl); err != nil {
		return nil, err
	}
	return cl.MachineSet(cl.Name+"-bench", cl.Zones[0], 0), nil
}

// mapiScale scales a Machine API MachineSet from 0 to n and waits until every Machine is
// Running with a nodeRef.
func mapiScale(n int) (result, error) {
	p, err := mapiPlatformFor(platform)
	if err != nil {
		return result{}, err
	}
	e, err := startEnvWith(p.env)
	if err != nil {
		return result{}, err
	}
	defer e.stop()
	ctx := context.Background()
	ms, err := p.machineSet(ctx, e.client)
	if err != nil {
		return result{}, err
	}
	if machineAPI == "upstream" {
		stop, err := startMachineAPIPeer(ctx, e)
		if err != nil {
			return result{}, err
		}
		defer stop()
	}
	if maxProvisioning > 0 {
		ms.Annotations = map[string]string{"machina.dev/max-provisioning": strconv.Itoa(maxProvisioning)} // provisioncap.Annotation
	}
	if err := e.client.Create(ctx, ms); err != nil {
		return result{}, err
	}
	time.Sleep(2 * time.Second) // let the manager settle on the empty MachineSet
	w0, err := e.managerWrites()
	if err != nil {
		return result{}, err
	}
	k0, c0, logStart := e.kubeletWrite.Load(), p.calls(e), logSize(e)
	q0, err := e.queueSnapshot()
	if err != nil {
		return result{}, err
	}

	faults, err := injectFaults(ctx, e)
	if err != nil {
		return result{}, err
	}
	ph := e.startPhase()
	start := time.Now()
	rate := sampleRate(func() int64 { return ec2.TotalCalls(p.calls(e)) })
	scale := &autoscalingv1.Scale{Spec: autoscalingv1.ScaleSpec{Replicas: int32(n)}}
	if err := e.client.SubResource("scale").Update(ctx, ms, client.WithSubResourceBody(scale)); err != nil {
		return result{}, err
	}
	if err := waitMachinesUp(ctx, e.watched, ms.Namespace, n); err != nil {
		return result{}, err
	}
	elapsed, cpu, apiCPU := time.Since(start), ph.report(n), ph.cpuSeconds("kube-apiserver")
	mean, peak := rate()
	cpu = append(cpu, fmt.Sprintf("%s per second: mean %.1f, peak %d (busiest second)", strings.TrimSuffix(p.callsLabel, "/M"), mean, peak))
	if f := faults(); f != "" {
		cpu = append(cpu, f)
	}
	time.Sleep(2 * time.Second) // writes that follow the last Running (status resync) count too
	w1, err := e.managerWrites()
	if err != nil {
		return result{}, err
	}
	q1, err := e.queueSnapshot()
	if err != nil {
		return result{}, err
	}
	r := result{N: n, Seconds: elapsed.Seconds(), ManagerWrites: w1 - w0, KubeletWrites: e.kubeletWrite.Load() - k0,
		ManagerPeakRSSMiB: e.managerPeakRSS(), APIServerCPU: apiCPU,
		Extra: callsPerMachine(p.callsLabel, c0, p.calls(e), n) + writeBreakdown(e, logStart, n) + queueReport(q0, q1),
		Lines: cpu}
	if p.env.audit {
		if err := auditedWrites(e, &r, start); err != nil {
			return result{}, err
		}
	}
	return r, nil
}

// auditedWrites counts the Machine API controllers' writes since start from the audit log
// into r: machine-api-operator's, in the writes column, under -machine-api upstream.
func auditedWrites(e *env, r *result, start time.Time) error {
	user := machineAPIUser()
	w, by, err := auditWriteCount(e, user, start, time.Now())
	if err != nil {
		return err
	}
	if machineAPI == "upstream" {
		r.ManagerWrites, r.ManagerPeakRSSMiB = w, 0
	}
	r.Lines = append(r.Lines, fmt.Sprintf("writes of %s from the audit log: %.2f per Machine (%s)", user, float64(w)/float64(r.N), by))
	return nil
}

// waitMachinesUp waits until n Machines in ns are Running with a nodeRef, reporting progress;
// a Failed Machine ends the wait.
func waitMachinesUp(ctx context.Context, c client.Reader, ns string, n int) error {
	return waitFor(fmt.Sprintf("%d Machines Running", n), scaleLimit(n), func() (int, error) {
		var list machinev1beta1.MachineList
		if err := c.List(ctx, &list, client.InNamespace(ns)); err != nil {
			return 0, err
		}
		done := 0
		for _, m := range list.Items {
			switch {
			case ptr.Deref(m.Status.Phase, "") == machinev1beta1.PhaseRunning && m.Status.NodeRef != nil:
				done++
			case ptr.Deref(m.Status.Phase, "") == machinev1beta1.PhaseFailed:
				return 0, fmt.Errorf("machine %s Failed: %s", m.Name, ptr.Deref(m.Status.ErrorMessage, ""))
			}
		}
		return n - done, nil
	})
}

// callsPerMachine describes the calls between before and after per Machine: the total and
// the busiest operations.
func callsPerMachine(label string, before, after map[string]int64, n int) string {
	type op struct {
		name  string
		calls int64
	}
	var ops []op
	var total int64
	for _, name := range slices.Sorted(maps.Keys(after)) {
		if d := after[name] - before[name]; d > 0 {
			ops = append(ops, op{name, d})
			total += d
		}
	}
	if total == 0 {
		return label + " 0 (no cloud calls)"
	}
	slices.SortStableFunc(ops, func(a, b op) int { return cmp.Compare(b.calls, a.calls) })
	var parts []string
	for _, o := range ops[:min(len(ops), 5)] {
		parts = append(parts, fmt.Sprintf("%s %.2f", o.name, float64(o.calls)/float64(n)))
	}
	return fmt.Sprintf("%s %.2f (%s)", label, float64(total)/float64(n), strings.Join(parts, ", "))
}

// sampleRate samples a growing count every second from now on; the function it returns
// stops the sampling and gives the mean rate since the start and the largest rise in one
// second.
func sampleRate(count func() int64) func() (mean float64, peak int64) {
	start, first := time.Now(), count()
	done := make(chan struct{})
	result := make(chan int64, 1)
	go func() {
		last, peak := first, int64(0)
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-t.C:
				c := count()
				peak = max(peak, c-last)
				last = c
			case <-done:
				result <- peak
				return
			}
		}
	}()
	return func() (float64, int64) {
		close(done)
		peak := <-result
		return float64(count()-first) / time.Since(start).Seconds(), peak
	}
}
