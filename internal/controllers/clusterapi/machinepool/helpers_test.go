package machinepool_test

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/machina-dev/machina/api/infrastructure/v1alpha1"
	"github.com/machina-dev/machina/internal/cloud/api"
	"github.com/machina-dev/machina/internal/controllers/clusterapi/internal/capitest"
	"github.com/machina-dev/machina/internal/testenv"
)

const (
	ns            = capitest.NS
	clusterName   = "pools"
	bootstrapData = "pool-bootstrap"
)

// newCluster creates the pools' bootstrap data Secret and their Cluster, and waits until the
// Cluster's infrastructure is provisioned.
func newCluster(t *testing.T, e *testenv.Env) {
	t.Helper()
	capitest.NewBootstrapData(t, e, bootstrapData, "#!/bin/sh\necho shared by the pool\n")
	capitest.NewCluster(t, e, clusterName, false)
}

// newPool creates a SimMachinePool and its MachinePool.
func newPool(t *testing.T, e *testenv.Env, name string, replicas int32, mutate func(*infrav1.SimMachinePool, *clusterv1.MachinePool)) {
	t.Helper()
	smp := &infrav1.SimMachinePool{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: infrav1.SimMachinePoolSpec{Template: infrav1.InstanceSpec{InstanceType: "s1.small", Image: "sim-rhcos-9"}}}
	mp := &clusterv1.MachinePool{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: clusterv1.MachinePoolSpec{ClusterName: clusterName, Replicas: ptr.To(replicas),
			Template: clusterv1.MachineTemplateSpec{
				ObjectMeta: clusterv1.ObjectMeta{Labels: map[string]string{"pool": name}},
				Spec: clusterv1.MachineSpec{ClusterName: clusterName,
					Bootstrap: clusterv1.Bootstrap{DataSecretName: ptr.To(bootstrapData)},
					InfrastructureRef: clusterv1.ContractVersionedObjectReference{
						APIGroup: infrav1.GroupVersion.Group, Kind: "SimMachinePool", Name: name}}}}}
	if mutate != nil {
		mutate(smp, mp)
	}
	for _, o := range []client.Object{smp, mp} {
		if err := e.Client.Create(context.Background(), o); err != nil {
			t.Fatal(err)
		}
	}
}

// poolMachines lists the Machines labelled as the pool's, sorted by name.
func poolMachines(ctx context.Context, e *testenv.Env, pool string) ([]clusterv1.Machine, error) {
	var list clusterv1.MachineList
	err := e.Client.List(ctx, &list, client.InNamespace(ns), client.MatchingLabels{
		clusterv1.ClusterNameLabel: clusterName, clusterv1.MachinePoolNameLabel: pool})
	sort.Slice(list.Items, func(i, j int) bool { return list.Items[i].Name < list.Items[j].Name })
	return list.Items, err
}

func running(m *clusterv1.Machine) bool {
	return m.DeletionTimestamp.IsZero() && m.Status.Phase == string(clusterv1.MachinePhaseRunning) &&
		meta.IsStatusConditionTrue(m.Status.Conditions, clusterv1.MachineReadyCondition)
}

// waitPool waits until the pool has exactly n Machines, all Running and Ready, and the
// MachinePool reports n ready replicas; it returns the Machines.
func waitPool(t *testing.T, e *testenv.Env, pool string, n int, timeout time.Duration) []clusterv1.Machine {
	t.Helper()
	var ms []clusterv1.Machine
	e.Eventually(timeout, fmt.Sprintf("pool %s: %d Machines running", pool, n), func(ctx context.Context) (bool, string, error) {
		var err error
		if ms, err = poolMachines(ctx, e, pool); err != nil {
			return false, err.Error(), nil
		}
		mp := &clusterv1.MachinePool{}
		if err := e.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: pool}, mp); err != nil {
			return false, err.Error(), nil
		}
		ok := len(ms) == n && ptr.Deref(mp.Status.ReadyReplicas, -1) == int32(n) && ptr.Deref(mp.Status.Replicas, -1) == int32(n)
		for i := range ms {
			ok = ok && running(&ms[i])
		}
		return ok, describe(ms, mp), nil
	})
	return ms
}

func describe(ms []clusterv1.Machine, mp *clusterv1.MachinePool) string {
	var parts []string
	for _, m := range ms {
		s := m.Name + ":" + m.Status.Phase
		if !m.DeletionTimestamp.IsZero() {
			s += "(deleting " + capitest.Condition(m.Status.Conditions, clusterv1.MachineDeletingCondition) + ")"
		} else if !running(&m) {
			s += "(" + capitest.Condition(m.Status.Conditions, clusterv1.MachineReadyCondition) + ")"
		}
		parts = append(parts, s)
	}
	return fmt.Sprintf("machines [%s]; pool phase %s replicas %d ready %d %s", strings.Join(parts, ", "), mp.Status.Phase,
		ptr.Deref(mp.Status.Replicas, -1), ptr.Deref(mp.Status.ReadyReplicas, -1), capitest.Conds(mp.Status.Conditions))
}

// group returns the pool's scaling group.
func group(t *testing.T, e *testenv.Env, pool string) *api.ScalingGroup {
	t.Helper()
	smp := &infrav1.SimMachinePool{}
	if err := e.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: pool}, smp); err != nil {
		t.Fatal(err)
	}
	g, err := e.Cloud.GetScalingGroup(context.Background(), smp.Status.GroupID)
	if err != nil {
		t.Fatalf("scaling group %q of %s: %v", smp.Status.GroupID, pool, err)
	}
	return g
}

// instanceOf returns the cloud instance behind a provider ID.
func instanceOf(t *testing.T, e *testenv.Env, providerID string) api.Instance {
	t.Helper()
	pid, err := api.ParseProviderID(providerID)
	if err != nil {
		t.Fatal(err)
	}
	inst, err := e.Cloud.GetInstance(context.Background(), pid.InstanceID)
	if err != nil {
		t.Fatal(err)
	}
	return *inst
}

func setReplicas(t *testing.T, e *testenv.Env, pool string, n int32) {
	t.Helper()
	mp := &clusterv1.MachinePool{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: pool}}
	capitest.Patch(t, e, mp, func(mp *clusterv1.MachinePool) { mp.Spec.Replicas = ptr.To(n) })
}

func names(ms []clusterv1.Machine) map[string]bool {
	out := map[string]bool{}
	for _, m := range ms {
		out[m.Name] = true
	}
	return out
}
