package machinepool_test

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/machina-dev/machina/api/infrastructure/v1alpha1"
	"github.com/machina-dev/machina/internal/cloud/api"
	"github.com/machina-dev/machina/internal/controllers/clusterapi/remote"
	"github.com/machina-dev/machina/internal/testenv"
)

const (
	ns            = "default"
	clusterName   = "pools"
	bootstrapData = "pool-bootstrap"
)

// newCluster creates a Cluster with a SimCluster and the kubeconfig Secret pointing at the
// (self-hosted) lab, plus the pools' bootstrap data Secret, and waits until the Cluster's
// infrastructure is provisioned.
func newCluster(t *testing.T, e *testenv.Env) {
	t.Helper()
	ctx := context.Background()
	kubeconfig, err := os.ReadFile(e.Lab.KubeconfigPath)
	if err != nil {
		t.Fatal(err)
	}
	objs := []client.Object{
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: bootstrapData, Namespace: ns},
			Data: map[string][]byte{"value": []byte("#!/bin/sh\necho shared by the pool\n")}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: remote.SecretName(clusterName), Namespace: ns,
			Labels: map[string]string{clusterv1.ClusterNameLabel: clusterName}},
			Type: clusterv1.ClusterSecretType, Data: map[string][]byte{remote.KubeconfigKey: kubeconfig}},
		&infrav1.SimCluster{ObjectMeta: metav1.ObjectMeta{Name: clusterName, Namespace: ns},
			Spec: infrav1.SimClusterSpec{Region: "sim-east-1"}},
		&clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: clusterName, Namespace: ns},
			Spec: clusterv1.ClusterSpec{InfrastructureRef: clusterv1.ContractVersionedObjectReference{
				APIGroup: infrav1.GroupVersion.Group, Kind: "SimCluster", Name: clusterName}}},
	}
	for _, o := range objs {
		if err := e.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	e.Eventually(60*time.Second, "Cluster infrastructure provisioned", func(ctx context.Context) (bool, string, error) {
		cl := &clusterv1.Cluster{}
		if err := e.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: clusterName}, cl); err != nil {
			return false, err.Error(), nil
		}
		return ptr.Deref(cl.Status.Initialization.InfrastructureProvisioned, false), conds(cl.Status.Conditions), nil
	})
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
			s += "(deleting " + condition(m.Status.Conditions, clusterv1.MachineDeletingCondition) + ")"
		} else if !running(&m) {
			s += "(" + condition(m.Status.Conditions, clusterv1.MachineReadyCondition) + ")"
		}
		parts = append(parts, s)
	}
	return fmt.Sprintf("machines [%s]; pool phase %s replicas %d ready %d %s", strings.Join(parts, ", "), mp.Status.Phase,
		ptr.Deref(mp.Status.Replicas, -1), ptr.Deref(mp.Status.ReadyReplicas, -1), conds(mp.Status.Conditions))
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
	mp := &clusterv1.MachinePool{}
	if err := e.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: pool}, mp); err != nil {
		t.Fatal(err)
	}
	base := mp.DeepCopy()
	mp.Spec.Replicas = ptr.To(n)
	if err := e.Client.Patch(context.Background(), mp, client.MergeFrom(base)); err != nil {
		t.Fatal(err)
	}
}

// waitGone waits until the object no longer exists.
func waitGone(t *testing.T, e *testenv.Env, obj client.Object, timeout time.Duration) {
	t.Helper()
	e.Eventually(timeout, fmt.Sprintf("%T %s deleted", obj, obj.GetName()), func(ctx context.Context) (bool, string, error) {
		err := e.Client.Get(ctx, client.ObjectKeyFromObject(obj), obj)
		if apierrors.IsNotFound(err) {
			return true, "", nil
		}
		if err != nil {
			return false, err.Error(), nil
		}
		return false, fmt.Sprintf("finalizers %v", obj.GetFinalizers()), nil
	})
}

func conds(cs []metav1.Condition) string {
	var parts []string
	for _, c := range cs {
		parts = append(parts, fmt.Sprintf("%s=%s/%s: %s", c.Type, c.Status, c.Reason, c.Message))
	}
	return "[" + strings.Join(parts, "; ") + "]"
}

func condition(cs []metav1.Condition, t string) string {
	c := meta.FindStatusCondition(cs, t)
	if c == nil {
		return "<none>"
	}
	return fmt.Sprintf("%s/%s: %s", c.Status, c.Reason, c.Message)
}

func names(ms []clusterv1.Machine) map[string]bool {
	out := map[string]bool{}
	for _, m := range ms {
		out[m.Name] = true
	}
	return out
}
