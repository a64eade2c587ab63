package machineapi_test

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/machina-dev/machina/internal/cloud/api"
	"github.com/machina-dev/machina/internal/controllers/machineapi/machineset"
	"github.com/machina-dev/machina/internal/testenv"
)

func newMachineSet(name string, replicas int32, policy string) *machinev1beta1.MachineSet {
	labels := map[string]string{"machineset": name}
	return &machinev1beta1.MachineSet{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: machinev1beta1.MachineSetSpec{
			Replicas:     ptr.To(replicas),
			DeletePolicy: policy,
			Selector:     metav1.LabelSelector{MatchLabels: labels},
			Template: machinev1beta1.MachineTemplateSpec{
				ObjectMeta: machinev1beta1.ObjectMeta{Labels: labels},
				Spec:       machinev1beta1.MachineSpec{ProviderSpec: machinev1beta1.ProviderSpec{Value: providerSpec(nil)}},
			},
		},
	}
}

// setMachines lists the Machines a MachineSet owns that are not being deleted.
func setMachines(ctx context.Context, e *testenv.Env, ms *machinev1beta1.MachineSet) ([]machinev1beta1.Machine, error) {
	var list machinev1beta1.MachineList
	if err := e.Client.List(ctx, &list, client.InNamespace(ns), client.MatchingLabels(ms.Spec.Selector.MatchLabels)); err != nil {
		return nil, err
	}
	var out []machinev1beta1.Machine
	for _, m := range list.Items {
		if m.DeletionTimestamp.IsZero() {
			out = append(out, m)
		}
	}
	return out, nil
}

func scaleTo(t *testing.T, e *testenv.Env, ms *machinev1beta1.MachineSet, n int32) {
	t.Helper()
	// Through the scale subresource, as `kubectl scale` does.
	scale := &autoscalingv1.Scale{Spec: autoscalingv1.ScaleSpec{Replicas: n}}
	if err := e.Client.SubResource("scale").Update(context.Background(), ms, client.WithSubResourceBody(scale)); err != nil {
		t.Fatalf("scale %s to %d: %v", ms.Name, n, err)
	}
}

// waitRunning waits until the MachineSet has exactly n Machines, all Running, and its
// status says so.
func waitRunning(t *testing.T, e *testenv.Env, ms *machinev1beta1.MachineSet, n int) []machinev1beta1.Machine {
	t.Helper()
	var machines []machinev1beta1.Machine
	e.Eventually(120*time.Second, fmt.Sprintf("%s: %d Running Machines", ms.Name, n), func(ctx context.Context) (bool, string, error) {
		var err error
		if machines, err = setMachines(ctx, e, ms); err != nil {
			return false, err.Error(), nil
		}
		running := 0
		for _, m := range machines {
			if ptr.Deref(m.Status.Phase, "") == machinev1beta1.PhaseRunning {
				running++
			}
		}
		got := &machinev1beta1.MachineSet{}
		if err := e.Client.Get(ctx, client.ObjectKeyFromObject(ms), got); err != nil {
			return false, err.Error(), nil
		}
		return len(machines) == n && running == n && got.Status.ReadyReplicas == int32(n) && got.Status.Replicas == int32(n),
			fmt.Sprintf("%d machines, %d running, status %+v", len(machines), running, got.Status), nil
	})
	return machines
}

func names(ms []machinev1beta1.Machine) []string {
	var out []string
	for _, m := range ms {
		out = append(out, m.Name)
	}
	sort.Strings(out)
	return out
}

func testMachineSetDeletePolicies(t *testing.T) {
	e := env.For(t)
	ctx := context.Background()
	for _, policy := range []string{machineset.RandomDeletePolicy, machineset.NewestDeletePolicy, machineset.OldestDeletePolicy} {
		name := "policy-" + strings.ToLower(policy)
		ms := newMachineSet(name, 0, policy)
		if err := e.Client.Create(ctx, ms); err != nil {
			t.Fatal(err)
		}
		scaleTo(t, e, ms, 2)
		first := names(waitRunning(t, e, ms, 2))
		time.Sleep(1100 * time.Millisecond) // creation timestamps have one-second resolution
		scaleTo(t, e, ms, 5)
		all := waitRunning(t, e, ms, 5)
		scaleTo(t, e, ms, 2)
		kept := names(waitRunning(t, e, ms, 2))
		var second []string
		for _, n := range names(all) {
			if !contains(first, n) {
				second = append(second, n)
			}
		}
		switch policy {
		case machineset.NewestDeletePolicy:
			if strings.Join(kept, ",") != strings.Join(first, ",") {
				t.Errorf("Newest: kept %v, want the oldest %v", kept, first)
			}
		case machineset.OldestDeletePolicy:
			for _, k := range kept {
				if !contains(second, k) {
					t.Errorf("Oldest: kept %v, want two of the newest %v", kept, second)
				}
			}
		}
		scaleTo(t, e, ms, 0)
		waitRunning(t, e, ms, 0)
	}
}

func contains(s []string, x string) bool {
	for _, v := range s {
		if v == x {
			return true
		}
	}
	return false
}

func testMachineSetDeleteAnnotationAdoptionAndCascade(t *testing.T) {
	e := env.For(t)
	ctx := context.Background()
	// An orphan Machine that matches the selector is adopted instead of creating a new one.
	orphan := newMachine("adopt-me", nil)
	orphan.Labels = map[string]string{"machineset": "cascade"}
	create(t, e, orphan)
	waitPhase(t, e, "adopt-me", machinev1beta1.PhaseRunning, 60*time.Second)
	ms := newMachineSet("cascade", 1, "")
	if err := e.Client.Create(ctx, ms); err != nil {
		t.Fatal(err)
	}
	got := waitRunning(t, e, ms, 1)
	if got[0].Name != "adopt-me" || metav1.GetControllerOf(&got[0]) == nil || metav1.GetControllerOf(&got[0]).UID != ms.UID {
		t.Fatalf("orphan not adopted: %v owners %v", names(got), got[0].OwnerReferences)
	}

	scaleTo(t, e, ms, 3)
	machines := waitRunning(t, e, ms, 3)
	marked := machines[2]
	base := marked.DeepCopy()
	marked.Annotations = map[string]string{machineset.DeleteMachineAnnotation: "true"}
	if err := e.Client.Patch(ctx, &marked, client.MergeFrom(base)); err != nil {
		t.Fatal(err)
	}
	scaleTo(t, e, ms, 2)
	kept := waitRunning(t, e, ms, 2)
	if contains(names(kept), marked.Name) {
		t.Fatalf("the Machine annotated %s survived the scale down: %v", machineset.DeleteMachineAnnotation, names(kept))
	}

	// Status carries the selector for the scale subresource.
	if err := e.Client.Get(ctx, client.ObjectKeyFromObject(ms), ms); err != nil {
		t.Fatal(err)
	}
	if ms.Status.LabelSelector != "machineset=cascade" || ms.Status.FullyLabeledReplicas != 2 || ms.Status.ObservedGeneration != ms.Generation {
		t.Errorf("status %+v", ms.Status)
	}

	// Deleting the MachineSet deletes its Machines (owner references + garbage collector),
	// which terminate their instances.
	if err := e.Client.Delete(ctx, ms, client.PropagationPolicy(metav1.DeletePropagationBackground)); err != nil {
		t.Fatal(err)
	}
	e.Eventually(120*time.Second, "cascade", func(ctx context.Context) (bool, string, error) {
		left, err := setMachines(ctx, e, ms)
		if err != nil {
			return false, err.Error(), nil
		}
		var list machinev1beta1.MachineList
		_ = e.Client.List(ctx, &list, client.InNamespace(ns), client.MatchingLabels(ms.Spec.Selector.MatchLabels))
		return len(list.Items) == 0, fmt.Sprintf("%d active, %d total", len(left), len(list.Items)), nil
	})
	for _, m := range kept {
		for _, inst := range e.InstancesTagged("machina.dev/machine-uid", string(m.UID)) {
			if inst.State.Alive() {
				t.Errorf("instance %s of deleted Machine %s is %s", inst.InstanceID, m.Name, inst.State)
			}
		}
	}
	if err := e.Client.Get(ctx, client.ObjectKeyFromObject(ms), ms); !apierrors.IsNotFound(err) {
		t.Errorf("MachineSet still there: %v", err)
	}
}

func testMachineSetClusterAPITemplate(t *testing.T) {
	e := env.For(t)
	ctx := context.Background()
	ms := newMachineSet("capi-born", 2, "")
	ms.Spec.Template.Spec.AuthoritativeAPI = machinev1beta1.MachineAuthorityClusterAPI
	if err := e.Client.Create(ctx, ms); err != nil {
		t.Fatal(err)
	}
	e.Eventually(60*time.Second, "two Cluster API-authoritative Machines", func(ctx context.Context) (bool, string, error) {
		machines, err := setMachines(ctx, e, ms)
		if err != nil {
			return false, err.Error(), nil
		}
		ok := len(machines) == 2
		for _, m := range machines {
			ok = ok && m.Spec.AuthoritativeAPI == machinev1beta1.MachineAuthorityClusterAPI &&
				m.Status.AuthoritativeAPI == machinev1beta1.MachineAuthorityClusterAPI
		}
		return ok, fmt.Sprintf("%d machines", len(machines)), nil
	})
	// The Machine API leaves them alone: no instance is created for them, and they are not
	// born with its Machine controller's finalizer.
	machines, _ := setMachines(ctx, e, ms)
	for _, m := range machines {
		if controllerutil.ContainsFinalizer(&m, machinev1beta1.MachineFinalizer) {
			t.Errorf("Cluster API-authoritative %s carries the Machine API finalizer", m.Name)
		}
		if n := len(e.InstancesTagged("machina.dev/machine-uid", string(m.UID))); n != 0 {
			t.Errorf("Machine API created an instance for Cluster API-authoritative %s", m.Name)
		}
	}
	if err := e.Client.Delete(ctx, ms); err != nil {
		t.Fatal(err)
	}
	_ = api.StateRunning
}

// testMachineSetMachinesBornWithFinalizer: the Machines a MachineSet creates carry the Machine
// controller's finalizer in the create itself, saving that controller's first write.
func testMachineSetMachinesBornWithFinalizer(t *testing.T) {
	e := env.For(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	ms := newMachineSet("born-with-finalizer", 0, "")
	wc, err := client.NewWithWatch(e.Lab.Config, client.Options{Scheme: e.Client.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	w, err := wc.Watch(ctx, &machinev1beta1.MachineList{}, client.InNamespace(ns), client.MatchingLabels(ms.Spec.Selector.MatchLabels))
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	if err := e.Client.Create(ctx, ms); err != nil {
		t.Fatal(err)
	}
	scaleTo(t, e, ms, 2)
	for added := 0; added < 2; {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				t.Fatal("watch closed before two Machines were created")
			}
			m, isMachine := ev.Object.(*machinev1beta1.Machine)
			if ev.Type != watch.Added || !isMachine {
				continue
			}
			added++
			if !controllerutil.ContainsFinalizer(m, machinev1beta1.MachineFinalizer) {
				t.Errorf("%s was created without %s: %v", m.Name, machinev1beta1.MachineFinalizer, m.Finalizers)
			}
		case <-ctx.Done():
			t.Fatal("two Machines were not created in time")
		}
	}
	waitRunning(t, e, ms, 2)
	scaleTo(t, e, ms, 0)
	waitRunning(t, e, ms, 0)
}
