package machinedeployment_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ct "github.com/machina-dev/machina/internal/controllers/clusterapi/internal/capitest"
	"github.com/machina-dev/machina/internal/testenv"
)

var gpuTaint = clusterv1.MachineTaint{Key: "example.com/gpu", Value: "true", Effect: corev1.TaintEffectNoSchedule,
	Propagation: clusterv1.MachineTaintPropagationAlways}

func newMHC(name string, selector map[string]string) *clusterv1.MachineHealthCheck {
	return &clusterv1.MachineHealthCheck{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ct.NS},
		Spec: clusterv1.MachineHealthCheckSpec{ClusterName: ct.Cluster, Selector: metav1.LabelSelector{MatchLabels: selector},
			Checks: clusterv1.MachineHealthCheckChecks{UnhealthyNodeConditions: []clusterv1.UnhealthyNodeCondition{
				{Type: corev1.NodeReady, Status: corev1.ConditionFalse, TimeoutSeconds: ptr.To[int32](300)}}}}}
}

// In-place fields of the template (labels, annotations, minReadySeconds, deletion timeouts, taints)
// and the MachineDeployment's annotations reach the existing MachineSet and Machines without
// replacing either; a health check selecting a new template label then targets them.
func testInPlace(t *testing.T) {
	e := env.For(t)
	md := newMD("md-inplace", 2, "small")
	create(t, e, md)
	waitSettled(t, e, md)
	ms := onlySet(t, e, md)
	before := uids(machines(t, e, md))
	mhc := newMHC("mhc-inplace", map[string]string{"team": "blue"})
	create(t, e, mhc)
	t.Cleanup(func() { _ = e.Client.Delete(context.Background(), mhc) })

	patchMD(t, e, md, func(md *clusterv1.MachineDeployment) {
		md.Annotations = map[string]string{"example.com/owner": "ops"}
		md.Spec.Template.Labels["team"] = "blue"
		md.Spec.Template.Annotations = map[string]string{"example.com/note": "in place"}
		md.Spec.Template.Spec.MinReadySeconds = ptr.To[int32](1)
		md.Spec.Template.Spec.Deletion.NodeDrainTimeoutSeconds = ptr.To[int32](30)
		md.Spec.Template.Spec.Deletion.NodeVolumeDetachTimeoutSeconds = ptr.To[int32](40)
		md.Spec.Template.Spec.Deletion.NodeDeletionTimeoutSeconds = ptr.To[int32](50)
		md.Spec.Template.Spec.Taints = []clusterv1.MachineTaint{gpuTaint}
	})
	e.Eventually(time.Minute, "Machines updated in place", func(context.Context) (bool, string, error) {
		var bad []string
		for _, m := range machines(t, e, md) {
			d := m.Spec.Deletion
			if m.Labels["team"] != "blue" || m.Annotations["example.com/note"] != "in place" || ptr.Deref(m.Spec.MinReadySeconds, 0) != 1 ||
				ptr.Deref(d.NodeDrainTimeoutSeconds, 0) != 30 || ptr.Deref(d.NodeVolumeDetachTimeoutSeconds, 0) != 40 ||
				ptr.Deref(d.NodeDeletionTimeoutSeconds, 0) != 50 || len(m.Spec.Taints) != 1 || m.Spec.Taints[0] != gpuTaint {
				bad = append(bad, fmt.Sprintf("%s labels %v annotations %v minReady %v deletion %+v taints %v", m.Name, m.Labels, m.Annotations,
					ptr.Deref(m.Spec.MinReadySeconds, -1), d, m.Spec.Taints))
			}
		}
		return len(bad) == 0, strings.Join(bad, "; "), nil
	})
	e.Eventually(time.Minute, "health check targets the existing Machines", func(ctx context.Context) (bool, string, error) {
		got := &clusterv1.MachineHealthCheck{}
		if err := e.Client.Get(ctx, client.ObjectKeyFromObject(mhc), got); err != nil {
			return false, err.Error(), nil
		}
		healthy := 0
		for _, m := range machines(t, e, md) {
			if meta.IsStatusConditionTrue(m.Status.Conditions, clusterv1.MachineHealthCheckSucceededCondition) {
				healthy++
			}
		}
		return ptr.Deref(got.Status.ExpectedMachines, 0) == 2 && healthy == 2,
			fmt.Sprintf("expected %d, targets %v, %d healthy", ptr.Deref(got.Status.ExpectedMachines, -1), got.Status.Targets, healthy), nil
	})
	got := waitMD(t, e, md, "settled without a rollout", func(md *clusterv1.MachineDeployment) bool {
		return settled(md) && md.Annotations[clusterv1.RevisionAnnotation] == "1"
	})
	now := onlySet(t, e, md)
	if now.UID != ms.UID || now.Spec.Template.Labels["team"] != "blue" || now.Annotations["example.com/owner"] != "ops" ||
		ptr.Deref(now.Spec.Template.Spec.MinReadySeconds, 0) != 1 {
		t.Errorf("MachineSet %s (%s, was %s) template labels %v annotations %v", now.Name, now.UID, ms.UID, now.Spec.Template.Labels, now.Annotations)
	}
	if after := uids(machines(t, e, md)); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Errorf("Machines %v, want %v (none replaced)", after, before)
	}
	if ptr.Deref(got.Status.UpToDateReplicas, 0) != 2 {
		t.Errorf("upToDateReplicas %d, want 2", ptr.Deref(got.Status.UpToDateReplicas, -1))
	}
}

// Remediating reports Machines whose MachineHealthCheck handed them to their MachineSet.
// The MachineSet is paused while the condition is looked at, so it cannot replace the
// Machine before the MachineDeployment reports it.
func testRemediating(t *testing.T) {
	e := env.For(t)
	ctx := context.Background()
	md := newMD("md-remed", 2, "small")
	create(t, e, md)
	waitSettled(t, e, md)
	ms := onlySet(t, e, md)
	ct.Patch(t, e, &ms, func(ms *clusterv1.MachineSet) { ms.Annotations[clusterv1.PausedAnnotation] = "" })
	mhc := newMHC("mhc-remed", map[string]string{"md": md.Name})
	create(t, e, mhc)
	t.Cleanup(func() { _ = e.Client.Delete(context.Background(), mhc) })
	victim := machines(t, e, md)[0]
	ct.Patch(t, e, &victim, func(m *clusterv1.Machine) { m.Annotations[clusterv1.RemediateMachineAnnotation] = "" })
	waitMD(t, e, md, "Remediating", func(md *clusterv1.MachineDeployment) bool {
		c := meta.FindStatusCondition(md.Status.Conditions, clusterv1.MachineDeploymentRemediatingCondition)
		return c != nil && c.Status == metav1.ConditionTrue && c.Reason == clusterv1.MachineDeploymentRemediatingReason &&
			strings.Contains(c.Message, victim.Name)
	})
	unpause(t, e, &ms)
	waitMD(t, e, md, "remediated", func(md *clusterv1.MachineDeployment) bool {
		return settled(md) && hasReason(md, clusterv1.MachineDeploymentRemediatingCondition, metav1.ConditionFalse,
			clusterv1.MachineDeploymentNotRemediatingReason) && uids(machines(t, e, md))[victim.Name] == ""
	})
	if err := e.Client.Delete(ctx, mhc); err != nil {
		t.Fatal(err)
	}
}

// unpause removes the paused annotation with the manager's identity.
func unpause(t *testing.T, e *testenv.Env, obj client.Object) {
	t.Helper()
	if err := managerClient(t, e).Patch(context.Background(), obj, client.RawPatch(types.JSONPatchType,
		[]byte(`[{"op":"remove","path":"/metadata/annotations/cluster.x-k8s.io~1paused"}]`))); err != nil {
		t.Fatal(err)
	}
}
