package machinesetsync_test

// The MachineSet's own checks on a settled store (internal/synctest holds those of any kind).

import (
	"testing"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/machina-dev/machina/api/infrastructure/v1alpha1"
	"github.com/machina-dev/machina/internal/authority"
	st "github.com/machina-dev/machina/internal/controllers/sync/internal/synctest"
	"github.com/machina-dev/machina/internal/testenv"
)

// clusterAPICopy: the Cluster API MachineSet of want's name exists, is not being deleted,
// carries the sync finalizer, is paused as wanted and has the spec of want's conversion; the
// SimMachineTemplate it names has the converted template's spec, is paused like it, is
// controlled by it, and carries the sync's mirror mark when mark is set.
func clusterAPICopy(want *machinev1beta1.MachineSet, wantPaused, mark bool) st.Check {
	return func(t *testing.T, h *st.Harness) {
		name := want.Name
		ms := st.MustGet(h, &clusterv1.MachineSet{}, capiNS, name)
		st.PairedCopy(t, ms, wantPaused)
		out := convertSet(t, want)
		if !equality.Semantic.DeepEqual(ms.Spec, out.MachineSet.Spec) {
			t.Errorf("Cluster API MachineSet %s spec:\n%+v\nwant:\n%+v", name, ms.Spec, out.MachineSet.Spec)
		}
		tmpl := &infrav1.SimMachineTemplate{}
		if !h.Get(tmpl, capiNS, ms.Spec.Template.Spec.InfrastructureRef.Name) {
			t.Fatalf("Cluster API MachineSet %s names SimMachineTemplate %q, which does not exist", name, ms.Spec.Template.Spec.InfrastructureRef.Name)
		}
		wantTmpl := out.InfraMachineTemplate.(*infrav1.SimMachineTemplate)
		if !equality.Semantic.DeepEqual(tmpl.Spec, wantTmpl.Spec) {
			t.Errorf("SimMachineTemplate %s spec %+v, want %+v", tmpl.Name, tmpl.Spec, wantTmpl.Spec)
		}
		if ref := metav1.GetControllerOf(tmpl); ref == nil || ref.UID != ms.UID {
			t.Errorf("SimMachineTemplate %s controller %v, want the Cluster API MachineSet (uid %s)", tmpl.Name, ref, ms.UID)
		}
		wantMark := ""
		if mark {
			wantMark = "MachineSet/" + name
		}
		if st.IsPaused(tmpl) != wantPaused || tmpl.Annotations[authority.MirrorOfAnnotation] != wantMark {
			t.Errorf("SimMachineTemplate %s: paused %v (want %v), annotations %v", tmpl.Name, st.IsPaused(tmpl), wantPaused, tmpl.Annotations)
		}
	}
}

// templates: the SimMachineTemplates controlled by the Cluster API MachineSet name are
// exactly names.
func templates(name string, names ...string) st.Check {
	return func(t *testing.T, h *st.Harness) {
		ms := st.MustGet(h, &clusterv1.MachineSet{}, capiNS, name)
		var list infrav1.SimMachineTemplateList
		if err := h.Client().List(t.Context(), &list, client.InNamespace(capiNS)); err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, tm := range list.Items {
			if ref := metav1.GetControllerOf(&tm); ref != nil && ref.UID == ms.UID {
				got = append(got, tm.Name)
			}
		}
		if !sets.New(got...).Equal(sets.New(names...)) {
			t.Errorf("templates of %s: %v, want %v", name, got, names)
		}
	}
}

// mapiSpecIs: the Machine API MachineSet has replicas and a template providerSpec in zone, of
// instanceType.
func mapiSpecIs(name string, replicas int32, zone, instanceType string) st.Check {
	return func(t *testing.T, h *st.Harness) {
		ms := st.MustGet(h, &machinev1beta1.MachineSet{}, mapiNS, name)
		s := testenv.ReadSimProviderSpec(t, ms.Spec.Template.Spec.ProviderSpec.Value, "Machine API MachineSet "+name)
		if ptr.Deref(ms.Spec.Replicas, -1) != replicas || s.Region != testenv.SimRegion || s.Zone != zone || s.InstanceType != instanceType {
			t.Errorf("Machine API MachineSet %s: replicas %d, providerSpec %s %s %s; want %d, %s %s %s", name, ptr.Deref(ms.Spec.Replicas, -1),
				s.Region, s.Zone, s.InstanceType, replicas, testenv.SimRegion, zone, instanceType)
		}
	}
}
