package sync_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/machina-dev/machina/internal/authority"
	"github.com/machina-dev/machina/internal/controllers/sync/internal/synccommon"
	"github.com/machina-dev/machina/internal/gate"
	"github.com/machina-dev/machina/internal/testenv"
)

// testPausedAtPairing: a Cluster API copy that carries cluster.x-k8s.io/paused when the sync
// first pairs it with a Machine API copy naming the Cluster API authoritative (created paused
// by hand here; a mirror a former sync let go looks the same) is unpaused with its
// InfraMachine or InfraMachineTemplate, the Machine and InfraMachine each taking their
// controller's finalizer in that write. A pause somebody puts on the paired copy later stays.
func testPausedAtPairing(t *testing.T, p platform) {
	ctx := context.Background()
	t.Run("Machine", func(t *testing.T) {
		e := env.For(t)
		name := p.name("paused-pair")
		p.handMadeCAPIMachine(t, e, name, true, nil)
		if err := e.Client.Create(ctx, p.mapiMachine(name, machinev1beta1.MachineAuthorityClusterAPI)); err != nil {
			t.Fatal(err)
		}
		e.Eventually(60*time.Second, "Cluster API Machine and InfraMachine unpaused", func(ctx context.Context) (bool, string, error) {
			c, err := getCAPI(ctx, e, name)
			if err != nil {
				return false, err.Error(), nil
			}
			infra, err := p.infraMachine(ctx, e, name)
			if err != nil {
				return false, err.Error(), nil
			}
			ok := !gate.HasPausedAnnotation(c) && !gate.HasPausedAnnotation(infra) &&
				controllerutil.ContainsFinalizer(c, authority.SyncFinalizer) && controllerutil.ContainsFinalizer(c, clusterv1.MachineFinalizer) &&
				controllerutil.ContainsFinalizer(infra, p.provider.InfraMachineFinalizers[0])
			return ok, fmt.Sprintf("machine %v %v, infra %v %v", c.Annotations, c.Finalizers, infra.GetAnnotations(), infra.GetFinalizers()), nil
		})
		waitEvent(t, e, "Machine", name, synccommon.UnpausedAtPairingReason)
		waitSynchronized(t, e, name)

		c, err := getCAPI(ctx, e, name)
		if err != nil {
			t.Fatal(err)
		}
		pauseAndMark(t, e, c, &machinev1beta1.Machine{})
		if c, err = getCAPI(ctx, e, name); err != nil || !gate.HasPausedAnnotation(c) {
			t.Errorf("the deliberate pause of the paired Cluster API Machine was undone (err %v)", err)
		}
	})
	t.Run("MachineSet", func(t *testing.T) {
		e := env.For(t)
		name := p.name("paused-pair-set")
		cms := p.handMadeCAPIMachineSet(t, e, name, true)
		ms := p.machineSet(name, 0)
		ms.Spec.AuthoritativeAPI = machinev1beta1.MachineAuthorityClusterAPI
		if err := e.Client.Create(ctx, ms); err != nil {
			t.Fatal(err)
		}
		e.Eventually(60*time.Second, "Cluster API MachineSet and InfraMachineTemplate unpaused", func(ctx context.Context) (bool, string, error) {
			_, c, err := getMS(ctx, e, name)
			if err != nil {
				return false, err.Error(), nil
			}
			tmpl, err := p.infraTemplate(ctx, e, cms.Spec.Template.Spec.InfrastructureRef.Name)
			if err != nil {
				return false, err.Error(), nil
			}
			ok := !gate.HasPausedAnnotation(c) && !gate.HasPausedAnnotation(tmpl) && controllerutil.ContainsFinalizer(c, authority.SyncFinalizer)
			return ok, fmt.Sprintf("set %v %v, template %v", c.Annotations, c.Finalizers, tmpl.GetAnnotations()), nil
		})
		waitEvent(t, e, "MachineSet", name, synccommon.UnpausedAtPairingReason)

		_, c, err := getMS(ctx, e, name)
		if err != nil {
			t.Fatal(err)
		}
		pauseAndMark(t, e, c, &machinev1beta1.MachineSet{})
		if _, c, err = getMS(ctx, e, name); err != nil || !gate.HasPausedAnnotation(c) {
			t.Errorf("the deliberate pause of the paired Cluster API MachineSet was undone (err %v)", err)
		}
	})
}

// pauseAndMark pauses the paired Cluster API copy capi and, in the same write, gives it a
// label; once the label reaches the Machine API copy (an empty object of its kind) the sync
// has looked at the paused copy.
func pauseAndMark(t *testing.T, e *testenv.Env, capi client.Object, mapi client.Object) {
	t.Helper()
	const label = "test.machina.dev/paused-by-hand"
	base := capi.DeepCopyObject().(client.Object)
	setAnnotation(capi, clusterv1.PausedAnnotation, "")
	l := capi.GetLabels()
	if l == nil {
		l = map[string]string{}
	}
	l[label] = "yes"
	capi.SetLabels(l)
	if err := e.Client.Patch(context.Background(), capi, client.MergeFrom(base)); err != nil {
		t.Fatal(err)
	}
	e.Eventually(30*time.Second, "the label on the Machine API copy", func(ctx context.Context) (bool, string, error) {
		if err := e.Client.Get(ctx, client.ObjectKey{Namespace: mapiNS, Name: capi.GetName()}, mapi); err != nil {
			return false, err.Error(), nil
		}
		return mapi.GetLabels()[label] == "yes", fmt.Sprint(mapi.GetLabels()), nil
	})
}
