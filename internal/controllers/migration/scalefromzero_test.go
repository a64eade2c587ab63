package migration_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/machina-dev/machina/internal/controllers/scalefromzero"
	"github.com/machina-dev/machina/internal/mapicond"
)

// Scale-from-zero capacity follows a MachineSet through a migration and back: the Cluster API
// copy carries the autoscaler's capacity annotations, and the values come back unchanged.
func testScaleFromZeroSurvivesMigration(t *testing.T, pc platformCase) {
	e := env.For(t)
	ctx := context.Background()
	name := pc.name("zero")
	if err := e.Client.Create(ctx, platformSet(pc, name, 0, pc.small)); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{scalefromzero.CPUAnnotation: pc.smallCPU, scalefromzero.MemoryAnnotation: pc.smallMemoryMiB, scalefromzero.GPUAnnotation: "0"}
	mapiHas := func(ctx context.Context) (bool, string, error) {
		ms := &machinev1beta1.MachineSet{}
		if err := e.Client.Get(ctx, client.ObjectKey{Namespace: "openshift-machine-api", Name: name}, ms); err != nil {
			return false, err.Error(), nil
		}
		for k, v := range want {
			if ms.Annotations[k] != v {
				return false, fmt.Sprint(ms.Annotations), nil
			}
		}
		return mapicond.IsTrue(ms.Status.Conditions, "Synchronized"), fmt.Sprint(ms.Annotations), nil
	}
	e.Eventually(60*time.Second, "capacity annotations on the Machine API MachineSet", mapiHas)
	e.Eventually(60*time.Second, "capacity annotations on the Cluster API copy", func(ctx context.Context) (bool, string, error) {
		ms := &clusterv1.MachineSet{}
		if err := e.Client.Get(ctx, client.ObjectKey{Namespace: "openshift-cluster-api", Name: name}, ms); err != nil {
			return false, err.Error(), nil
		}
		return ms.Annotations["capacity.cluster-autoscaler.kubernetes.io/cpu"] == pc.smallCPU &&
			ms.Annotations["capacity.cluster-autoscaler.kubernetes.io/memory"] == pc.smallMemoryMiB+"Mi", fmt.Sprint(ms.Annotations), nil
	})
	migrateSet(t, e, name, machinev1beta1.MachineAuthorityClusterAPI)
	e.Eventually(60*time.Second, "capacity annotations kept under the Cluster API", mapiHas)
	migrateSet(t, e, name, machinev1beta1.MachineAuthorityMachineAPI)
	e.Eventually(60*time.Second, "capacity annotations after the way back", mapiHas)
}
