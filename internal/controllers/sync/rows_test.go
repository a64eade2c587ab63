package sync_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/machina-dev/machina/internal/authority"
	"github.com/machina-dev/machina/internal/mapicond"
	"github.com/machina-dev/machina/internal/testenv"
)

// Row: MAPI Machine, ClusterAPI, created, mirror exists → the Cluster API spec is synced
// onto it (its own providerSpec is replaced, nothing is written to the Cluster API copy).
func testClusterAPIWithMirror(t *testing.T, p platform) {
	e := env.For(t)
	ctx := context.Background()
	name := p.name("adopted")
	p.handMadeCAPIMachine(t, e, name, false, nil)
	before, err := getCAPI(ctx, e, name)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Client.Create(ctx, p.mapiMachine(name, machinev1beta1.MachineAuthorityClusterAPI)); err != nil {
		t.Fatal(err)
	}
	e.Eventually(60*time.Second, "Machine API copy takes the Cluster API spec", func(ctx context.Context) (bool, string, error) {
		m, err := getMAPI(ctx, e, name)
		if err != nil {
			return false, err.Error(), nil
		}
		itype, zone := specFields(m.Spec.ProviderSpec.Value)
		return m.Status.AuthoritativeAPI == machinev1beta1.MachineAuthorityClusterAPI && itype == p.types[2] && zone == p.zones[2] &&
				mapicond.IsTrue(m.Status.Conditions, authority.SynchronizedCondition),
			fmt.Sprintf("authority %q instance type %q zone %q %s", m.Status.AuthoritativeAPI, itype, zone, synchronized(m)), nil
	})
	after, err := getCAPI(ctx, e, name)
	if err != nil {
		t.Fatal(err)
	}
	if after.Generation != before.Generation || after.Spec.FailureDomain != p.zones[2] {
		t.Errorf("the authoritative Cluster API spec changed: generation %d → %d, failureDomain %q", before.Generation, after.Generation, after.Spec.FailureDomain)
	}
	if _, paused := after.Annotations[clusterv1.PausedAnnotation]; paused {
		t.Error("the authoritative Cluster API Machine was paused")
	}

	// Both copies of a pair carry the sync finalizer, one born in the Cluster API too, so
	// deleting the authoritative Cluster API Machine deletes its Machine API copy instead of
	// the sync creating the Cluster API Machine again from it.
	e.Eventually(30*time.Second, "sync finalizer on the Cluster API Machine", func(ctx context.Context) (bool, string, error) {
		c, err := getCAPI(ctx, e, name)
		if err != nil {
			return false, err.Error(), nil
		}
		return controllerutil.ContainsFinalizer(c, authority.SyncFinalizer), fmt.Sprint(c.Finalizers), nil
	})
	if err := e.Client.Delete(ctx, after); err != nil {
		t.Fatal(err)
	}
	waitPairGone(t, e, name, &machinev1beta1.Machine{}, &clusterv1.Machine{})
}

// waitPairGone waits until neither copy of name exists (mapi and capi are empty objects of the
// pair's kinds).
func waitPairGone(t *testing.T, e *testenv.Env, name string, mapi, capi client.Object) {
	t.Helper()
	e.Eventually(60*time.Second, "both copies gone", func(ctx context.Context) (bool, string, error) {
		errM := e.Client.Get(ctx, client.ObjectKey{Namespace: mapiNS, Name: name}, mapi)
		errC := e.Client.Get(ctx, client.ObjectKey{Namespace: capiNS, Name: name}, capi)
		return apierrors.IsNotFound(errM) && apierrors.IsNotFound(errC), fmt.Sprintf("mapi: %v %v deleting %v; capi: %v %v deleting %v",
			errM, mapi.GetFinalizers(), mapi.GetDeletionTimestamp() != nil, errC, capi.GetFinalizers(), capi.GetDeletionTimestamp() != nil), nil
	})
}

// Row: a Machine API MachineSet created ClusterAPI-authoritative for an existing Cluster API
// MachineSet takes its spec, and the Cluster API MachineSet gets the sync finalizer, so its
// deletion reaches the Machine API copy instead of the sync creating it again.
func testClusterAPIMachineSetFirst(t *testing.T, p platform) {
	e := env.For(t)
	ctx := context.Background()
	name := p.name("capi-first")
	cms := p.handMadeCAPIMachineSet(t, e, name, false)
	ms := p.machineSet(name, 0)
	ms.Spec.AuthoritativeAPI = machinev1beta1.MachineAuthorityClusterAPI
	if err := e.Client.Create(ctx, ms); err != nil {
		t.Fatal(err)
	}
	e.Eventually(60*time.Second, "Machine API copy synchronised, sync finalizer on both", func(ctx context.Context) (bool, string, error) {
		m, c, err := getMS(ctx, e, name)
		if err != nil {
			return false, err.Error(), nil
		}
		itype, _ := specFields(m.Spec.Template.Spec.ProviderSpec.Value)
		return itype == p.types[2] && mapicond.IsTrue(m.Status.Conditions, authority.SynchronizedCondition) &&
				controllerutil.ContainsFinalizer(m, authority.SyncFinalizer) && controllerutil.ContainsFinalizer(c, authority.SyncFinalizer),
			fmt.Sprintf("instance type %q, %s, finalizers %v / %v", itype, mapiCond(m.Status.Conditions), m.Finalizers, c.Finalizers), nil
	})
	if err := e.Client.Delete(ctx, cms); err != nil {
		t.Fatal(err)
	}
	waitPairGone(t, e, name, &machinev1beta1.MachineSet{}, &clusterv1.MachineSet{})
}

func mapiCond(conds []machinev1beta1.Condition) string {
	c := mapicond.Get(conds, authority.SynchronizedCondition)
	if c == nil {
		return "no Synchronized condition"
	}
	return fmt.Sprintf("Synchronized=%s %s", c.Status, c.Message)
}

// Row: a Cluster API Machine created with no Machine API mirror lives on its own, unless its
// MachineSet has a Machine API mirror: then a ClusterAPI-authoritative Machine API Machine is
// created for it.
func testCAPIMachineAlone(t *testing.T, p platform) {
	e := env.For(t)
	ctx := context.Background()
	owned, loner, x1 := p.name("capi-owned"), p.name("loner"), p.name("capi-owned-x1")

	// A MachineSet that the Cluster API owns from birth, so its mirror exists and is unpaused.
	ms := p.machineSet(owned, 0)
	ms.Spec.AuthoritativeAPI = machinev1beta1.MachineAuthorityClusterAPI
	if err := e.Client.Create(ctx, ms); err != nil {
		t.Fatal(err)
	}
	var capiMS *clusterv1.MachineSet
	e.Eventually(60*time.Second, "Cluster API MachineSet mirror", func(ctx context.Context) (bool, string, error) {
		_, c, err := getMS(ctx, e, owned)
		if err != nil {
			return false, err.Error(), nil
		}
		capiMS = c
		return true, "", nil
	})

	p.handMadeCAPIMachine(t, e, loner, false, nil)
	p.handMadeCAPIMachine(t, e, x1, false, capiMS)

	e.Eventually(60*time.Second, "a Machine API copy for the MachineSet's Machine", func(ctx context.Context) (bool, string, error) {
		m, err := getMAPI(ctx, e, x1)
		if err != nil {
			return false, err.Error(), nil
		}
		return m.Spec.AuthoritativeAPI == machinev1beta1.MachineAuthorityClusterAPI &&
				m.Status.AuthoritativeAPI == machinev1beta1.MachineAuthorityClusterAPI,
			fmt.Sprintf("spec %q status %q", m.Spec.AuthoritativeAPI, m.Status.AuthoritativeAPI), nil
	})
	// The copy above was made after "loner" was created, by the same controller; "loner" has
	// had its turn and must still be alone.
	if _, err := getMAPI(ctx, e, loner); !apierrors.IsNotFound(err) {
		t.Fatalf("a standalone Cluster API Machine got a Machine API copy (err %v)", err)
	}
	alone, err := getCAPI(ctx, e, loner)
	if err != nil {
		t.Fatal(err)
	}
	if pausedAnnotated(alone) || controllerutil.ContainsFinalizer(alone, authority.SyncFinalizer) {
		t.Errorf("the standalone Cluster API Machine was touched: annotations %v finalizers %v", alone.Annotations, alone.Finalizers)
	}
}

// Row: a Machine API MachineSet whose template says ClusterAPI creates Machines that are
// Cluster API-authoritative from birth, with unpaused Cluster API mirrors.
func testTemplateClusterAPI(t *testing.T, p platform) {
	e := env.For(t)
	ctx := context.Background()
	name := p.name("born-capi")
	ms := p.machineSet(name, 1)
	ms.Spec.Template.Spec.AuthoritativeAPI = machinev1beta1.MachineAuthorityClusterAPI
	if err := e.Client.Create(ctx, ms); err != nil {
		t.Fatal(err)
	}
	e.Eventually(90*time.Second, "a ClusterAPI-authoritative Machine with an unpaused mirror", func(ctx context.Context) (bool, string, error) {
		var list machinev1beta1.MachineList
		if err := e.Client.List(ctx, &list, client.InNamespace(mapiNS), client.MatchingLabels{"machine.openshift.io/cluster-api-machineset": name}); err != nil {
			return false, "", err
		}
		if len(list.Items) != 1 {
			return false, fmt.Sprintf("%d Machines", len(list.Items)), nil
		}
		m := &list.Items[0]
		if m.Status.AuthoritativeAPI != machinev1beta1.MachineAuthorityClusterAPI {
			return false, fmt.Sprintf("%s authority %q", m.Name, m.Status.AuthoritativeAPI), nil
		}
		c, err := getCAPI(ctx, e, m.Name)
		if err != nil {
			return false, err.Error(), nil
		}
		_, paused := c.Annotations[clusterv1.PausedAnnotation]
		return !paused, fmt.Sprintf("mirror paused %v", paused), nil
	})
	// The Machine API MachineSet itself stays with the Machine API (only its Machines are born
	// Cluster API-owned), so its own mirror is paused.
	e.Eventually(30*time.Second, "the MachineSet mirror paused", func(ctx context.Context) (bool, string, error) {
		m, c, err := getMS(ctx, e, name)
		if err != nil {
			return false, err.Error(), nil
		}
		_, paused := c.Annotations[clusterv1.PausedAnnotation]
		return paused && m.Status.AuthoritativeAPI == machinev1beta1.MachineAuthorityMachineAPI, fmt.Sprintf("paused %v authority %q", paused, m.Status.AuthoritativeAPI), nil
	})
}
