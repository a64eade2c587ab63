package sync_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	infrav1 "github.com/machina-dev/machina/api/infrastructure/v1alpha1"
	"github.com/machina-dev/machina/internal/controllers/sync/synccommon"
	"github.com/machina-dev/machina/internal/mapicond"
	"github.com/machina-dev/machina/internal/testenv"
)

// handMadeCAPIMachine creates a Cluster API Machine and its SimMachine (instance type
// s1.xlarge, zone sim-east-1c), optionally owned by a Cluster API MachineSet.
func handMadeCAPIMachine(t *testing.T, ctx context.Context, c client.Client, name string, owner *clusterv1.MachineSet) {
	t.Helper()
	sm := &infrav1.SimMachine{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: capiNS},
		Spec: infrav1.SimMachineSpec{InstanceSpec: infrav1.InstanceSpec{InstanceType: "s1.xlarge", Image: "sim-rhcos-9"}}}
	m := &clusterv1.Machine{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: capiNS,
		Labels: map[string]string{clusterv1.ClusterNameLabel: cluster}},
		Spec: clusterv1.MachineSpec{ClusterName: cluster, FailureDomain: "sim-east-1c",
			InfrastructureRef: clusterv1.ContractVersionedObjectReference{APIGroup: infrav1.GroupName, Kind: "SimMachine", Name: name},
			Bootstrap:         clusterv1.Bootstrap{DataSecretName: ptr.To("worker-user-data")}}}
	if owner != nil {
		m.OwnerReferences = []metav1.OwnerReference{*metav1.NewControllerRef(owner, clusterv1.GroupVersion.WithKind("MachineSet"))}
		for k, v := range owner.Spec.Template.Labels {
			m.Labels[k] = v
		}
	}
	for _, o := range []client.Object{sm, m} {
		if err := c.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
}

// Row: MAPI Machine, ClusterAPI, created, mirror exists → the Cluster API spec is synced
// onto it (its own providerSpec is replaced, nothing is written to the Cluster API copy).
func testClusterAPIWithMirror(t *testing.T) {
	e := env.For(t)
	ctx := context.Background()
	handMadeCAPIMachine(t, ctx, e.Client, "adopted", nil)
	before, err := getCAPI(ctx, e, "adopted")
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Client.Create(ctx, mapiMachine("adopted", machinev1beta1.MachineAuthorityClusterAPI)); err != nil {
		t.Fatal(err)
	}
	e.Eventually(60*time.Second, "Machine API copy takes the Cluster API spec", func(ctx context.Context) (bool, string, error) {
		m, err := getMAPI(ctx, e, "adopted")
		if err != nil {
			return false, err.Error(), nil
		}
		var ps infrav1.SimMachineProviderSpec
		_ = json.Unmarshal(m.Spec.ProviderSpec.Value.Raw, &ps)
		return m.Status.AuthoritativeAPI == machinev1beta1.MachineAuthorityClusterAPI && ps.InstanceType == "s1.xlarge" && ps.Zone == "sim-east-1c" &&
				mapicond.IsTrue(m.Status.Conditions, synccommon.SynchronizedCondition),
			fmt.Sprintf("authority %q providerSpec %+v %s", m.Status.AuthoritativeAPI, ps, synchronized(m)), nil
	})
	after, err := getCAPI(ctx, e, "adopted")
	if err != nil {
		t.Fatal(err)
	}
	if after.Generation != before.Generation || after.Spec.FailureDomain != "sim-east-1c" {
		t.Errorf("the authoritative Cluster API spec changed: generation %d → %d, failureDomain %q", before.Generation, after.Generation, after.Spec.FailureDomain)
	}
	if _, paused := after.Annotations[clusterv1.PausedAnnotation]; paused {
		t.Error("the authoritative Cluster API Machine was paused")
	}

	// Both copies of a pair carry the sync finalizer, one born in the Cluster API too, so
	// deleting the authoritative Cluster API Machine deletes its Machine API copy instead of
	// the sync creating the Cluster API Machine again from it.
	e.Eventually(30*time.Second, "sync finalizer on the Cluster API Machine", func(ctx context.Context) (bool, string, error) {
		c, err := getCAPI(ctx, e, "adopted")
		if err != nil {
			return false, err.Error(), nil
		}
		return controllerutil.ContainsFinalizer(c, synccommon.SyncFinalizer), fmt.Sprint(c.Finalizers), nil
	})
	if err := e.Client.Delete(ctx, after); err != nil {
		t.Fatal(err)
	}
	waitPairGone(t, e, "adopted", &machinev1beta1.Machine{}, &clusterv1.Machine{})
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
func testClusterAPIMachineSetFirst(t *testing.T) {
	e := env.For(t)
	ctx := context.Background()
	const name = "capi-first"
	tmpl := &infrav1.SimMachineTemplate{ObjectMeta: metav1.ObjectMeta{Name: name + "-tmpl", Namespace: capiNS},
		Spec: infrav1.SimMachineTemplateSpec{Template: infrav1.SimMachineTemplateResource{
			Spec: infrav1.SimMachineSpec{InstanceSpec: infrav1.InstanceSpec{InstanceType: "s1.xlarge", Image: "sim-rhcos-9"}}}}}
	// The selector the Machine API copy below has (mapiMachineSet): a selector is immutable on
	// both APIs, so a copy made for an existing MachineSet must select the same Machines.
	labels := map[string]string{"machine.openshift.io/cluster-api-cluster": cluster, "machine.openshift.io/cluster-api-machineset": name}
	cms := &clusterv1.MachineSet{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: capiNS,
		Labels: map[string]string{clusterv1.ClusterNameLabel: cluster}},
		Spec: clusterv1.MachineSetSpec{ClusterName: cluster, Replicas: ptr.To[int32](0),
			Selector: metav1.LabelSelector{MatchLabels: labels},
			Template: clusterv1.MachineTemplateSpec{ObjectMeta: clusterv1.ObjectMeta{Labels: labels},
				Spec: clusterv1.MachineSpec{ClusterName: cluster, FailureDomain: "sim-east-1c",
					Bootstrap: clusterv1.Bootstrap{DataSecretName: ptr.To("worker-user-data")},
					InfrastructureRef: clusterv1.ContractVersionedObjectReference{APIGroup: infrav1.GroupName,
						Kind: "SimMachineTemplate", Name: tmpl.Name}}}}}
	for _, o := range []client.Object{tmpl, cms} {
		if err := e.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	ms := mapiMachineSet(name, 0)
	ms.Spec.AuthoritativeAPI = machinev1beta1.MachineAuthorityClusterAPI
	if err := e.Client.Create(ctx, ms); err != nil {
		t.Fatal(err)
	}
	e.Eventually(60*time.Second, "Machine API copy synchronised, sync finalizer on both", func(ctx context.Context) (bool, string, error) {
		m, c, err := getMS(ctx, e, name)
		if err != nil {
			return false, err.Error(), nil
		}
		var ps infrav1.SimMachineProviderSpec
		_ = json.Unmarshal(m.Spec.Template.Spec.ProviderSpec.Value.Raw, &ps)
		return ps.InstanceType == "s1.xlarge" && mapicond.IsTrue(m.Status.Conditions, synccommon.SynchronizedCondition) &&
				controllerutil.ContainsFinalizer(m, synccommon.SyncFinalizer) && controllerutil.ContainsFinalizer(c, synccommon.SyncFinalizer),
			fmt.Sprintf("instance type %q, %s, finalizers %v / %v", ps.InstanceType, mapiCond(m.Status.Conditions), m.Finalizers, c.Finalizers), nil
	})
	if err := e.Client.Delete(ctx, cms); err != nil {
		t.Fatal(err)
	}
	waitPairGone(t, e, name, &machinev1beta1.MachineSet{}, &clusterv1.MachineSet{})
}

func mapiCond(conds []machinev1beta1.Condition) string {
	c := mapicond.Get(conds, synccommon.SynchronizedCondition)
	if c == nil {
		return "no Synchronized condition"
	}
	return fmt.Sprintf("Synchronized=%s %s", c.Status, c.Message)
}

// Row: a Cluster API Machine created with no Machine API mirror lives on its own, unless its
// MachineSet has a Machine API mirror: then a ClusterAPI-authoritative Machine API Machine is
// created for it.
func testCAPIMachineAlone(t *testing.T) {
	e := env.For(t)
	ctx := context.Background()

	// A MachineSet that the Cluster API owns from birth, so its mirror exists and is unpaused.
	ms := mapiMachineSet("capi-owned", 0)
	ms.Spec.AuthoritativeAPI = machinev1beta1.MachineAuthorityClusterAPI
	if err := e.Client.Create(ctx, ms); err != nil {
		t.Fatal(err)
	}
	var capiMS *clusterv1.MachineSet
	e.Eventually(60*time.Second, "Cluster API MachineSet mirror", func(ctx context.Context) (bool, string, error) {
		_, c, err := getMS(ctx, e, "capi-owned")
		if err != nil {
			return false, err.Error(), nil
		}
		capiMS = c
		return true, "", nil
	})

	handMadeCAPIMachine(t, ctx, e.Client, "loner", nil)
	handMadeCAPIMachine(t, ctx, e.Client, "capi-owned-x1", capiMS)

	e.Eventually(60*time.Second, "a Machine API copy for the MachineSet's Machine", func(ctx context.Context) (bool, string, error) {
		m, err := getMAPI(ctx, e, "capi-owned-x1")
		if err != nil {
			return false, err.Error(), nil
		}
		return m.Spec.AuthoritativeAPI == machinev1beta1.MachineAuthorityClusterAPI &&
				m.Status.AuthoritativeAPI == machinev1beta1.MachineAuthorityClusterAPI,
			fmt.Sprintf("spec %q status %q", m.Spec.AuthoritativeAPI, m.Status.AuthoritativeAPI), nil
	})
	// The copy above was made after "loner" was created, by the same controller; "loner" has
	// had its turn and must still be alone.
	if _, err := getMAPI(ctx, e, "loner"); !apierrors.IsNotFound(err) {
		t.Fatalf("a standalone Cluster API Machine got a Machine API copy (err %v)", err)
	}
	loner, err := getCAPI(ctx, e, "loner")
	if err != nil {
		t.Fatal(err)
	}
	if _, paused := loner.Annotations[clusterv1.PausedAnnotation]; paused || len(loner.Finalizers) > 0 && loner.Finalizers[0] == synccommon.SyncFinalizer {
		t.Errorf("the standalone Cluster API Machine was touched: annotations %v finalizers %v", loner.Annotations, loner.Finalizers)
	}
}

// Row: a Machine API MachineSet whose template says ClusterAPI creates Machines that are
// Cluster API-authoritative from birth, with unpaused Cluster API mirrors.
func testTemplateClusterAPI(t *testing.T) {
	e := env.For(t)
	ctx := context.Background()
	ms := mapiMachineSet("born-capi", 1)
	ms.Spec.Template.Spec.AuthoritativeAPI = machinev1beta1.MachineAuthorityClusterAPI
	if err := e.Client.Create(ctx, ms); err != nil {
		t.Fatal(err)
	}
	e.Eventually(90*time.Second, "a ClusterAPI-authoritative Machine with an unpaused mirror", func(ctx context.Context) (bool, string, error) {
		var list machinev1beta1.MachineList
		if err := e.Client.List(ctx, &list, client.InNamespace(mapiNS), client.MatchingLabels{"machine.openshift.io/cluster-api-machineset": "born-capi"}); err != nil {
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
		m, c, err := getMS(ctx, e, "born-capi")
		if err != nil {
			return false, err.Error(), nil
		}
		_, paused := c.Annotations[clusterv1.PausedAnnotation]
		return paused && m.Status.AuthoritativeAPI == machinev1beta1.MachineAuthorityMachineAPI, fmt.Sprintf("paused %v authority %q", paused, m.Status.AuthoritativeAPI), nil
	})
}
