package migration_test

import (
	"context"
	"fmt"
	"path"
	"slices"
	"strings"
	"testing"
	"time"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/machina-dev/machina/internal/authority"
	"github.com/machina-dev/machina/internal/authorityhook"
	"github.com/machina-dev/machina/internal/cloud/api"
	"github.com/machina-dev/machina/internal/testenv"
)

// testUninstall is docs/install.md's "Going back" beside machine-api-operator
// (TestOwnLab/upstream, last: machina is gone afterwards): every Machine API resource the
// Cluster API owns is handed back, machina is removed (its manager stopped, its webhook
// configuration deleted, its sync finalizer taken off the Machine API objects) and then
// machine-api-operator's controllers alone manage the Machines: nothing is launched or
// terminated by the removal, a scale-up launches exactly one instance and a deleted Machine
// has exactly its instance terminated, and its MachineSet replaces it.
func testUninstall(t *testing.T, e *testenv.Env, pc platformCase) {
	ctx := context.Background()
	set := pc.name("leaving")
	if err := e.Client.Create(ctx, platformSet(pc, set, 1, pc.small)); err != nil {
		t.Fatal(err)
	}
	waitSet(t, e, set, 1)
	moveSet(t, e, set, machinev1beta1.MachineAuthorityClusterAPI)

	handEverythingBack(t, e)
	before, err := e.Cloud.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	removeMachina(t, e)
	// Some resyncs of machine-api-operator's controllers with machina gone: nothing moves.
	time.Sleep(5 * time.Second)
	for _, p := range instancesChanged(e, before) {
		t.Errorf("removing machina: %s", p)
	}

	scaleMAPISet(t, e, set, 2)
	e.Eventually(3*time.Minute, set+": 2 Machine API Machines Running", func(ctx context.Context) (bool, string, error) {
		running, desc := runningMAPI(ctx, e, set)
		return len(running) == 2, desc, nil
	})
	running, _ := runningMAPI(ctx, e, set)
	victim := running[0]
	if err := e.Client.Delete(ctx, &victim); err != nil {
		t.Fatal(err)
	}
	e.Eventually(3*time.Minute, "Machine "+victim.Name+" gone and replaced", func(ctx context.Context) (bool, string, error) {
		now, desc := runningMAPI(ctx, e, set)
		gone := !slices.ContainsFunc(now, func(m machinev1beta1.Machine) bool { return m.Name == victim.Name })
		return gone && len(now) == 2, desc, nil
	})
	after, err := e.Cloud.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if c, d := after.InstancesCreated-before.InstancesCreated, after.InstancesTerminated-before.InstancesTerminated; c != 2 || d != 1 {
		t.Errorf("after machina left: %d instance(s) launched, %d terminated; want 2 (the scale-up, the replacement) and 1 (the deleted Machine's)", c, d)
	}
	inst, err := e.Cloud.GetInstance(ctx, path.Base(ptr.Deref(victim.Spec.ProviderID, "")))
	if err != nil || inst.State.Alive() {
		t.Errorf("the deleted Machine's instance: %v %v, want terminated", inst, err)
	}
}

// handEverythingBack requests MachineAPI for every Machine API MachineSet, Machine and
// MachineHealthCheck the Machine API does not own, and waits until it owns them all.
func handEverythingBack(t *testing.T, e *testenv.Env) {
	t.Helper()
	ctx := context.Background()
	var sets machinev1beta1.MachineSetList
	var machines machinev1beta1.MachineList
	var checks machinev1beta1.MachineHealthCheckList
	for _, l := range []client.ObjectList{&sets, &machines, &checks} {
		if err := e.Client.List(ctx, l, client.InNamespace(mapiNS)); err != nil {
			t.Fatal(err)
		}
	}
	mapi := machinev1beta1.MachineAuthorityMachineAPI
	for i := range sets.Items {
		if sets.Items[i].Status.AuthoritativeAPI != mapi {
			requestSet(t, e, sets.Items[i].Name, mapi)
		}
	}
	for i := range machines.Items {
		if m := machines.Items[i]; m.Status.AuthoritativeAPI != mapi && m.DeletionTimestamp.IsZero() {
			request(t, e, m.Name, mapi)
		}
	}
	for i := range checks.Items {
		if checks.Items[i].Annotations[authority.MHCStatusAuthoritativeAPIAnnotation] != string(mapi) {
			requestCheck(t, e, checks.Items[i].Name, mapi)
		}
	}
	e.Eventually(3*time.Minute, "every Machine API resource owned by the Machine API", func(ctx context.Context) (bool, string, error) {
		var notYet []string
		var sets machinev1beta1.MachineSetList
		var machines machinev1beta1.MachineList
		if err := e.Client.List(ctx, &sets, client.InNamespace(mapiNS)); err != nil {
			return false, err.Error(), nil
		}
		if err := e.Client.List(ctx, &machines, client.InNamespace(mapiNS)); err != nil {
			return false, err.Error(), nil
		}
		for _, s := range sets.Items {
			if s.Status.AuthoritativeAPI != mapi {
				notYet = append(notYet, "MachineSet "+s.Name+" "+string(s.Status.AuthoritativeAPI))
			}
		}
		for _, m := range machines.Items {
			if m.Status.AuthoritativeAPI != mapi && m.DeletionTimestamp.IsZero() {
				notYet = append(notYet, "Machine "+m.Name+" "+string(m.Status.AuthoritativeAPI))
			}
		}
		return len(notYet) == 0, strings.Join(notYet, "; "), nil
	})
}

// removeMachina does what docs/install.md's uninstall does in a cluster: the manager stops for
// good, its webhook configuration goes, and the sync finalizer leaves every Machine API object
// (the Cluster API mirrors stay, paused).
func removeMachina(t *testing.T, e *testenv.Env) {
	t.Helper()
	ctx := context.Background()
	e.StopManager()
	vwc := &admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: authorityhook.ConfigurationName}}
	if err := client.IgnoreNotFound(e.Client.Delete(ctx, vwc)); err != nil {
		t.Fatal(err)
	}
	var sets machinev1beta1.MachineSetList
	var machines machinev1beta1.MachineList
	var checks machinev1beta1.MachineHealthCheckList
	var objs []client.Object
	for _, l := range []client.ObjectList{&sets, &machines, &checks} {
		if err := e.Client.List(ctx, l, client.InNamespace(mapiNS)); err != nil {
			t.Fatal(err)
		}
	}
	for i := range sets.Items {
		objs = append(objs, &sets.Items[i])
	}
	for i := range machines.Items {
		objs = append(objs, &machines.Items[i])
	}
	for i := range checks.Items {
		objs = append(objs, &checks.Items[i])
	}
	for _, o := range objs {
		// machine-api-operator's controllers write these objects too: read again on a conflict.
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			if err := e.Client.Get(ctx, client.ObjectKeyFromObject(o), o); err != nil || !controllerutil.ContainsFinalizer(o, authority.SyncFinalizer) {
				return err
			}
			base := o.DeepCopyObject().(client.Object)
			controllerutil.RemoveFinalizer(o, authority.SyncFinalizer)
			return e.Client.Patch(ctx, o, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{}))
		})
		if client.IgnoreNotFound(err) != nil {
			t.Fatalf("taking the sync finalizer off %T %s: %v", o, o.GetName(), err)
		}
	}
}

// scaleMAPISet sets the Machine API MachineSet's replicas.
func scaleMAPISet(t *testing.T, e *testenv.Env, name string, n int32) {
	t.Helper()
	ms := &machinev1beta1.MachineSet{}
	if err := e.Client.Get(context.Background(), client.ObjectKey{Namespace: mapiNS, Name: name}, ms); err != nil {
		t.Fatal(err)
	}
	base := ms.DeepCopy()
	ms.Spec.Replicas = ptr.To(n)
	if err := e.Client.Patch(context.Background(), ms, client.MergeFrom(base)); err != nil {
		t.Fatal(err)
	}
}

// runningMAPI lists the set's Machine API Machines that are not being deleted, if all of them
// are Running with a Node and an instance that runs (nil otherwise), and describes them.
func runningMAPI(ctx context.Context, e *testenv.Env, set string) ([]machinev1beta1.Machine, string) {
	var list machinev1beta1.MachineList
	if err := e.Client.List(ctx, &list, client.InNamespace(mapiNS), client.MatchingLabels{"machine.openshift.io/cluster-api-machineset": set}); err != nil {
		return nil, err.Error()
	}
	var out []machinev1beta1.Machine
	var desc []string
	ok := true
	for _, m := range list.Items {
		if !m.DeletionTimestamp.IsZero() {
			desc = append(desc, m.Name+" deleting")
			ok = false
			continue
		}
		pid := ptr.Deref(m.Spec.ProviderID, "")
		desc = append(desc, fmt.Sprintf("%s %s %s node %v", m.Name, ptr.Deref(m.Status.Phase, ""), pid, m.Status.NodeRef != nil))
		inst, err := e.Cloud.GetInstance(ctx, path.Base(pid))
		if ptr.Deref(m.Status.Phase, "") != machinev1beta1.PhaseRunning || m.Status.NodeRef == nil || err != nil || inst.State != api.StateRunning {
			ok = false
		}
		out = append(out, m)
	}
	if !ok {
		return nil, strings.Join(desc, "; ")
	}
	return out, strings.Join(desc, "; ")
}
