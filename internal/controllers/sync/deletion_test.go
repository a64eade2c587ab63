package sync_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/machina-dev/machina/internal/authority"
	"github.com/machina-dev/machina/internal/cloud/api"
	"github.com/machina-dev/machina/internal/convert"
	"github.com/machina-dev/machina/internal/mapicond"
	"github.com/machina-dev/machina/internal/testenv"
)

// runningMirrored creates a Machine API-authoritative Machine and waits until it runs on an
// instance and its paused Cluster API mirror exists; it returns the instance ID.
func runningMirrored(t *testing.T, e *testenv.Env, p platform, name string) (*machinev1beta1.Machine, string) {
	t.Helper()
	ctx := context.Background()
	if err := e.Client.Create(ctx, p.mapiMachine(name, "")); err != nil {
		t.Fatal(err)
	}
	var m *machinev1beta1.Machine
	e.Eventually(90*time.Second, name+" Running with a mirror", func(ctx context.Context) (bool, string, error) {
		var err error
		if m, err = getMAPI(ctx, e, name); err != nil {
			return false, err.Error(), nil
		}
		_, errC := getCAPI(ctx, e, name)
		return m.Status.Phase != nil && *m.Status.Phase == machinev1beta1.PhaseRunning && errC == nil,
			fmt.Sprintf("phase %v mirror %v", m.Status.Phase, errC), nil
	})
	list := e.InstancesTagged(p.uidTag, string(m.UID))
	if len(list) != 1 {
		t.Fatalf("%d instances for %s", len(list), name)
	}
	return m, list[0].InstanceID
}

// addCAPIFinalizer puts the Cluster API machine controller's finalizer on the mirror, as the
// controller would have while the copy was authoritative (a migration interrupted before it
// moved the finalizers).
func addCAPIFinalizer(t *testing.T, e *testenv.Env, name string) {
	t.Helper()
	ctx := context.Background()
	c, err := getCAPI(ctx, e, name)
	if err != nil {
		t.Fatal(err)
	}
	base := c.DeepCopy()
	controllerutil.AddFinalizer(c, clusterv1.MachineFinalizer)
	if err := e.Client.Patch(ctx, c, client.MergeFrom(base)); err != nil {
		t.Fatal(err)
	}
}

// stripFinalizers removes finalizers from o by hand, the way an administrator unsticks an
// object, leaving the rest as it is.
func stripFinalizers(t *testing.T, e *testenv.Env, o client.Object, which ...string) {
	t.Helper()
	ctx := context.Background()
	if err := e.Client.Get(ctx, client.ObjectKeyFromObject(o), o); err != nil {
		t.Fatal(err)
	}
	base := o.DeepCopyObject().(client.Object)
	for _, f := range which {
		controllerutil.RemoveFinalizer(o, f)
	}
	if err := client.IgnoreNotFound(e.Client.Patch(ctx, o, client.MergeFrom(base))); err != nil {
		t.Fatal(err)
	}
}

// waitGoneOnceTerminated waits until both copies are gone and the instance is terminated,
// and checks that exactly one instance was terminated and none launched since before.
func waitGoneOnceTerminated(t *testing.T, e *testenv.Env, name, instance string, before *api.Stats) {
	t.Helper()
	e.Eventually(90*time.Second, "both copies gone, instance terminated", func(ctx context.Context) (bool, string, error) {
		_, errM := getMAPI(ctx, e, name)
		_, errC := getCAPI(ctx, e, name)
		inst, err := e.Cloud.GetInstance(ctx, instance)
		if err != nil {
			return false, err.Error(), nil
		}
		return apierrors.IsNotFound(errM) && apierrors.IsNotFound(errC) && inst.State == api.StateTerminated,
			fmt.Sprintf("mapi: %v capi: %v instance %s", errM, errC, inst.State), nil
	})
	after, err := e.Cloud.Stats(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if n := after.InstancesTerminated - before.InstancesTerminated; n != 1 {
		t.Errorf("%d instances terminated, want exactly 1", n)
	}
	if n := after.InstancesCreated - before.InstancesCreated; n != 0 {
		t.Errorf("%d instances launched during the deletion", n)
	}
	// Nothing comes back.
	time.Sleep(2 * time.Second)
	if _, err := getCAPI(context.Background(), e, name); !apierrors.IsNotFound(err) {
		t.Errorf("the Cluster API copy came back: %v", err)
	}
}

// The sync finalizer lets deletions be synchronised and never leaves an object stuck,
// including when one side is already gone and when both sides' controllers added finalizers.
func testDeletionFinalizers(t *testing.T, p platform) {
	ctx := context.Background()
	t.Run("BothControllersFinalizers_BothCopiesGo_InstanceDeletedOnce", func(t *testing.T) {
		e := env.For(t)
		name := p.name("fin-both")
		m, instance := runningMirrored(t, e, p, name)
		addCAPIFinalizer(t, e, name)
		c, _ := getCAPI(ctx, e, name)
		for _, f := range []string{machinev1beta1.MachineFinalizer, authority.SyncFinalizer} {
			if !controllerutil.ContainsFinalizer(m, f) {
				t.Fatalf("Machine API copy lacks %s: %v", f, m.Finalizers)
			}
		}
		for _, f := range []string{clusterv1.MachineFinalizer, authority.SyncFinalizer} {
			if !controllerutil.ContainsFinalizer(c, f) {
				t.Fatalf("Cluster API copy lacks %s: %v", f, c.Finalizers)
			}
		}
		before, err := e.Cloud.Stats(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := e.Client.Delete(ctx, m); err != nil {
			t.Fatal(err)
		}
		waitGoneOnceTerminated(t, e, name, instance, before)
	})

	t.Run("MirrorAlreadyGone_MachineAPICopyDeleted", func(t *testing.T) {
		e := env.For(t)
		name := p.name("fin-no-capi")
		m, instance := runningMirrored(t, e, p, name)
		before, err := e.Cloud.Stats(ctx)
		if err != nil {
			t.Fatal(err)
		}
		// With the controllers down, the mirror is removed for good by hand, then the Machine
		// API copy is deleted.
		e.StopManager()
		c, _ := getCAPI(ctx, e, name)
		if err := e.Client.Delete(ctx, c); err != nil {
			t.Fatal(err)
		}
		stripFinalizers(t, e, c, authority.SyncFinalizer, clusterv1.MachineFinalizer)
		if err := e.Client.Delete(ctx, m); err != nil {
			t.Fatal(err)
		}
		e.StartManager()
		waitGoneOnceTerminated(t, e, name, instance, before)
	})

	// A Machine API MachineSet gives its Machines the Machine controller's finalizer at birth;
	// one deleted before the sync decided its authority must not wait for ever on a Machine
	// controller that waits for the decision.
	t.Run("DeletedBeforeAuthorityDecided_NotStuck", func(t *testing.T) {
		e := env.For(t)
		name := p.name("fin-undecided")
		before, err := e.Cloud.Stats(ctx)
		if err != nil {
			t.Fatal(err)
		}
		e.StopManager()
		m := bornWithFinalizer(t, e, p, name)
		if err := e.Client.Delete(ctx, m); err != nil {
			t.Fatal(err)
		}
		e.StartManager()
		waitMAPIGone(t, e, name)
		after, err := e.Cloud.Stats(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if n := after.InstancesCreated - before.InstancesCreated; n != 0 {
			t.Errorf("%d instances launched for a Machine deleted before it was reconciled", n)
		}
	})

	// The same beside an active Cluster API Machine of the name that the sync did not make:
	// the authority follows the spec (MachineAPI), the Machine API controller lets its Machine
	// go, and the Cluster API Machine, which is no mirror, is neither deleted nor written.
	t.Run("DeletedBeforeAuthorityDecided_UnrelatedClusterAPIMachineKeepsRunning", func(t *testing.T) {
		e := env.For(t)
		name := p.name("fin-undecided-capi")
		e.StopManager()
		p.handMadeCAPIMachine(t, e, name, false, nil)
		before, err := getCAPI(ctx, e, name)
		if err != nil {
			t.Fatal(err)
		}
		m := bornWithFinalizer(t, e, p, name)
		if err := e.Client.Delete(ctx, m); err != nil {
			t.Fatal(err)
		}
		e.StartManager()
		waitMAPIGone(t, e, name)
		c, err := getCAPI(ctx, e, name)
		if err != nil || !c.DeletionTimestamp.IsZero() {
			t.Fatalf("the active Cluster API Machine must keep running: %v", err)
		}
		if c.ResourceVersion != before.ResourceVersion {
			t.Errorf("the active Cluster API Machine was written: annotations %v finalizers %v", c.Annotations, c.Finalizers)
		}
	})

	t.Run("AuthoritativeCopyAlreadyGone_MirrorDeletedNotStuck", func(t *testing.T) {
		e := env.For(t)
		name := p.name("fin-no-mapi")
		m, instance := runningMirrored(t, e, p, name)
		addCAPIFinalizer(t, e, name)
		before, err := e.Cloud.Stats(ctx)
		if err != nil {
			t.Fatal(err)
		}
		// With the controllers down, an administrator deletes the Machine API copy and takes
		// the sync finalizer off it; the Machine API controller still deletes the instance.
		e.StopManager()
		if err := e.Client.Delete(ctx, m); err != nil {
			t.Fatal(err)
		}
		stripFinalizers(t, e, m, authority.SyncFinalizer)
		e.StartManager()
		waitGoneOnceTerminated(t, e, name, instance, before)
	})
}

// bornWithFinalizer creates a Machine API Machine the way its MachineSet does: with the Machine
// controller's finalizer.
func bornWithFinalizer(t *testing.T, e *testenv.Env, p platform, name string) *machinev1beta1.Machine {
	t.Helper()
	m := p.mapiMachine(name, "")
	m.Finalizers = []string{machinev1beta1.MachineFinalizer}
	if err := e.Client.Create(context.Background(), m); err != nil {
		t.Fatal(err)
	}
	return m
}

func waitMAPIGone(t *testing.T, e *testenv.Env, name string) {
	t.Helper()
	e.Eventually(60*time.Second, name+" gone", func(ctx context.Context) (bool, string, error) {
		m, err := getMAPI(ctx, e, name)
		if apierrors.IsNotFound(err) {
			return true, "", nil
		}
		if err != nil {
			return false, err.Error(), nil
		}
		return false, fmt.Sprintf("authority %q finalizers %v", m.Status.AuthoritativeAPI, m.Finalizers), nil
	})
}

// testLeftoverInfraNotAdopted: an InfraMachine left by a deleted Cluster API Machine of the
// same name (the garbage collector has not removed it yet) is not adopted by the mirror of a
// new Machine API Machine of that name: adopted, the collector's deletion would take the new
// Machine's instance or stop a handover. The sync reports it and waits; once the leftover is
// gone, the mirror gets its own InfraMachine.
func testLeftoverInfraNotAdopted(t *testing.T, p platform) {
	e := env.For(t)
	ctx := context.Background()
	name := p.name("leftover-infra")
	out, _, errs := convert.ToClusterAPIMachine(p.machine(name, "", p.zones[2], p.types[2]), p.convertContext(t, e))
	if len(errs) > 0 {
		t.Fatal(errs.ToAggregate())
	}
	leftover := out.InfraMachine
	leftover.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: clusterv1.GroupVersion.String(), Kind: "Machine", Name: name,
		UID: types.UID("00000000-0000-0000-0000-00000000dead"), Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}})
	// Held, so the lab's garbage collector cannot remove it before the sync has seen it.
	controllerutil.AddFinalizer(leftover, "machina.dev/test-hold")
	if err := e.Client.Create(ctx, leftover); err != nil {
		t.Fatal(err)
	}
	if err := e.Client.Create(ctx, p.mapiMachine(name, "")); err != nil {
		t.Fatal(err)
	}
	e.Eventually(60*time.Second, "the leftover reported", func(ctx context.Context) (bool, string, error) {
		m, err := getMAPI(ctx, e, name)
		if err != nil {
			return false, err.Error(), nil
		}
		c := mapicond.Get(m.Status.Conditions, authority.SynchronizedCondition)
		return c != nil && c.Reason == authority.MirrorWriteFailedReason && strings.Contains(c.Message, "00000000-0000-0000-0000-00000000dead"), synchronized(m), nil
	})
	if err := e.Client.Get(ctx, client.ObjectKeyFromObject(leftover), leftover); err != nil {
		t.Fatal(err)
	}
	if owner := metav1.GetControllerOf(leftover); owner == nil || owner.UID != "00000000-0000-0000-0000-00000000dead" || len(leftover.GetOwnerReferences()) != 1 {
		t.Fatalf("the leftover was adopted: %v", leftover.GetOwnerReferences())
	}
	// What the garbage collector does (it may have marked it deleted already).
	if err := client.IgnoreNotFound(e.Client.Delete(ctx, leftover)); err != nil {
		t.Fatal(err)
	}
	stripFinalizers(t, e, leftover, "machina.dev/test-hold")
	waitSynchronized(t, e, name)
	capi, err := getCAPI(ctx, e, name)
	if err != nil {
		t.Fatal(err)
	}
	e.Eventually(30*time.Second, "the mirror's own InfraMachine", func(ctx context.Context) (bool, string, error) {
		infra, err := p.infraMachine(ctx, e, name)
		if err != nil {
			return false, err.Error(), nil
		}
		owner := metav1.GetControllerOf(infra)
		return owner != nil && owner.UID == capi.UID && infra.GetUID() != leftover.GetUID(), fmt.Sprintf("owners %v", infra.GetOwnerReferences()), nil
	})
}
