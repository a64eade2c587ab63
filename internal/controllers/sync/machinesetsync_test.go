package sync_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/machina-dev/machina/internal/authority"
	"github.com/machina-dev/machina/internal/mapicond"
	"github.com/machina-dev/machina/internal/testenv"
)

func getMS(ctx context.Context, e *testenv.Env, name string) (*machinev1beta1.MachineSet, *clusterv1.MachineSet, error) {
	m, c := &machinev1beta1.MachineSet{}, &clusterv1.MachineSet{}
	if err := e.Client.Get(ctx, client.ObjectKey{Namespace: mapiNS, Name: name}, m); err != nil {
		return nil, nil, err
	}
	if err := e.Client.Get(ctx, client.ObjectKey{Namespace: capiNS, Name: name}, c); err != nil {
		return m, nil, err
	}
	return m, c, nil
}

func testMachineSetMirror(t *testing.T, p platform) {
	e := env.For(t)
	ctx := context.Background()
	workers := p.name("workers")
	if err := e.Client.Create(ctx, p.machineSet(workers, 2)); err != nil {
		t.Fatal(err)
	}
	var capi *clusterv1.MachineSet
	e.Eventually(90*time.Second, "paused mirror with two mirrored Running Machines", func(ctx context.Context) (bool, string, error) {
		m, c, err := getMS(ctx, e, workers)
		if err != nil {
			return false, err.Error(), nil
		}
		capi = c
		_, paused := c.Annotations[clusterv1.PausedAnnotation]
		return paused && mapicond.IsTrue(m.Status.Conditions, authority.SynchronizedCondition) &&
				m.Status.SynchronizedGeneration == m.Generation && ptr.Deref(c.Status.ReadyReplicas, 0) == 2,
			fmt.Sprintf("paused %v mapi status %+v capi status %+v", paused, m.Status, c.Status), nil
	})
	oldTemplate := capi.Spec.Template.Spec.InfrastructureRef.Name
	if kind := capi.Spec.Template.Spec.InfrastructureRef.Kind; kind != p.provider.InfraMachineTemplate.Kind {
		t.Errorf("template kind %q, want %q", kind, p.provider.InfraMachineTemplate.Kind)
	}
	tmpl, err := p.infraTemplate(ctx, e, oldTemplate)
	if err != nil {
		t.Fatal(err)
	}
	if it := instanceTypeOf(tmpl, true); it != p.types[1] {
		t.Errorf("template instance type %q, want %q", it, p.types[1])
	}
	if _, paused := tmpl.GetAnnotations()[clusterv1.PausedAnnotation]; !paused || tmpl.GetAnnotations()[authority.MirrorOfAnnotation] != "MachineSet/"+workers {
		t.Errorf("template mirror must be paused and marked %s=MachineSet/%s: %v", authority.MirrorOfAnnotation, workers, tmpl.GetAnnotations())
	}
	// The Machines' Cluster API copies belong to the Cluster API MachineSet.
	var machines clusterv1.MachineList
	if err := e.Client.List(ctx, &machines, client.InNamespace(capiNS), client.MatchingLabels{"machine.openshift.io/cluster-api-machineset": workers}); err != nil {
		t.Fatal(err)
	}
	if len(machines.Items) != 2 {
		t.Fatalf("%d Cluster API Machines for the MachineSet", len(machines.Items))
	}
	for _, m := range machines.Items {
		if ref := metav1.GetControllerOf(&m); ref == nil || ref.UID != capi.UID {
			t.Errorf("Machine %s not owned by the Cluster API MachineSet: %v", m.Name, m.OwnerReferences)
		}
	}

	// A changed providerSpec yields a new template; the unused old one goes.
	m, _, _ := getMS(ctx, e, workers)
	base := m.DeepCopy()
	m.Spec.Template.Spec.ProviderSpec.Value = withSpecInstanceType(m.Spec.Template.Spec.ProviderSpec.Value, p.types[2])
	if err := e.Client.Patch(ctx, m, client.MergeFrom(base)); err != nil {
		t.Fatal(err)
	}
	e.Eventually(60*time.Second, "new template in use, old one deleted", func(ctx context.Context) (bool, string, error) {
		_, c, err := getMS(ctx, e, workers)
		if err != nil {
			return false, err.Error(), nil
		}
		newName := c.Spec.Template.Spec.InfrastructureRef.Name
		_, errOld := p.infraTemplate(ctx, e, oldTemplate)
		nt, errNew := p.infraTemplate(ctx, e, newName)
		return newName != oldTemplate && apierrors.IsNotFound(errOld) && errNew == nil && instanceTypeOf(nt, true) == p.types[2],
			fmt.Sprintf("template %s (old %s: %v)", newName, oldTemplate, errOld), nil
	})

	// Deleting the authoritative Machine API MachineSet removes everything.
	m, _, _ = getMS(ctx, e, workers)
	if err := e.Client.Delete(ctx, m, client.PropagationPolicy(metav1.DeletePropagationBackground)); err != nil {
		t.Fatal(err)
	}
	e.Eventually(120*time.Second, "MachineSets and Machines gone on both sides", func(ctx context.Context) (bool, string, error) {
		_, _, err := getMS(ctx, e, workers)
		var cm clusterv1.MachineList
		_ = e.Client.List(ctx, &cm, client.InNamespace(capiNS), client.MatchingLabels{"machine.openshift.io/cluster-api-machineset": workers})
		var mm machinev1beta1.MachineList
		_ = e.Client.List(ctx, &mm, client.InNamespace(mapiNS), client.MatchingLabels{"machine.openshift.io/cluster-api-machineset": workers})
		return apierrors.IsNotFound(err) && len(cm.Items) == 0 && len(mm.Items) == 0,
			fmt.Sprintf("%v, %d capi machines, %d mapi machines", err, len(cm.Items), len(mm.Items)), nil
	})
}

func testNonAuthoritativeMachineSetDeleted(t *testing.T, p platform) {
	e := env.For(t)
	ctx := context.Background()
	ms := p.machineSet(p.name("capi-owned"), 0)
	ms.Spec.AuthoritativeAPI = machinev1beta1.MachineAuthorityClusterAPI
	if err := e.Client.Create(ctx, ms); err != nil {
		t.Fatal(err)
	}
	e.Eventually(60*time.Second, "unpaused Cluster API copy", func(ctx context.Context) (bool, string, error) {
		_, c, err := getMS(ctx, e, p.name("capi-owned"))
		if err != nil {
			return false, err.Error(), nil
		}
		_, paused := c.Annotations[clusterv1.PausedAnnotation]
		return !paused, fmt.Sprint(c.Annotations), nil
	})
	m, _, _ := getMS(ctx, e, p.name("capi-owned"))
	if err := e.Client.Delete(ctx, m); err != nil {
		t.Fatal(err)
	}
	e.Eventually(60*time.Second, "Machine API copy gone", func(ctx context.Context) (bool, string, error) {
		err := e.Client.Get(ctx, client.ObjectKey{Namespace: mapiNS, Name: p.name("capi-owned")}, &machinev1beta1.MachineSet{})
		return apierrors.IsNotFound(err), fmt.Sprint(err), nil
	})
	time.Sleep(2 * time.Second)
	c := &clusterv1.MachineSet{}
	if err := e.Client.Get(ctx, client.ObjectKey{Namespace: capiNS, Name: p.name("capi-owned")}, c); err != nil || !c.DeletionTimestamp.IsZero() {
		t.Fatalf("the Cluster API MachineSet must keep running on its own: %v", err)
	}
	for _, f := range c.Finalizers {
		if f == authority.SyncFinalizer {
			t.Errorf("sync finalizer left behind: %v", c.Finalizers)
		}
	}
}
