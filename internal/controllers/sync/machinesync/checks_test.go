package machinesync_test

// The Machine's own checks on a settled store (internal/synctest holds those of any kind).

import (
	"testing"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	infrav1 "github.com/machina-dev/machina/api/infrastructure/v1alpha1"
	"github.com/machina-dev/machina/internal/authority"
	st "github.com/machina-dev/machina/internal/controllers/sync/internal/synctest"
	"github.com/machina-dev/machina/internal/testenv"
)

// clusterAPICopy: the Cluster API Machine exists, is not being deleted, carries the sync
// finalizer and is paused as wanted; its spec and its SimMachine's are those of the Machine API
// Machine name in zone, of instanceType.
func clusterAPICopy(name string, wantPaused bool, zone, instanceType string) st.Check {
	return func(t *testing.T, h *st.Harness) {
		m := st.MustGet(h, &clusterv1.Machine{}, capiNS, name)
		sm := st.MustGet(h, &infrav1.SimMachine{}, capiNS, name)
		st.PairedCopy(t, m, wantPaused)
		want, wantInfra := capiCopy(t, mapiMachine(name, placed(zone, instanceType)))
		if !equality.Semantic.DeepEqual(m.Spec, want.Spec) {
			t.Errorf("Cluster API Machine %s spec:\n%+v\nwant (%s, %s):\n%+v", name, m.Spec, zone, instanceType, want.Spec)
		}
		if !equality.Semantic.DeepEqual(sm.Spec, wantInfra.Spec) {
			t.Errorf("SimMachine %s spec %+v, want (%s, %s) %+v", name, sm.Spec, zone, instanceType, wantInfra.Spec)
		}
	}
}

// infraCopy: the SimMachine of the Machine is controlled by its Cluster API Machine, is marked
// as the mirror of Machine/name (mirrorOf) or not, is paused as wanted, and carries no sync
// finalizer (its Machine carries the deletion).
func infraCopy(name string, wantPaused, mirrorOf bool) st.Check {
	return func(t *testing.T, h *st.Harness) {
		sm := st.MustGet(h, &infrav1.SimMachine{}, capiNS, name)
		owner := st.MustGet(h, &clusterv1.Machine{}, capiNS, name)
		if ref := metav1.GetControllerOf(sm); ref == nil || ref.UID != owner.UID {
			t.Errorf("SimMachine %s controller %v, want Cluster API Machine uid %s", name, ref, owner.UID)
		}
		wantMark := ""
		if mirrorOf {
			wantMark = "Machine/" + name
		}
		if st.IsPaused(sm) != wantPaused || sm.Annotations[authority.MirrorOfAnnotation] != wantMark ||
			controllerutil.ContainsFinalizer(sm, authority.SyncFinalizer) {
			t.Errorf("SimMachine %s: paused %v (want %v), annotations %v, finalizers %v", name, st.IsPaused(sm), wantPaused, sm.Annotations, sm.Finalizers)
		}
	}
}

// providerSpecIs: the Machine API copy's providerSpec is in zone, of instanceType.
func providerSpecIs(name, zone, instanceType string) st.Check {
	return func(t *testing.T, h *st.Harness) {
		m := st.MustGet(h, &machinev1beta1.Machine{}, mapiNS, name)
		s := testenv.ReadSimProviderSpec(t, m.Spec.ProviderSpec.Value, "Machine API Machine "+name)
		if s.Region != testenv.SimRegion || s.Zone != zone || s.InstanceType != instanceType {
			t.Errorf("Machine API Machine %s providerSpec region %q zone %q type %q, want %q %q %q", name, s.Region, s.Zone, s.InstanceType,
				testenv.SimRegion, zone, instanceType)
		}
	}
}

// bootstrapSecret: the Machine API user data became the Cluster API bootstrap data Secret.
func bootstrapSecret() st.Check {
	return func(t *testing.T, h *st.Harness) {
		s := &corev1.Secret{}
		if !h.Get(s, capiNS, st.UserData) || string(s.Data["value"]) != "#cloud-config\n" || s.Labels[clusterv1.ClusterNameLabel] != st.ClusterName {
			t.Errorf("bootstrap data Secret %s/%s: %v %v", capiNS, st.UserData, s.Labels, s.Data)
		}
	}
}
