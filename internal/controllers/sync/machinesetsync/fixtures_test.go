package machinesetsync_test

// What the MachineSet rule tables (rules_test.go, deletion_test.go) add to the sync's shared
// harness (internal/synctest): builders for the rows' objects, the MachineSet sync as the
// harness runs it, and what every write of a MachineSet's copy must promise (checkWrite);
// checks_test.go holds the MachineSet's own checks.

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	infrav1 "github.com/machina-dev/machina/api/infrastructure/v1alpha1"
	"github.com/machina-dev/machina/internal/authority"
	st "github.com/machina-dev/machina/internal/controllers/sync/internal/synctest"
	"github.com/machina-dev/machina/internal/controllers/sync/machinesetsync"
	"github.com/machina-dev/machina/internal/convert"
	"github.com/machina-dev/machina/internal/testenv"
)

const mapiNS, capiNS = st.MachineAPINamespace, st.ClusterAPINamespace

// errRefused is a write the API server refused.
var errRefused = errors.New("refused by the test's API server")

// mapiSet is a Machine API MachineSet of the cluster, generation 1, of one Machine, large in
// zone A, with no authority requested or decided unless opts say so.
func mapiSet(name string, opts ...st.Opt) *machinev1beta1.MachineSet {
	ms := &machinev1beta1.MachineSet{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: mapiNS, UID: types.UID("mapi-set-" + name),
		Generation: 1, Labels: map[string]string{"machine.openshift.io/cluster-api-cluster": st.ClusterName}},
		Spec: machinev1beta1.MachineSetSpec{Replicas: ptr.To[int32](1), Selector: metav1.LabelSelector{MatchLabels: st.SetLabels(name)},
			Template: machinev1beta1.MachineTemplateSpec{ObjectMeta: machinev1beta1.ObjectMeta{Labels: st.SetLabels(name)},
				Spec: machinev1beta1.MachineSpec{ProviderSpec: machinev1beta1.ProviderSpec{Value: testenv.SimProviderSpec(testenv.SimRegion, zoneA, large)}}}}}
	for _, o := range opts {
		o(ms)
	}
	return ms
}

// placed sets the template's providerSpec zone and instance type (region: the cluster's).
func placed(zone, instanceType string) st.Opt {
	return func(o client.Object) {
		o.(*machinev1beta1.MachineSet).Spec.Template.Spec.ProviderSpec.Value = testenv.SimProviderSpec(testenv.SimRegion, zone, instanceType)
	}
}

// inRegion moves the providerSpec to another region than the cluster's: not convertible.
func inRegion(r string) st.Opt {
	return func(o client.Object) {
		o.(*machinev1beta1.MachineSet).Spec.Template.Spec.ProviderSpec.Value = testenv.SimProviderSpec(r, r+"a", large)
	}
}

func replicas(n int32) st.Opt {
	return func(o client.Object) { o.(*machinev1beta1.MachineSet).Spec.Replicas = ptr.To(n) }
}

// capiCopy is the Cluster API form of mapi — its MachineSet and SimMachineTemplate as the
// conversion library makes them — with uids, generation 1, the template controlled by the
// MachineSet and nothing of the sync's: someone's active MachineSet unless the row pauses or
// pairs it.
func capiCopy(t *testing.T, mapi *machinev1beta1.MachineSet) (*clusterv1.MachineSet, *infrav1.SimMachineTemplate) {
	t.Helper()
	out := convertSet(t, mapi)
	ms, tmpl := out.MachineSet, out.InfraMachineTemplate.(*infrav1.SimMachineTemplate)
	ms.UID, ms.Generation = types.UID("capi-set-"+ms.Name), 1
	tmpl.UID = types.UID("template-" + tmpl.Name)
	tmpl.OwnerReferences = []metav1.OwnerReference{*metav1.NewControllerRef(ms, clusterv1.GroupVersion.WithKind("MachineSet"))}
	return ms, tmpl
}

// convertSet converts mapi with the cluster's context.
func convertSet(t *testing.T, mapi *machinev1beta1.MachineSet) *convert.ClusterAPIMachineSet {
	t.Helper()
	out, _, errs := convert.ToClusterAPIMachineSet(mapi.DeepCopy(), simContext(t))
	if len(errs) > 0 {
		t.Fatal(errs.ToAggregate())
	}
	return out
}

// templateName is the name of the SimMachineTemplate of a MachineSet name in zone, of
// instanceType: <name>-<hash of the template>.
func templateName(t *testing.T, name, zone, instanceType string) string {
	t.Helper()
	return convertSet(t, mapiSet(name, placed(zone, instanceType))).InfraMachineTemplate.GetName()
}

// machineSets is the MachineSet sync over a row's fake API server, in the cluster's objects.
var machineSets = st.Sync{
	Kind: &machinev1beta1.MachineSet{},
	Base: clusterObjects,
	Reconciler: func(t *testing.T, c client.Client, rec record.EventRecorder) reconcile.Reconciler {
		return &machinesetsync.Reconciler{Client: c, APIReader: c, Namespaces: st.Namespaces, Recorder: rec, Providers: testenv.SimProviders(t),
			AutoscalerFieldManager: "cluster-autoscaler"}
	},
	CheckWrite: checkWrite,
}

// checkWrite returns what a write breaks of docs/migration.md's promises for every write,
// whatever pass makes it: a Cluster API MachineSet never points at a template that is not
// there (the template is written first, so a pass stopped between the two writes leaves none
// dangling); it is created with the sync finalizer; and it and its template are created
// paused unless the set belongs to the Cluster API.
func checkWrite(ctx context.Context, c client.Reader, verb string, o client.Object) []string {
	var v []string
	ms, isSet := o.(*clusterv1.MachineSet)
	_, isTemplate := o.(*infrav1.SimMachineTemplate)
	if isSet && (verb == "create" || verb == "update" || verb == "patch") {
		ref := ms.Spec.Template.Spec.InfrastructureRef.Name
		stored := &clusterv1.MachineSet{}
		changed := verb == "create" || c.Get(ctx, client.ObjectKeyFromObject(ms), stored) != nil ||
			stored.Spec.Template.Spec.InfrastructureRef.Name != ref
		if changed && ref != "" && c.Get(ctx, client.ObjectKey{Namespace: capiNS, Name: ref}, &infrav1.SimMachineTemplate{}) != nil {
			v = append(v, fmt.Sprintf("%s of Cluster API MachineSet %s names SimMachineTemplate %s, which is not there", verb, ms.Name, ref))
		}
	}
	if verb != "create" || !isSet && !isTemplate {
		return v
	}
	name := o.GetName()
	if isSet {
		v = append(v, st.MissingSyncFinalizer(o)...)
	} else {
		name = strings.TrimPrefix(o.GetAnnotations()[authority.MirrorOfAnnotation], "MachineSet/")
	}
	return append(v, st.CreatedUnpaused(ctx, c, o, &machinev1beta1.MachineSet{}, name)...)
}

// The simulated platform is the one these rows run on (its fixtures: internal/testenv).
const (
	zoneA, zoneB, zoneC = testenv.SimZoneA, testenv.SimZoneB, testenv.SimZoneC
	large, xlarge       = testenv.SimLarge, testenv.SimXLarge
)

// clusterObjects are the cluster every row runs in: the shared objects (synctest) and the
// simulated platform's Cluster.
func clusterObjects() []client.Object {
	return append(st.ClusterObjects(), testenv.SimClusterObjects(capiNS, st.ClusterName)...)
}

// simContext is the simulated platform's conversion context of that cluster.
func simContext(t *testing.T) convert.Context {
	t.Helper()
	return testenv.SimContext(t, convert.Namespaces{MachineAPI: mapiNS, ClusterAPI: capiNS}, clusterObjects()...)
}
