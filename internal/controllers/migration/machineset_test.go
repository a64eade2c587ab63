package migration_test

import (
	"context"
	"encoding/json"
	"fmt"
	"path"
	"testing"
	"time"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/machina-dev/machina/api/infrastructure/v1alpha1"
	"github.com/machina-dev/machina/internal/demo"
	"github.com/machina-dev/machina/internal/testenv"
)

func machineSet(name string, replicas int32) *machinev1beta1.MachineSet {
	raw, _ := json.Marshal(&infrav1.SimMachineProviderSpec{
		TypeMeta: metav1.TypeMeta{APIVersion: infrav1.GroupVersion.String(), Kind: "SimMachineProviderSpec"},
		Region:   "sim-east-1", Zone: "sim-east-1c", InstanceType: "s1.small", Image: "sim-rhcos-9",
		UserDataSecret: &corev1.LocalObjectReference{Name: demo.UserDataSecret}})
	labels := map[string]string{"machine.openshift.io/cluster-api-cluster": "lab", "machine.openshift.io/cluster-api-machineset": name}
	return &machinev1beta1.MachineSet{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "openshift-machine-api",
		Labels: map[string]string{"machine.openshift.io/cluster-api-cluster": "lab"}},
		Spec: machinev1beta1.MachineSetSpec{Replicas: ptr.To(replicas), Selector: metav1.LabelSelector{MatchLabels: labels},
			Template: machinev1beta1.MachineTemplateSpec{ObjectMeta: machinev1beta1.ObjectMeta{Labels: labels},
				Spec: machinev1beta1.MachineSpec{ProviderSpec: machinev1beta1.ProviderSpec{Value: &runtime.RawExtension{Raw: raw}}}}}}
}

// machinesOf lists both APIs' Machines of a MachineSet that are not being deleted, and how many
// of the Machine API ones are Running with a Node.
func machinesOf(ctx context.Context, e *testenv.Env, name string) (mapi, capi, running int, desc string) {
	sel := client.MatchingLabels{"machine.openshift.io/cluster-api-machineset": name}
	var mm machinev1beta1.MachineList
	var cm clusterv1.MachineList
	_ = e.Client.List(ctx, &mm, client.InNamespace("openshift-machine-api"), sel)
	_ = e.Client.List(ctx, &cm, client.InNamespace("openshift-cluster-api"), sel)
	for _, m := range mm.Items {
		if m.DeletionTimestamp.IsZero() {
			mapi++
			if ptr.Deref(m.Status.Phase, "") == "Running" && m.Status.NodeRef != nil {
				running++
			}
			desc += fmt.Sprintf(" mapi %s %s/%v", m.Name, m.Status.AuthoritativeAPI, ptr.Deref(m.Status.Phase, ""))
		}
	}
	for _, m := range cm.Items {
		if m.DeletionTimestamp.IsZero() {
			capi++
			desc += fmt.Sprintf(" capi %s %s", m.Name, m.Status.Phase)
		}
	}
	return mapi, capi, running, desc
}

func migrateSet(t *testing.T, e *testenv.Env, name string, to machinev1beta1.MachineAuthority) {
	t.Helper()
	ms := &machinev1beta1.MachineSet{}
	if err := e.Client.Get(context.Background(), client.ObjectKey{Namespace: "openshift-machine-api", Name: name}, ms); err != nil {
		t.Fatal(err)
	}
	base := ms.DeepCopy()
	ms.Spec.AuthoritativeAPI = to
	if err := e.Client.Patch(context.Background(), ms, client.MergeFrom(base)); err != nil {
		t.Fatal(err)
	}
	e.Eventually(90*time.Second, "MachineSet authority "+string(to), func(ctx context.Context) (bool, string, error) {
		if err := e.Client.Get(ctx, client.ObjectKeyFromObject(ms), ms); err != nil {
			return false, err.Error(), nil
		}
		return ms.Status.AuthoritativeAPI == to, fmt.Sprintf("%s %+v", ms.Status.AuthoritativeAPI, ms.Status.Conditions), nil
	})
}

// The migration design's first end-to-end scenario: a Machine API MachineSet is mirrored,
// switched to the Cluster API, scaled there (new Machines appear in both APIs, with Nodes),
// scaled down, and handed back. It runs in each platform's own lab (TestOwnLab): on aws the
// Cluster API side's new Machine is launched by the upstream CAPA controller.
func testMachineSetScaledInClusterAPI(t *testing.T, e *testenv.Env, pc platformCase) {
	ctx := context.Background()
	name := pc.name("scaler")
	if err := e.Client.Create(ctx, platformSet(pc, name, 1, pc.small)); err != nil {
		t.Fatal(err)
	}
	wait := func(wantMAPI, wantCAPI, wantRunning int) {
		e.Eventually(120*time.Second, fmt.Sprintf("%d/%d Machines, %d running", wantMAPI, wantCAPI, wantRunning),
			func(ctx context.Context) (bool, string, error) {
				m, c, r, desc := machinesOf(ctx, e, name)
				return m == wantMAPI && c == wantCAPI && r == wantRunning, desc, nil
			})
	}
	wait(1, 1, 1)
	e.Eventually(60*time.Second, "MachineSet synchronised", func(ctx context.Context) (bool, string, error) {
		ms := &machinev1beta1.MachineSet{}
		if err := e.Client.Get(ctx, client.ObjectKey{Namespace: "openshift-machine-api", Name: name}, ms); err != nil {
			return false, err.Error(), nil
		}
		return ms.Status.SynchronizedGeneration == ms.Generation, fmt.Sprintf("%+v", ms.Status.Conditions), nil
	})
	created := instancesCreated(t, e)
	migrateSet(t, e, name, machinev1beta1.MachineAuthorityClusterAPI)
	if n := instancesCreated(t, e); n != created {
		t.Fatalf("migrating the MachineSet created %d instance(s)", n-created)
	}

	scaleTo(t, e, name, 2)
	wait(2, 2, 2) // the new Cluster API Machine got a Machine API mirror, and a Node
	var mm machinev1beta1.MachineList
	_ = e.Client.List(ctx, &mm, client.InNamespace("openshift-machine-api"), client.MatchingLabels{"machine.openshift.io/cluster-api-machineset": name})
	capiBorn := 0
	for _, m := range mm.Items {
		if m.Status.AuthoritativeAPI == machinev1beta1.MachineAuthorityClusterAPI {
			capiBorn++
			if ref := metav1.GetControllerOf(&m); ref == nil || ref.Name != name {
				t.Errorf("mirror %s is not owned by the Machine API MachineSet: %v", m.Name, m.OwnerReferences)
			}
		}
	}
	if capiBorn != 1 {
		t.Errorf("%d Cluster API-authoritative Machine API mirrors, want 1", capiBorn)
	}
	scaleTo(t, e, name, 1)
	wait(1, 1, 1)
	migrateSet(t, e, name, machinev1beta1.MachineAuthorityMachineAPI)
	ms := &machinev1beta1.MachineSet{}
	if err := e.Client.Get(ctx, client.ObjectKey{Namespace: "openshift-machine-api", Name: name}, ms); err != nil {
		t.Fatal(err)
	}
	if ptr.Deref(ms.Spec.Replicas, 0) != 1 {
		t.Errorf("Machine API replicas %d after the round trip, want 1 (the Cluster API's)", ptr.Deref(ms.Spec.Replicas, 0))
	}

	// Remove it: deleting the authoritative MachineSet takes its Machines, both copies of
	// each, and their instances with it.
	var left machinev1beta1.MachineList
	if err := e.Client.List(ctx, &left, client.InNamespace("openshift-machine-api"), client.MatchingLabels{"machine.openshift.io/cluster-api-machineset": name}); err != nil {
		t.Fatal(err)
	}
	var instances []string
	for _, m := range left.Items {
		if !m.DeletionTimestamp.IsZero() {
			continue // the scaled-down Machine, still on its way out
		}
		if pid := ptr.Deref(m.Spec.ProviderID, ""); pid != "" {
			instances = append(instances, path.Base(pid)) // the instance ID ends every platform's providerID
		}
	}
	if len(instances) != 1 {
		t.Fatalf("want the one remaining Machine's instance, have %v", instances)
	}
	if err := e.Client.Delete(ctx, ms); err != nil {
		t.Fatal(err)
	}
	e.Eventually(2*time.Minute, "MachineSet, Machines and instances gone in both APIs", func(ctx context.Context) (bool, string, error) {
		m, c, _, desc := machinesOf(ctx, e, name)
		mapiGone := apierrors.IsNotFound(e.Client.Get(ctx, client.ObjectKey{Namespace: mapiNS, Name: name}, &machinev1beta1.MachineSet{}))
		capiGone := apierrors.IsNotFound(e.Client.Get(ctx, client.ObjectKey{Namespace: capiNS, Name: name}, &clusterv1.MachineSet{}))
		inst, err := e.Cloud.GetInstance(ctx, instances[0])
		gone := err != nil || !inst.State.Alive()
		return m == 0 && c == 0 && mapiGone && capiGone && gone,
			fmt.Sprintf("%s; mapi set gone %v capi set gone %v; instance gone %v", desc, mapiGone, capiGone, gone), nil
	})
}

// scaleTo scales the Cluster API MachineSet through its scale subresource, as kubectl scale
// does, retrying when the MachineSet changed in between.
func scaleTo(t *testing.T, e *testenv.Env, name string, n int32) {
	t.Helper()
	capiSet := &clusterv1.MachineSet{ObjectMeta: metav1.ObjectMeta{Namespace: "openshift-cluster-api", Name: name}}
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		scale := &autoscalingv1.Scale{}
		if err := e.Client.SubResource("scale").Get(context.Background(), capiSet, scale); err != nil {
			return err
		}
		scale.Spec.Replicas = n
		return e.Client.SubResource("scale").Update(context.Background(), capiSet, client.WithSubResourceBody(scale))
	})
	if err != nil {
		t.Fatal(err)
	}
}
