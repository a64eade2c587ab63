package machinepool_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/machina-dev/machina/internal/cloud/api"
	"github.com/machina-dev/machina/internal/controllers/clusterapi/internal/capitest"
)

// testHealthCheck (R2): a MachineHealthCheck selects a pool's Machines by the pool-name
// label; when one's Node stops being Ready, the pool (the Machine's owner side) remediates
// it: the Machine is deleted, its instance terminated, and the group replaces it.
func testHealthCheck(t *testing.T) {
	e := env.For(t)
	ctx := context.Background()
	newPool(t, e, "mh", 2, nil)
	ms := waitPool(t, e, "mh", 2, 90*time.Second)
	mhc := &clusterv1.MachineHealthCheck{ObjectMeta: metav1.ObjectMeta{Name: "mh", Namespace: ns},
		Spec: clusterv1.MachineHealthCheckSpec{ClusterName: clusterName,
			Selector: metav1.LabelSelector{MatchLabels: map[string]string{clusterv1.MachinePoolNameLabel: "mh"}},
			Checks: clusterv1.MachineHealthCheckChecks{UnhealthyNodeConditions: []clusterv1.UnhealthyNodeCondition{
				{Type: corev1.NodeReady, Status: corev1.ConditionFalse, TimeoutSeconds: ptr.To(int32(2))},
				{Type: corev1.NodeReady, Status: corev1.ConditionUnknown, TimeoutSeconds: ptr.To(int32(2))},
			}}}}
	if err := e.Client.Create(ctx, mhc); err != nil {
		t.Fatal(err)
	}
	e.Eventually(30*time.Second, "the check covers both Machines", func(ctx context.Context) (bool, string, error) {
		if err := e.Client.Get(ctx, client.ObjectKeyFromObject(mhc), mhc); err != nil {
			return false, err.Error(), nil
		}
		return ptr.Deref(mhc.Status.ExpectedMachines, 0) == 2 && ptr.Deref(mhc.Status.CurrentHealthy, 0) == 2,
			fmt.Sprintf("%+v", mhc.Status), nil
	})

	sick := ms[0]
	pid, _ := api.ParseProviderID(sick.Spec.ProviderID)
	if _, err := e.Cloud.CreateFault(ctx, api.Fault{Kind: api.FaultNodeNotReady, InstanceIDs: []string{pid.InstanceID}}); err != nil {
		t.Fatal(err)
	}
	var sawRemediation bool
	e.Eventually(90*time.Second, "unhealthy Machine remediated", func(ctx context.Context) (bool, string, error) {
		m := &clusterv1.Machine{}
		if err := e.Client.Get(ctx, client.ObjectKeyFromObject(&sick), m); err != nil {
			return true, "gone", nil
		}
		if c := meta.FindStatusCondition(m.Status.Conditions, clusterv1.MachineOwnerRemediatedCondition); c != nil &&
			c.Reason == clusterv1.MachineSetMachineRemediationMachineDeletingReason {
			sawRemediation = true
		}
		return false, fmt.Sprintf("deleting %v %s %s", !m.DeletionTimestamp.IsZero(),
			capitest.Condition(m.Status.Conditions, clusterv1.MachineHealthCheckSucceededCondition),
			capitest.Condition(m.Status.Conditions, clusterv1.MachineOwnerRemediatedCondition)), nil
	})
	if st := instanceOf(t, e, sick.Spec.ProviderID).State; st != api.StateTerminated && st != api.StateShuttingDown {
		t.Errorf("instance of the remediated Machine is %s", st)
	}
	if ev := capitest.EventReasons(t, e, sick.Name); !sawRemediation && !contains(ev, "MachineRemediated") {
		t.Errorf("no sign of the pool's remediation: events %v", ev)
	}
	after := waitPool(t, e, "mh", 2, 90*time.Second)
	if names(after)[sick.Name] || !names(after)[ms[1].Name] {
		t.Errorf("after remediating %s the pool has %v", sick.Name, names(after))
	}
	if err := e.Client.Delete(ctx, mhc); err != nil {
		t.Fatal(err)
	}
}
