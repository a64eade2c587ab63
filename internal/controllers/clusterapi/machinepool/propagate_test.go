package machinepool_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/machina-dev/machina/internal/controllers/clusterapi/internal/capitest"
)

// testTemplateInPlace: a label, an annotation and a drain timeout added to the pool's machine
// template reach its existing Machines, which stay (a health check selecting the new label
// finds them).
func testTemplateInPlace(t *testing.T) {
	e := env.For(t)
	newPool(t, e, "inplace", 2, nil)
	before := waitPool(t, e, "inplace", 2, 90*time.Second)
	mp := &clusterv1.MachinePool{}
	mp.Namespace, mp.Name = ns, "inplace"
	capitest.Patch(t, e, mp, func(mp *clusterv1.MachinePool) {
		mp.Spec.Template.Labels["team"] = "green"
		mp.Spec.Template.Annotations = map[string]string{"example.com/note": "in place"}
		mp.Spec.Template.Spec.Deletion.NodeDrainTimeoutSeconds = ptr.To[int32](30)
	})
	e.Eventually(time.Minute, "pool Machines updated in place", func(ctx context.Context) (bool, string, error) {
		var list clusterv1.MachineList
		if err := e.Client.List(ctx, &list, client.InNamespace(ns), client.MatchingLabels{"team": "green"}); err != nil {
			return false, err.Error(), nil
		}
		ok := len(list.Items) == 2
		for _, m := range list.Items {
			ok = ok && m.Annotations["example.com/note"] == "in place" && ptr.Deref(m.Spec.Deletion.NodeDrainTimeoutSeconds, 0) == 30
		}
		return ok, fmt.Sprintf("%d labelled", len(list.Items)), nil
	})
	after, err := poolMachines(context.Background(), e, "inplace")
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(names(after)) != fmt.Sprint(names(before)) || after[0].UID != before[0].UID || after[1].UID != before[1].UID {
		t.Errorf("Machines %v, want %v unchanged", capitest.Names(after), capitest.Names(before))
	}
}
