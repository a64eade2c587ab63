package convert_test

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/runtime"

	simv1 "github.com/machina-dev/machina/api/infrastructure/v1alpha1"
	"github.com/machina-dev/machina/internal/cloud/api"
	"github.com/machina-dev/machina/internal/controllers/scalefromzero"
	"github.com/machina-dev/machina/internal/controllers/sim/simmachinetemplate"
	"github.com/machina-dev/machina/internal/convert"
)

// TestScaleFromZeroControllerAnnotationsRoundTrip converts MachineSets annotated exactly as
// the simulated provider's MachineSet controller annotates them, for every instance type of
// the built-in catalogue, to Cluster API and back: the autoscaler hints survive both ways, a
// user's own capacity labels included, and the Cluster API hints agree with the capacity the
// SimMachineTemplate controller reports for the same instance type.
func TestScaleFromZeroControllerAnnotationsRoundTrip(t *testing.T) {
	for _, it := range api.DefaultCatalogue().InstanceTypes {
		t.Run(it.Name, func(t *testing.T) {
			ms := mapiv1ms()
			ms.Spec.Template.Spec.ProviderSpec.Value = &runtime.RawExtension{Raw: fmt.Appendf(nil,
				`{"apiVersion":"infrastructure.machina.dev/v1alpha1","kind":"SimMachineProviderSpec","region":"sim-east-1","zone":"sim-east-1a","instanceType":%q,"image":"sim-rhcos-9","userDataSecret":{"name":"worker-user-data"}}`,
				it.Name)}
			ms.Annotations = scalefromzero.ApplyCapacity(map[string]string{
				convert.CapacityLabelsAnnotation:              "team=blue",
				convert.MachineAPIAutoscalerMinSizeAnnotation: "0",
				convert.MachineAPIAutoscalerMaxSizeAnnotation: "3",
			}, it)
			want := copyAnnotations(ms.Annotations)

			got, _, errs := convert.ToClusterAPIMachineSet(ms, ctx)
			if len(errs) > 0 {
				t.Fatal(errs)
			}
			a := got.MachineSet.Annotations
			if a[convert.CapacityLabelsAnnotation] != "team=blue,kubernetes.io/arch="+it.Architecture {
				t.Errorf("labels %q", a[convert.CapacityLabelsAnnotation])
			}
			for _, k := range []string{convert.MachineAPICPUAnnotation, convert.MachineAPIMemoryAnnotation, convert.MachineAPIGPUAnnotation} {
				if _, ok := a[k]; ok {
					t.Errorf("Machine API hint %s left on the Cluster API MachineSet", k)
				}
			}
			// The same numbers as the SimMachineTemplate's status.capacity.
			tmpl, ok := got.InfraMachineTemplate.(*simv1.SimMachineTemplate)
			if !ok || tmpl.Spec.Template.Spec.InstanceType != it.Name {
				t.Fatalf("template %T %+v", got.InfraMachineTemplate, got.InfraMachineTemplate)
			}
			capacity := simmachinetemplate.Capacity(it)
			sameQuantity(t, "cpu", a[convert.CapacityCPUAnnotation], capacity[corev1.ResourceCPU])
			sameQuantity(t, "memory", a[convert.CapacityMemoryAnnotation], capacity[corev1.ResourceMemory])
			if it.GPU > 0 {
				sameQuantity(t, "gpu-count", a[convert.CapacityGPUCountAnnotation], capacity[corev1.ResourceName(a[convert.CapacityGPUTypeAnnotation])])
			} else if a[convert.CapacityGPUCountAnnotation] != "0" || a[convert.CapacityGPUTypeAnnotation] != "" {
				t.Errorf("no GPU: gpu-count %q gpu-type %q", a[convert.CapacityGPUCountAnnotation], a[convert.CapacityGPUTypeAnnotation])
			}

			back, _, errs := convert.ToMachineAPIMachineSet(got.MachineSet, got.InfraMachineTemplate, ctx)
			if len(errs) > 0 {
				t.Fatal(errs)
			}
			if !equality.Semantic.DeepEqual(back.Annotations, want) {
				t.Errorf("MAPI -> CAPI -> MAPI: %v\nwant %v", back.Annotations, want)
			}

			// And starting from the Cluster API side.
			again, _, errs := convert.ToClusterAPIMachineSet(back, ctx)
			if len(errs) > 0 {
				t.Fatal(errs)
			}
			if !equality.Semantic.DeepEqual(again.MachineSet.Annotations, got.MachineSet.Annotations) {
				t.Errorf("CAPI -> MAPI -> CAPI: %v\nwant %v", again.MachineSet.Annotations, got.MachineSet.Annotations)
			}
		})
	}
}

func sameQuantity(t *testing.T, what, annotation string, q resource.Quantity) {
	t.Helper()
	a, err := resource.ParseQuantity(annotation)
	if err != nil || a.Cmp(q) != 0 {
		t.Errorf("%s: annotation %q, template capacity %s", what, annotation, q.String())
	}
}

func copyAnnotations(in map[string]string) map[string]string {
	out := make(map[string]string, len(in))
	for k, v := range in {
		out[k] = v
	}
	return out
}
