package migration

import (
	"testing"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/event"

	"github.com/machina-dev/machina/internal/scheme"
)

const (
	mapiAPI = machinev1beta1.MachineAuthorityMachineAPI
	capiAPI = machinev1beta1.MachineAuthorityClusterAPI
	moving  = machinev1beta1.MachineAuthorityMigrating
)

func mapiMachine(spec, status machinev1beta1.MachineAuthority) *machinev1beta1.Machine {
	return &machinev1beta1.Machine{ObjectMeta: metav1.ObjectMeta{Namespace: "openshift-machine-api", Name: "m"},
		Spec: machinev1beta1.MachineSpec{AuthoritativeAPI: spec}, Status: machinev1beta1.MachineStatus{AuthoritativeAPI: status}}
}

func mapiSet(spec, status machinev1beta1.MachineAuthority) *machinev1beta1.MachineSet {
	return &machinev1beta1.MachineSet{ObjectMeta: metav1.ObjectMeta{Namespace: "openshift-machine-api", Name: "m"},
		Spec: machinev1beta1.MachineSetSpec{AuthoritativeAPI: spec}, Status: machinev1beta1.MachineSetStatus{AuthoritativeAPI: status}}
}

// Which updates of a Machine API copy bring a migration pass: those of a handover requested,
// under way, completing or undecided, and of a copy being deleted; not the changes of a
// resource whose authority is settled.
func TestOpenUpdates(t *testing.T) {
	deleting := mapiMachine(mapiAPI, mapiAPI)
	deleting.DeletionTimestamp = ptr.To(metav1.Now())
	for _, c := range []struct {
		name     string
		old, new client.Object
		want     bool
	}{
		{"settled Machine's status write", mapiMachine(mapiAPI, mapiAPI), mapiMachine(mapiAPI, mapiAPI), false},
		{"settled MachineSet's counts", mapiSet(capiAPI, capiAPI), mapiSet(capiAPI, capiAPI), false},
		{"request", mapiMachine(mapiAPI, mapiAPI), mapiMachine(capiAPI, mapiAPI), true},
		{"under way", mapiMachine(capiAPI, moving), mapiMachine(capiAPI, moving), true},
		{"completed", mapiMachine(capiAPI, moving), mapiMachine(capiAPI, capiAPI), true},
		{"authority not decided yet", mapiMachine(mapiAPI, ""), mapiMachine(mapiAPI, ""), true},
		{"MachineSet request", mapiSet(mapiAPI, mapiAPI), mapiSet(capiAPI, mapiAPI), true},
		{"deletion", mapiMachine(mapiAPI, mapiAPI), deleting, true},
	} {
		if got := openUpdates.Update(event.UpdateEvent{ObjectOld: c.old, ObjectNew: c.new}); got != c.want {
			t.Errorf("%s: pass %v, want %v", c.name, got, c.want)
		}
	}
}

// A Cluster API copy's event brings a pass of its Machine API namesake only while that has a
// handover open.
func TestNamesakeOpen(t *testing.T) {
	capi := &clusterv1.Machine{ObjectMeta: metav1.ObjectMeta{Namespace: "openshift-cluster-api", Name: "m"}}
	for _, c := range []struct {
		name string
		mapi *machinev1beta1.Machine
		want bool
	}{
		{"settled", mapiMachine(capiAPI, capiAPI), false},
		{"migrating", mapiMachine(capiAPI, moving), true},
		{"no Machine API copy", nil, false},
	} {
		b := fake.NewClientBuilder().WithScheme(scheme.Scheme)
		if c.mapi != nil {
			b = b.WithObjects(c.mapi)
		}
		p := namesakeOpen(b.Build(), "openshift-machine-api", func() client.Object { return &machinev1beta1.Machine{} })
		if got := p.Update(event.UpdateEvent{ObjectOld: capi, ObjectNew: capi}); got != c.want {
			t.Errorf("%s: pass %v, want %v", c.name, got, c.want)
		}
	}
}
