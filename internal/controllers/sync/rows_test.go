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

	infrav1 "github.com/machina-dev/machina/api/infrastructure/v1alpha1"
	"github.com/machina-dev/machina/internal/controllers/sync/synccommon"
	"github.com/machina-dev/machina/internal/mapicond"
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
