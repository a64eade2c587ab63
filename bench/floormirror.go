package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/machina-dev/machina/api/infrastructure/v1alpha1"
	"github.com/machina-dev/machina/internal/authority"
	"github.com/machina-dev/machina/internal/cloud/api"
	"github.com/machina-dev/machina/internal/demo"
)

// mirrorFloor is mirror's floor: n Machine API Machines Running on their instances before
// the clock starts (their Nodes registered and Ready), then per Machine the writes of a
// first mirroring as the scenario's breakdown lists them — the Cluster API Machine and its
// SimMachine created (paused, the Machine with the sync finalizer, the SimMachine marked as
// a mirror), the sync finalizer on the Machine API Machine and its Synchronized status, the
// mirrored status of the Cluster API Machine, the paused controllers' Paused=True on the
// Machine and on the SimMachine, one MirrorCreated event: 8 (the scenario adds its
// MachineSets' mirrors, one pair per 50 Machines, and conflicts).
func mirrorFloor(n int) (result, error) {
	return floorRun(n, floorMix{setup: mirrorFloorSetup, before: mirrorFloorBefore, machine: mirrorFloorMachine,
		watch: []client.Object{&machinev1beta1.Machine{}, &machinev1beta1.MachineSet{}, &clusterv1.Machine{},
			&clusterv1.MachineSet{}, &infrav1.SimMachine{}}})
}

// mirrorFloorSetup seeds the cluster objects mirror's Machines refer to (namespaces,
// Infrastructure, Cluster, bootstrap data), as the scenario does.
func mirrorFloorSetup(ctx context.Context, f *floorEnv) error {
	kc, err := os.ReadFile(f.lab.KubeconfigPath)
	if err != nil {
		return err
	}
	return demo.EnsureCluster(ctx, f.client, demo.Cluster{Name: "bench", Region: "sim-east-1",
		MachineAPINamespace: mapiNS, ClusterAPINamespace: capiNS, Kubeconfig: kc})
}

func mirrorFloorName(i int) string { return fmt.Sprintf("bench-%05d", i) }

// mirrorFloorBefore launches Machine i's instance and stores its Running Machine API
// Machine, as the Machine API controllers left it before the sync was installed, in f.state.
func mirrorFloorBefore(ctx context.Context, f *floorEnv, i int) error {
	name := mirrorFloorName(i)
	inst, err := f.launch(ctx, i)
	if err != nil {
		return err
	}
	ps, _ := json.Marshal(&infrav1.SimMachineProviderSpec{
		TypeMeta: metav1.TypeMeta{APIVersion: infrav1.GroupVersion.String(), Kind: "SimMachineProviderSpec"},
		Region:   "sim-east-1", Zone: "sim-east-1a", InstanceType: "s1.small", Image: "sim-rhcos-9"})
	m := &machinev1beta1.Machine{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: mapiNS, Finalizers: []string{machinev1beta1.MachineFinalizer},
			Labels:      map[string]string{machinev1beta1.MachineClusterIDLabel: "bench", "machine.openshift.io/cluster-api-machineset": "bench"},
			Annotations: map[string]string{"machine.openshift.io/instance-state": string(inst.State)}},
		Spec: machinev1beta1.MachineSpec{ProviderID: ptr.To(inst.ProviderID),
			ProviderSpec: machinev1beta1.ProviderSpec{Value: &runtime.RawExtension{Raw: ps}}},
	}
	if err := f.writer.Create(ctx, m); err != nil {
		return fmt.Errorf("creating Machine %s: %w", name, err)
	}
	before := m.DeepCopy()
	m.Status = mapiMachineStatus(inst, machinev1beta1.PhaseRunning)
	m.Status.AuthoritativeAPI = machinev1beta1.MachineAuthorityMachineAPI
	if err := f.writer.Status().Patch(ctx, m, client.MergeFrom(before)); err != nil {
		return fmt.Errorf("machine %s status: %w", name, err)
	}
	f.state[i] = m
	return nil
}

// mirrorPair is one Machine's two copies and its SimMachine.
type mirrorPair struct {
	mapi *machinev1beta1.Machine
	capi *clusterv1.Machine
	sim  *infrav1.SimMachine
}

// mirrorFloorMachine sends Machine i's eight mirroring writes.
func mirrorFloorMachine(ctx context.Context, f *floorEnv, i int) error {
	_, err := mirrorMachine(ctx, f, i)
	return err
}

// mirrorMachine sends Machine i's eight mirroring writes and returns the pair as stored.
func mirrorMachine(ctx context.Context, f *floorEnv, i int) (*mirrorPair, error) {
	name := mirrorFloorName(i)
	m := f.state[i].(*machinev1beta1.Machine)
	providerID := ptr.Deref(m.Spec.ProviderID, "")
	paused := map[string]string{clusterv1.PausedAnnotation: ""}
	cm := &clusterv1.Machine{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: capiNS, Annotations: paused, Finalizers: []string{authority.SyncFinalizer},
			Labels: map[string]string{clusterv1.ClusterNameLabel: "bench", clusterv1.MachineSetNameLabel: "bench"}},
		Spec: clusterv1.MachineSpec{ClusterName: "bench", FailureDomain: "sim-east-1a", ProviderID: providerID,
			Bootstrap:         clusterv1.Bootstrap{DataSecretName: ptr.To("worker-user-data")},
			InfrastructureRef: clusterv1.ContractVersionedObjectReference{APIGroup: infrav1.GroupVersion.Group, Kind: "SimMachine", Name: name}},
	}
	if err := f.writer.Create(ctx, cm); err != nil {
		return nil, fmt.Errorf("creating Machine %s/%s: %w", capiNS, name, err)
	}
	sm := &infrav1.SimMachine{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: capiNS, Labels: map[string]string{clusterv1.ClusterNameLabel: "bench"},
			Annotations: map[string]string{clusterv1.PausedAnnotation: "", authority.MirrorOfAnnotation: "Machine/" + name},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: clusterv1.GroupVersion.String(), Kind: "Machine", Name: name, UID: cm.UID,
				Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}}},
		Spec: infrav1.SimMachineSpec{ProviderID: providerID, InstanceSpec: infrav1.InstanceSpec{InstanceType: "s1.small", Image: "sim-rhcos-9"}},
	}
	if err := f.writer.Create(ctx, sm); err != nil {
		return nil, fmt.Errorf("creating SimMachine %s: %w", name, err)
	}
	before := m.DeepCopy()
	m.Finalizers = append(m.Finalizers, authority.SyncFinalizer)
	if err := f.writer.Patch(ctx, m, client.MergeFrom(before)); err != nil {
		return nil, fmt.Errorf("machine %s sync finalizer: %w", name, err)
	}
	before = m.DeepCopy()
	m.Status.SynchronizedGeneration = m.Generation
	m.Status.SynchronizedAPI = machinev1beta1.MachineAPISynchronized
	m.Status.Conditions = append(m.Status.Conditions, machinev1beta1.Condition{Type: authority.SynchronizedCondition,
		Status: corev1.ConditionTrue, Reason: authority.SynchronizedReason, LastTransitionTime: metav1.Now()})
	if err := f.writer.Status().Patch(ctx, m, client.MergeFrom(before)); err != nil {
		return nil, fmt.Errorf("machine %s Synchronized: %w", name, err)
	}
	mirrored := capiMachineStatus(&api.Instance{Hostname: m.Status.NodeRef.Name, PrivateIP: addressOf(m)}, cm.Generation)
	cBefore := cm.DeepCopy()
	cm.Status = mirrored
	if err := f.writer.Status().Patch(ctx, cm, client.MergeFrom(cBefore)); err != nil {
		return nil, fmt.Errorf("machine %s/%s mirrored status: %w", capiNS, name, err)
	}
	cBefore = cm.DeepCopy()
	setPaused(&cm.Status.Conditions, cm.Generation)
	if err := f.writer.Status().Patch(ctx, cm, client.MergeFrom(cBefore)); err != nil {
		return nil, fmt.Errorf("machine %s/%s Paused: %w", capiNS, name, err)
	}
	sBefore := sm.DeepCopy()
	setPaused(&sm.Status.Conditions, sm.Generation)
	if err := f.writer.Status().Patch(ctx, sm, client.MergeFrom(sBefore)); err != nil {
		return nil, fmt.Errorf("SimMachine %s Paused: %w", name, err)
	}
	if err := f.event(ctx, m, "Machine", "MirrorCreated", "Created the Cluster API mirror "+capiNS+"/"+name); err != nil {
		return nil, err
	}
	return &mirrorPair{mapi: m, capi: cm, sim: sm}, nil
}

// setPaused sets the Paused=True condition a paused Cluster API controller reports.
func setPaused(conds *[]metav1.Condition, generation int64) {
	for i := range *conds {
		if (*conds)[i].Type == clusterv1.PausedCondition {
			*conds = append((*conds)[:i], (*conds)[i+1:]...)
			break
		}
	}
	*conds = append(*conds, metav1.Condition{Type: clusterv1.PausedCondition, Status: metav1.ConditionTrue, Reason: clusterv1.PausedReason,
		ObservedGeneration: generation, LastTransitionTime: metav1.Now()})
}
