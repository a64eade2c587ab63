package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/machina-dev/machina/api/infrastructure/v1alpha1"
)

// capiRollout brings a MachineDeployment of n Machines up, then changes its template and
// times the rolling update (maxSurge 10%, maxUnavailable 0) until every Machine has been
// replaced by one that is Available. Writes are counted from the template change on, per
// replaced Machine.
func capiRollout(n int) (result, error) {
	e, err := startEnv("clusterapi,sim")
	if err != nil {
		return result{}, err
	}
	defer e.stop()
	ctx := context.Background()
	const ns, name = "default", "bench"
	if err := rolloutCluster(ctx, e, ns, name); err != nil {
		return result{}, err
	}
	md := rolloutDeployment(ns, name, n)
	if err := e.client.Create(ctx, md); err != nil {
		return result{}, err
	}
	old, err := waitRollout(ctx, e, md, n, nil, "up")
	if err != nil {
		return result{}, err
	}
	time.Sleep(2 * time.Second) // let the manager settle
	w0, err := e.managerWrites()
	if err != nil {
		return result{}, err
	}
	k0 := e.kubeletWrite.Load()
	logStart := logSize(e)

	start := time.Now()
	base := md.DeepCopy()
	md.Spec.Template.Spec.InfrastructureRef.Name = name + "-b"
	if err := e.client.Patch(ctx, md, client.MergeFrom(base)); err != nil {
		return result{}, err
	}
	if _, err := waitRollout(ctx, e, md, n, old, "replaced"); err != nil {
		return result{}, err
	}
	elapsed := time.Since(start)
	time.Sleep(2 * time.Second) // writes that follow the last replacement (old MachineSet deletion, status) count too
	w1, err := e.managerWrites()
	if err != nil {
		return result{}, err
	}
	return result{N: n, Seconds: elapsed.Seconds(), ManagerWrites: w1 - w0, KubeletWrites: e.kubeletWrite.Load() - k0,
		ManagerPeakRSSMiB: e.managerPeakRSS(), Extra: writeBreakdown(e, logStart, n)}, nil
}

// rolloutCluster creates a provisioned Cluster (SimCluster, kubeconfig Secret pointing at the
// lab), the bootstrap data and two SimMachineTemplates, <name>-a and <name>-b.
func rolloutCluster(ctx context.Context, e *env, ns, name string) error {
	kubeconfig, err := os.ReadFile(e.lab.KubeconfigPath)
	if err != nil {
		return err
	}
	objs := simClusterObjects(ns, name, kubeconfig)
	for suffix, instanceType := range map[string]string{"-a": "s1.small", "-b": "s1.medium"} {
		objs = append(objs, &infrav1.SimMachineTemplate{ObjectMeta: metav1.ObjectMeta{Name: name + suffix, Namespace: ns},
			Spec: infrav1.SimMachineTemplateSpec{Template: infrav1.SimMachineTemplateResource{
				Spec: infrav1.SimMachineSpec{InstanceSpec: infrav1.InstanceSpec{InstanceType: instanceType, Image: "sim-rhcos-9"}}}}})
	}
	for _, o := range objs {
		if err := e.client.Create(ctx, o); err != nil {
			return err
		}
	}
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(250 * time.Millisecond) {
		cl := &clusterv1.Cluster{}
		if err := e.client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, cl); err != nil {
			return err
		}
		if ptr.Deref(cl.Status.Initialization.InfrastructureProvisioned, false) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the Cluster's infrastructure was not provisioned within a minute")
		}
	}
}

// rolloutDeployment is the benchmark's MachineDeployment: n Machines from <name>-a, rolled
// out with maxSurge 10% and maxUnavailable 0.
func rolloutDeployment(ns, name string, n int) *clusterv1.MachineDeployment {
	labels := map[string]string{"bench": "capi-rollout"}
	surge, unavailable := intstr.FromString("10%"), intstr.FromInt32(0)
	return &clusterv1.MachineDeployment{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: clusterv1.MachineDeploymentSpec{ClusterName: name, Replicas: ptr.To(int32(n)),
			Selector: metav1.LabelSelector{MatchLabels: labels},
			Rollout: clusterv1.MachineDeploymentRolloutSpec{Strategy: clusterv1.MachineDeploymentRolloutStrategy{
				Type:          clusterv1.RollingUpdateMachineDeploymentStrategyType,
				RollingUpdate: clusterv1.MachineDeploymentRolloutStrategyRollingUpdate{MaxSurge: &surge, MaxUnavailable: &unavailable}}},
			Template: clusterv1.MachineTemplateSpec{ObjectMeta: clusterv1.ObjectMeta{Labels: labels},
				Spec: clusterv1.MachineSpec{ClusterName: name, FailureDomain: "sim-east-1a",
					Bootstrap: clusterv1.Bootstrap{DataSecretName: ptr.To("bench-bootstrap")},
					InfrastructureRef: clusterv1.ContractVersionedObjectReference{APIGroup: infrav1.GroupVersion.Group,
						Kind: "SimMachineTemplate", Name: name + "-a"}}}}}
}

// waitRollout waits until the MachineDeployment has exactly n Machines, all Available, none
// being deleted and none of them in old; it returns their UIDs.
func waitRollout(ctx context.Context, e *env, md *clusterv1.MachineDeployment, n int, old map[string]bool, what string) (map[string]bool, error) {
	start, lastReport := time.Now(), time.Now()
	for {
		var list clusterv1.MachineList
		if err := e.watched.List(ctx, &list, client.InNamespace(md.Namespace),
			client.MatchingLabels{clusterv1.MachineDeploymentNameLabel: md.Name}); err != nil {
			return nil, err
		}
		done, uids := 0, map[string]bool{}
		for _, m := range list.Items {
			uids[string(m.UID)] = true
			if !old[string(m.UID)] && m.DeletionTimestamp.IsZero() &&
				meta.IsStatusConditionTrue(m.Status.Conditions, clusterv1.MachineAvailableCondition) {
				done++
			}
		}
		if done == n && len(list.Items) == n {
			return uids, nil
		}
		if time.Since(lastReport) > 10*time.Second {
			fmt.Fprintf(os.Stderr, "bench: %d/%d Machines %s and Available (%d in all) after %s\n", done, n, what, len(list.Items),
				time.Since(start).Round(time.Second))
			lastReport = time.Now()
		}
		if time.Since(start) > 30*time.Minute {
			return nil, fmt.Errorf("only %d of %d Machines %s and Available after 30 minutes", done, n, what)
		}
		time.Sleep(250 * time.Millisecond)
	}
}
