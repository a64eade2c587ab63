package machinepool_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/machina-dev/machina/api/infrastructure/v1alpha1"
	"github.com/machina-dev/machina/internal/cloud/api"
	"github.com/machina-dev/machina/internal/controllers/clusterapi/internal/capitest"
	"github.com/machina-dev/machina/internal/controllers/sim/simmachinepool"
)

// testRollingWithoutSurge: with maxSurge 0 the group never grows past the desired count;
// outdated replicas are replaced one at a time.
func testRollingWithoutSurge(t *testing.T) {
	e := env.For(t)
	ctx := context.Background()
	newPool(t, e, "r0", 2, func(smp *infrav1.SimMachinePool, _ *clusterv1.MachinePool) {
		smp.Spec.MaxSurge = ptr.To(intstr.FromInt32(0))
	})
	waitPool(t, e, "r0", 2, 90*time.Second)
	smp := &infrav1.SimMachinePool{}
	if err := e.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "r0"}, smp); err != nil {
		t.Fatal(err)
	}
	base := smp.DeepCopy()
	smp.Spec.Template.Image = "sim-rhcos-9"
	smp.Spec.Template.Tags = map[string]string{"rollout": "2"}
	if err := e.Client.Patch(ctx, smp, client.MergeFrom(base)); err != nil {
		t.Fatal(err)
	}
	maxDesired := 0
	e.Eventually(150*time.Second, "rolled out without surge", func(ctx context.Context) (bool, string, error) {
		g := group(t, e, "r0")
		maxDesired = max(maxDesired, g.DesiredCapacity, len(g.Instances))
		ms, err := poolMachines(ctx, e, "r0")
		if err != nil {
			return false, err.Error(), nil
		}
		ok := g.LaunchTemplateVersion == 2 && len(g.Instances) == 2 && len(ms) == 2
		for _, in := range g.Instances {
			ok = ok && in.LaunchTemplateVersion == 2
		}
		for i := range ms {
			ok = ok && running(&ms[i]) && instanceOf(t, e, ms[i].Spec.ProviderID).Tags["rollout"] == "2"
		}
		return ok, fmt.Sprintf("group v%d desired %d members %v", g.LaunchTemplateVersion, g.DesiredCapacity, g.Instances), nil
	})
	if maxDesired > 2 {
		t.Errorf("the group grew to %d with maxSurge 0", maxDesired)
	}
}

// testRestartDuringScaleDown: the pool's state lives in the cluster (the pre-terminate hook
// on the Machine it removes), so a controller restart in the middle of a scale down, while a
// PodDisruptionBudget holds the drain, still ends with a drained Node and a smaller group.
func testRestartDuringScaleDown(t *testing.T) {
	e := env.For(t)
	ctx := context.Background()
	newPool(t, e, "rs", 2, nil)
	ms := waitPool(t, e, "rs", 2, 90*time.Second)
	victim := ms[0]
	app := map[string]string{"app": "rs"}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "rs-web", Namespace: ns, Labels: app},
		Spec: corev1.PodSpec{NodeName: victim.Status.NodeRef.Name, Containers: []corev1.Container{{Name: "c", Image: "registry.invalid/app"}}}}
	pdb := &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Name: "rs", Namespace: ns},
		Spec: policyv1.PodDisruptionBudgetSpec{MinAvailable: ptr.To(intstr.FromInt32(1)), Selector: &metav1.LabelSelector{MatchLabels: app}}}
	for _, o := range []client.Object{pod, pdb} {
		if err := e.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	e.Eventually(60*time.Second, "PDB computed", func(ctx context.Context) (bool, string, error) {
		if err := e.Client.Get(ctx, client.ObjectKeyFromObject(pdb), pdb); err != nil {
			return false, err.Error(), nil
		}
		return pdb.Status.ExpectedPods == 1 && pdb.Status.ObservedGeneration == pdb.Generation, fmt.Sprintf("%+v", pdb.Status), nil
	})
	base := victim.DeepCopy()
	victim.Annotations = map[string]string{clusterv1.DeleteMachineAnnotation: ""}
	for k, v := range base.Annotations {
		victim.Annotations[k] = v
	}
	if err := e.Client.Patch(ctx, &victim, client.MergeFrom(base)); err != nil {
		t.Fatal(err)
	}
	setReplicas(t, e, "rs", 1)
	e.Eventually(60*time.Second, "drain of the removed Machine blocked", func(ctx context.Context) (bool, string, error) {
		m := &clusterv1.Machine{}
		if err := e.Client.Get(ctx, client.ObjectKeyFromObject(&victim), m); err != nil {
			return false, err.Error(), nil
		}
		c := capitest.Condition(m.Status.Conditions, clusterv1.MachineDeletingCondition)
		return m.Annotations[simmachinepool.HookAnnotation] != "" && strings.Contains(c, "cannot be evicted"), c, nil
	})
	e.StopManager()
	if err := e.Client.Delete(ctx, pdb); err != nil {
		t.Fatal(err)
	}
	launched := e.Server.Stats().InstancesLaunchedByGroups
	e.StartManager()
	capitest.WaitGone(t, e, &victim, 60*time.Second)
	after := waitPool(t, e, "rs", 1, 60*time.Second)
	if after[0].Name != ms[1].Name {
		t.Errorf("kept %s, want %s", after[0].Name, ms[1].Name)
	}
	if g := group(t, e, "rs"); g.DesiredCapacity != 1 || len(g.Instances) != 1 {
		t.Errorf("group desired %d members %d", g.DesiredCapacity, len(g.Instances))
	}
	if st := instanceOf(t, e, victim.Spec.ProviderID).State; st != api.StateTerminated && st != api.StateShuttingDown {
		t.Errorf("instance of the removed Machine is %s", st)
	}
	if n := e.Server.Stats().InstancesLaunchedByGroups - launched; n != 0 {
		t.Errorf("%d instance(s) launched by a scale down", n)
	}
}
