package main

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/machina-dev/machina/api/infrastructure/v1alpha1"
	"github.com/machina-dev/machina/internal/cloud/api"
)

const floorNS = "default"

// capiFloor is capi-scale's floor: per Machine the Machine (born with its finalizer) and its
// SimMachine created, the SimMachine's finalizer (stored before the launch), providerID and
// status, the Machine's providerID, its Node's annotations, the Machine's status with its
// nodeRef, two events — 10 writes: the ones the scenario's breakdown shows for each Machine
// and the Node patch it does not (sent through the workload cluster's client, which
// MACHINA_DEBUG_WRITES does not wrap; the writes per Machine count it). The scenario's others,
// about 0.1–0.3 per Machine, are MachineSet and Cluster status, a second Machine status write
// and conflicts.
func capiFloor(n int) (result, error) {
	return floorRun(n, floorMix{setup: capiFloorSetup, machine: capiFloorMachine,
		watch: []client.Object{&clusterv1.Machine{}, &infrav1.SimMachine{}, &clusterv1.MachineSet{}}})
}

func capiFloorSetup(ctx context.Context, f *floorEnv) error {
	ms := &clusterv1.MachineSet{ObjectMeta: metav1.ObjectMeta{Name: "bench", Namespace: floorNS},
		Spec: clusterv1.MachineSetSpec{ClusterName: "bench", Replicas: ptr.To[int32](0),
			Selector: metav1.LabelSelector{MatchLabels: map[string]string{"bench": "capi-floor"}},
			Template: clusterv1.MachineTemplateSpec{ObjectMeta: clusterv1.ObjectMeta{Labels: map[string]string{"bench": "capi-floor"}},
				Spec: clusterv1.MachineSpec{ClusterName: "bench", Bootstrap: clusterv1.Bootstrap{DataSecretName: ptr.To("bench-bootstrap")},
					InfrastructureRef: clusterv1.ContractVersionedObjectReference{APIGroup: infrav1.GroupVersion.Group, Kind: "SimMachineTemplate", Name: "bench"}}}}}
	return f.createOwner(ctx, ms, clusterv1.GroupVersion.String())
}

// createOwner creates the MachineSet (of apiVersion) the Machines will belong to.
func (f *floorEnv) createOwner(ctx context.Context, ms client.Object, apiVersion string) error {
	if err := f.client.Create(ctx, ms); err != nil {
		return err
	}
	f.owner = metav1.OwnerReference{APIVersion: apiVersion, Kind: "MachineSet", Name: ms.GetName(), UID: ms.GetUID(),
		Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}
	return nil
}

func capiFloorMachine(ctx context.Context, f *floorEnv, i int) error {
	name := fmt.Sprintf("bench-%05d", i)
	m := &clusterv1.Machine{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: floorNS, Finalizers: []string{clusterv1.MachineFinalizer},
			Labels:          map[string]string{"bench": "capi-floor", clusterv1.ClusterNameLabel: "bench", clusterv1.MachineSetNameLabel: "bench"},
			Annotations:     map[string]string{"machineset.cluster.x-k8s.io/template-hash": "5c7b9d8f6"},
			OwnerReferences: []metav1.OwnerReference{f.owner}},
		Spec: clusterv1.MachineSpec{ClusterName: "bench", FailureDomain: "sim-east-1a",
			Bootstrap: clusterv1.Bootstrap{DataSecretName: ptr.To("bench-bootstrap")},
			InfrastructureRef: clusterv1.ContractVersionedObjectReference{APIGroup: infrav1.GroupVersion.Group,
				Kind: "SimMachine", Name: name}},
	}
	if err := f.writer.Create(ctx, m); err != nil {
		return fmt.Errorf("creating Machine %s: %w", name, err)
	}
	sm := &infrav1.SimMachine{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: floorNS,
			Labels: map[string]string{clusterv1.ClusterNameLabel: "bench"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: clusterv1.GroupVersion.String(), Kind: "Machine", Name: name, UID: m.UID,
				Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}}},
		Spec: infrav1.SimMachineSpec{InstanceSpec: infrav1.InstanceSpec{InstanceType: "s1.small", Image: "sim-rhcos-9"}},
	}
	if err := f.writer.Create(ctx, sm); err != nil {
		return fmt.Errorf("creating SimMachine %s: %w", name, err)
	}
	before := sm.DeepCopy()
	sm.Finalizers = []string{infrav1.SimMachineFinalizer} // stored before the launch
	if err := f.writer.Patch(ctx, sm, client.MergeFrom(before)); err != nil {
		return fmt.Errorf("SimMachine %s finalizer: %w", name, err)
	}
	inst, err := f.launch(ctx, i)
	if err != nil {
		return err
	}
	before = sm.DeepCopy()
	sm.Spec.ProviderID = inst.ProviderID
	if err := f.writer.Patch(ctx, sm, client.MergeFrom(before)); err != nil {
		return fmt.Errorf("SimMachine %s providerID: %w", name, err)
	}
	before = sm.DeepCopy()
	sm.Status = simMachineStatus(inst)
	if err := f.writer.Status().Patch(ctx, sm, client.MergeFrom(before)); err != nil {
		return fmt.Errorf("SimMachine %s status: %w", name, err)
	}
	mBefore := m.DeepCopy()
	m.Spec.ProviderID = inst.ProviderID
	if err := f.writer.Patch(ctx, m, client.MergeFrom(mBefore)); err != nil {
		return fmt.Errorf("machine %s providerID: %w", name, err)
	}
	// The Machine controller's one write to the Node once it finds it (labels from the Machine:
	// none here), not holding a worker while the kubelet registers it.
	f.later.Go(func() error { // outlives the worker's context, which ends with the last worker
		return f.annotateNode(context.WithoutCancel(ctx), inst.Hostname, map[string]string{"cluster.x-k8s.io/cluster-name": "bench",
			"cluster.x-k8s.io/cluster-namespace": floorNS, "cluster.x-k8s.io/machine": name, clusterv1.TaintsFromMachineAnnotation: ""})
	})
	mBefore = m.DeepCopy()
	m.Status = capiMachineStatus(inst, m.Generation)
	if err := f.writer.Status().Patch(ctx, m, client.MergeFrom(mBefore)); err != nil {
		return fmt.Errorf("machine %s status: %w", name, err)
	}
	if err := f.event(ctx, sm, "SimMachine", "InstanceCreated", "Created instance "+inst.InstanceID+" in sim-east-1a"); err != nil {
		return err
	}
	return f.event(ctx, m, "Machine", "SuccessfulSetNodeRef", "Node "+inst.Hostname+" of SimMachine "+name+" ("+inst.ProviderID+")")
}

func simMachineStatus(inst *api.Instance) infrav1.SimMachineStatus {
	return infrav1.SimMachineStatus{Initialization: infrav1.Initialization{Provisioned: ptr.To(true)},
		InstanceID: inst.InstanceID, InstanceState: string(inst.State), FailureDomain: inst.Zone,
		Addresses: []clusterv1.MachineAddress{{Type: clusterv1.MachineInternalIP, Address: inst.PrivateIP},
			{Type: clusterv1.MachineInternalDNS, Address: inst.Hostname}, {Type: clusterv1.MachineHostName, Address: inst.Hostname}},
		Conditions: []metav1.Condition{{Type: "Ready", Status: metav1.ConditionTrue, Reason: "InstanceRunning", LastTransitionTime: metav1.Now()},
			{Type: "Paused", Status: metav1.ConditionFalse, Reason: "NotPaused", LastTransitionTime: metav1.Now()}}}
}

// capiMachineStatus is a Running Machine's status as machina's Machine controller writes it.
func capiMachineStatus(inst *api.Instance, generation int64) clusterv1.MachineStatus {
	now := metav1.Now()
	var conds []metav1.Condition
	for _, t := range []string{"Available", "Ready", "UpToDate", "BootstrapConfigReady", "InfrastructureReady", "NodeReady", "NodeHealthy"} {
		conds = append(conds, metav1.Condition{Type: t, Status: metav1.ConditionTrue, Reason: t, ObservedGeneration: generation, LastTransitionTime: now})
	}
	for _, t := range []string{"Deleting", "Paused"} {
		conds = append(conds, metav1.Condition{Type: t, Status: metav1.ConditionFalse, Reason: "Not" + t, ObservedGeneration: generation, LastTransitionTime: now})
	}
	return clusterv1.MachineStatus{Phase: string(clusterv1.MachinePhaseRunning), NodeRef: clusterv1.MachineNodeReference{Name: inst.Hostname},
		Initialization: clusterv1.MachineInitializationStatus{InfrastructureProvisioned: ptr.To(true), BootstrapDataSecretCreated: ptr.To(true)},
		Addresses:      []clusterv1.MachineAddress{{Type: clusterv1.MachineInternalIP, Address: inst.PrivateIP}, {Type: clusterv1.MachineHostName, Address: inst.Hostname}},
		NodeInfo:       &corev1.NodeSystemInfo{KubeletVersion: "v1.34.0", OperatingSystem: "linux", Architecture: "amd64"},
		Conditions:     conds, ObservedGeneration: generation}
}

// mapiFloor is mapi-scale's floor: per Machine the Machine created (with its finalizer),
// its providerID, its status twice (Provisioned, then Running with the nodeRef), the Node's
// Machine annotation and one event — 6 writes, as the scenario's (which adds about 0.35 of
// MachineSet status and conflicts).
func mapiFloor(n int) (result, error) {
	return floorRun(n, floorMix{setup: mapiFloorSetup, machine: mapiFloorMachine,
		watch: []client.Object{&machinev1beta1.Machine{}, &machinev1beta1.MachineSet{}}})
}

func mapiFloorSetup(ctx context.Context, f *floorEnv) error {
	ms, err := simMachineSet(ctx, f.client)
	if err != nil {
		return err
	}
	return f.createOwner(ctx, ms, machinev1beta1.GroupVersion.String())
}

func mapiFloorMachine(ctx context.Context, f *floorEnv, i int) error {
	name := fmt.Sprintf("bench-%05d", i)
	ps, _ := json.Marshal(&infrav1.SimMachineProviderSpec{
		TypeMeta: metav1.TypeMeta{APIVersion: infrav1.GroupVersion.String(), Kind: "SimMachineProviderSpec"},
		Region:   "sim-east-1", Zone: "sim-east-1a", InstanceType: "s1.small", Image: "sim-rhcos-9"})
	m := &machinev1beta1.Machine{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: floorNS, Finalizers: []string{machinev1beta1.MachineFinalizer},
			Labels:          map[string]string{"bench": "mapi-scale", "machine.openshift.io/cluster-api-machineset": "bench"},
			OwnerReferences: []metav1.OwnerReference{f.owner}},
		Spec: machinev1beta1.MachineSpec{ProviderSpec: machinev1beta1.ProviderSpec{Value: &runtime.RawExtension{Raw: ps}}},
	}
	if err := f.writer.Create(ctx, m); err != nil {
		return fmt.Errorf("creating Machine %s: %w", name, err)
	}
	inst, err := f.launch(ctx, i)
	if err != nil {
		return err
	}
	before := m.DeepCopy()
	m.Spec.ProviderID = ptr.To(inst.ProviderID)
	m.Annotations = map[string]string{"machine.openshift.io/instance-state": string(inst.State)}
	if err := f.writer.Patch(ctx, m, client.MergeFrom(before)); err != nil {
		return fmt.Errorf("machine %s providerID: %w", name, err)
	}
	for _, phase := range []string{machinev1beta1.PhaseProvisioned, machinev1beta1.PhaseRunning} {
		before = m.DeepCopy()
		m.Status = mapiMachineStatus(inst, phase)
		if err := f.writer.Status().Patch(ctx, m, client.MergeFrom(before)); err != nil {
			return fmt.Errorf("machine %s status %s: %w", name, phase, err)
		}
	}
	if err := f.annotateNode(ctx, inst.Hostname, map[string]string{"machine.openshift.io/machine": floorNS + "/" + name}); err != nil {
		return err
	}
	return f.event(ctx, m, "Machine", "Created", "Created Machine "+name)
}

// mapiMachineStatus is a Machine API Machine's status in phase as the simulated actuator
// and the Machine controller write it.
func mapiMachineStatus(inst *api.Instance, phase string) machinev1beta1.MachineStatus {
	now := metav1.Now()
	st := machinev1beta1.MachineStatus{Phase: ptr.To(phase), LastUpdated: &now,
		Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: inst.PrivateIP}, {Type: corev1.NodeInternalDNS, Address: inst.Hostname},
			{Type: corev1.NodeHostName, Address: inst.Hostname}},
		Conditions: []machinev1beta1.Condition{{Type: "InstanceExists", Status: corev1.ConditionTrue, LastTransitionTime: now},
			{Type: "Paused", Status: corev1.ConditionFalse, Reason: "AuthoritativeAPIMachineAPI", LastTransitionTime: now}}}
	if phase == machinev1beta1.PhaseRunning {
		st.NodeRef = &corev1.ObjectReference{Kind: "Node", Name: inst.Hostname}
	}
	return st
}

// annotateNode waits (from the informer, not the apiserver) until the kubelet registered
// the Node and writes the annotations a Machine controller writes there (one merge patch).
func (f *floorEnv) annotateNode(ctx context.Context, name string, annotations map[string]string) error {
	node := &corev1.Node{}
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 5*time.Minute, true, func(ctx context.Context) (bool, error) {
		return f.watched.Get(ctx, client.ObjectKey{Name: name}, node) == nil, nil
	})
	if err != nil {
		return fmt.Errorf("node %s did not register: %w", name, err)
	}
	body, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": annotations}})
	if err != nil {
		return err
	}
	return f.writer.Patch(ctx, node, client.RawPatch(types.MergePatchType, body))
}
