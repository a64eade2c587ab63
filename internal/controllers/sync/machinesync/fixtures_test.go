package machinesync_test

// What the Machine rule tables (rules_test.go, deletion_test.go) add to the sync's shared
// harness (internal/synctest): builders for the rows' objects, the Machine sync as the harness
// runs it, and what every write of a Machine's copy must promise (checkCreate);
// checks_test.go holds the Machine's own checks.

import (
	"context"
	"testing"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	infrav1 "github.com/machina-dev/machina/api/infrastructure/v1alpha1"
	st "github.com/machina-dev/machina/internal/controllers/sync/internal/synctest"
	"github.com/machina-dev/machina/internal/controllers/sync/machinesync"
	"github.com/machina-dev/machina/internal/convert"
	"github.com/machina-dev/machina/internal/testenv"
)

const mapiNS, capiNS = st.MachineAPINamespace, st.ClusterAPINamespace

// mapiMachine is a Machine API Machine of the cluster, generation 1, large in zone A, with no
// authority requested or decided unless opts say so.
func mapiMachine(name string, opts ...st.Opt) *machinev1beta1.Machine {
	m := &machinev1beta1.Machine{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: mapiNS, UID: types.UID("mapi-machine-" + name),
		Generation: 1, Labels: map[string]string{"machine.openshift.io/cluster-api-cluster": st.ClusterName}},
		Spec: machinev1beta1.MachineSpec{ProviderSpec: machinev1beta1.ProviderSpec{Value: testenv.SimProviderSpec(testenv.SimRegion, zoneA, large)}}}
	for _, o := range opts {
		o(m)
	}
	return m
}

// placed sets the providerSpec's zone and instance type (region: the cluster's).
func placed(zone, instanceType string) st.Opt {
	return func(o client.Object) {
		o.(*machinev1beta1.Machine).Spec.ProviderSpec.Value = testenv.SimProviderSpec(testenv.SimRegion, zone, instanceType)
	}
}

// inRegion moves the providerSpec to another region than the cluster's: not convertible.
func inRegion(r string) st.Opt {
	return func(o client.Object) {
		o.(*machinev1beta1.Machine).Spec.ProviderSpec.Value = testenv.SimProviderSpec(r, r+"a", large)
	}
}

// ownedBy makes the Machine API MachineSet ms the Machine's controller, with its labels.
func ownedBy(ms *machinev1beta1.MachineSet) st.Opt {
	return func(o client.Object) {
		m := o.(*machinev1beta1.Machine)
		m.OwnerReferences = []metav1.OwnerReference{*metav1.NewControllerRef(ms, machinev1beta1.GroupVersion.WithKind("MachineSet"))}
		for k, v := range ms.Spec.Template.Labels {
			m.Labels[k] = v
		}
	}
}

// mapiSet is a Machine API MachineSet (only what the Machine rules read of it: it exists, its
// uid, its labels).
func mapiSet(name string) *machinev1beta1.MachineSet {
	return &machinev1beta1.MachineSet{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: mapiNS, UID: types.UID("mapi-set-" + name)},
		Spec: machinev1beta1.MachineSetSpec{Selector: metav1.LabelSelector{MatchLabels: st.SetLabels(name)},
			Template: machinev1beta1.MachineTemplateSpec{ObjectMeta: machinev1beta1.ObjectMeta{Labels: st.SetLabels(name)}}}}
}

// capiSet is a Cluster API MachineSet selecting what mapiSet(name) selects: someone's active
// one unless given a pause or the sync finalizer.
func capiSet(name string) *clusterv1.MachineSet {
	return &clusterv1.MachineSet{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: capiNS, UID: types.UID("capi-set-" + name)},
		Spec: clusterv1.MachineSetSpec{ClusterName: st.ClusterName, Selector: metav1.LabelSelector{MatchLabels: st.SetLabels(name)}}}
}

// capiCopy is the Cluster API form of mapi — its Machine and SimMachine as the conversion
// library makes them — with uids, the SimMachine controlled by the Machine, generation 1 and
// nothing of the sync's: someone's active Machine unless the row pauses or pairs it.
func capiCopy(t *testing.T, mapi *machinev1beta1.Machine) (*clusterv1.Machine, *infrav1.SimMachine) {
	t.Helper()
	out, _, errs := convert.ToClusterAPIMachine(mapi.DeepCopy(), simContext(t))
	if len(errs) > 0 {
		t.Fatal(errs.ToAggregate())
	}
	m, sm := out.Machine, out.InfraMachine.(*infrav1.SimMachine)
	m.UID, m.Generation = types.UID("capi-machine-"+m.Name), 1
	sm.UID = types.UID("sim-machine-" + m.Name)
	sm.OwnerReferences = []metav1.OwnerReference{*metav1.NewControllerRef(m, clusterv1.GroupVersion.WithKind("Machine"))}
	return m, sm
}

// machines is the Machine sync over a row's fake API server, in the cluster's objects.
var machines = st.Sync{
	Kind: &machinev1beta1.Machine{},
	Base: clusterObjects,
	Reconciler: func(t *testing.T, c client.Client, rec record.EventRecorder) reconcile.Reconciler {
		return &machinesync.Reconciler{Client: c, APIReader: c, Namespaces: st.Namespaces, Recorder: rec, Providers: testenv.SimProviders(t)}
	},
	CheckWrite: checkCreate,
}

// checkCreate returns what a write breaks of docs/migration.md's promises for every Cluster
// API copy from the moment it exists, whatever pass creates it: a Cluster API Machine carries
// the sync finalizer, and it and its InfraMachine are created paused unless the Machine
// belongs to the Cluster API.
func checkCreate(ctx context.Context, c client.Reader, verb string, o client.Object) []string {
	_, isMachine := o.(*clusterv1.Machine)
	_, isInfra := o.(*infrav1.SimMachine)
	if verb != "create" || !isMachine && !isInfra {
		return nil
	}
	var v []string
	if isMachine {
		v = st.MissingSyncFinalizer(o)
	}
	return append(v, st.CreatedUnpaused(ctx, c, o, &machinev1beta1.Machine{}, o.GetName())...)
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
