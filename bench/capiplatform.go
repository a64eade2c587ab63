package main

import (
	"context"
	"fmt"
	"os"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/machina-dev/machina/api/infrastructure/v1alpha1"
	"github.com/machina-dev/machina/internal/controllers/clusterapi/remote"
	"github.com/machina-dev/machina/internal/convert"
	"github.com/machina-dev/machina/internal/demo"
	"github.com/machina-dev/machina/internal/provider"
	"github.com/machina-dev/machina/internal/userdata"
)

// capiPlatform is what capi-scale needs of a platform.
type capiPlatform struct {
	// groups are the manager's controller groups beside the core's (the platform's
	// provider, when machina runs it); ec2 serves the cloud's EC2 front.
	groups string
	ec2    bool
	// seed creates the Cluster and whatever its Machines need (starting the platform's
	// provider when it is a separate process) and returns the MachineSet to scale, not yet
	// created, at zero replicas.
	seed func(ctx context.Context, e *env) (*clusterv1.MachineSet, error)
	// calls counts the cloud calls so far, by operation; callsLabel names them.
	calls      func(e *env) map[string]int64
	callsLabel string
}

func capiPlatformFor(name string) (capiPlatform, error) {
	switch {
	case name == "sim":
		p := capiPlatform{seed: simCAPISeed, callsLabel: "cloud API calls/M", calls: simCalls}
		if infraProvider == "sim" {
			p.groups = "sim"
		}
		return p, nil
	case name == "aws" && infraProvider == "sim":
		// The upstream CAPA controller is the provider, as OpenShift runs it.
		return capiPlatform{ec2: true, seed: awsCAPISeed, callsLabel: "EC2 calls/M",
			calls: func(e *env) map[string]int64 { return e.cloud.EC2().Calls() }}, nil
	case name == "aws":
		return capiPlatform{}, fmt.Errorf("-provider %s: the AWS platform's provider is CAPA", infraProvider)
	}
	return capiPlatform{}, fmt.Errorf("-platform %q: want sim or aws", name)
}

func simCalls(e *env) map[string]int64 {
	out := map[string]int64{}
	for op, st := range e.cloud.Stats().Operations {
		out[op] = st.Calls
	}
	return out
}

// simCAPISeed is a Cluster of machina's simulated provider (with the kubeconfig Secret that
// points at the lab itself) and a MachineSet of SimMachines.
func simCAPISeed(ctx context.Context, e *env) (*clusterv1.MachineSet, error) {
	const ns, name = "default", "bench"
	kubeconfig, err := os.ReadFile(e.lab.KubeconfigPath)
	if err != nil {
		return nil, err
	}
	labels := map[string]string{"bench": "capi-scale"}
	ms := &clusterv1.MachineSet{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: clusterv1.MachineSetSpec{ClusterName: name, Replicas: ptr.To[int32](0),
			Selector: metav1.LabelSelector{MatchLabels: labels},
			Template: clusterv1.MachineTemplateSpec{ObjectMeta: clusterv1.ObjectMeta{Labels: labels},
				Spec: clusterv1.MachineSpec{ClusterName: name, FailureDomain: "sim-east-1a",
					Bootstrap: clusterv1.Bootstrap{DataSecretName: ptr.To("bench-bootstrap")},
					InfrastructureRef: clusterv1.ContractVersionedObjectReference{APIGroup: infrav1.GroupVersion.Group,
						Kind: "SimMachineTemplate", Name: name}}}}}
	objs := append(simClusterObjects(ns, name, kubeconfig),
		&infrav1.SimMachineTemplate{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			Spec: infrav1.SimMachineTemplateSpec{Template: infrav1.SimMachineTemplateResource{
				Spec: infrav1.SimMachineSpec{InstanceSpec: infrav1.InstanceSpec{InstanceType: "s1.small", Image: "sim-rhcos-9"}}}}})
	for _, o := range objs {
		if err := e.client.Create(ctx, o); err != nil {
			return nil, err
		}
	}
	return ms, nil
}

// awsCAPISeed is migrate's AWS cluster (awsSeed: the upstream CAPA controller, the
// externally managed AWSCluster and the Cluster) with a Cluster API MachineSet and its
// AWSMachineTemplate converted from one of the cluster's worker MachineSets (as the sync
// would make them), whose bootstrap Secret holds the workers' Ignition user data.
func awsCAPISeed(ctx context.Context, e *env) (*clusterv1.MachineSet, error) {
	kubeconfig, err := os.ReadFile(e.lab.KubeconfigPath)
	if err != nil {
		return nil, err
	}
	workerSet, err := awsSeed(ctx, e, kubeconfig)
	if err != nil {
		return nil, err
	}
	cc, err := provider.Context(ctx, e.client, provider.AWS(), convert.Namespaces{MachineAPI: mapiNS, ClusterAPI: capiNS})
	if err != nil {
		return nil, err
	}
	clusterName := cc.ClusterName
	out, _, errs := convert.ToClusterAPIMachineSet(workerSet(clusterName+"-bench", 0, 0), cc)
	if len(errs) > 0 {
		return nil, fmt.Errorf("converting the worker MachineSet: %w", errs.ToAggregate())
	}
	if err := e.client.Create(ctx, out.InfraMachineTemplate); err != nil {
		return nil, err
	}
	if err := userdata.Ensure(ctx, e.client, mapiNS, capiNS, ptr.To(demo.UserDataSecret), clusterName); err != nil {
		return nil, err
	}
	return out.MachineSet, nil
}

// simClusterObjects are a Cluster of machina's simulated provider named name: its
// SimCluster, the kubeconfig Secret pointing at the lab itself and the bootstrap data Secret
// bench-bootstrap its Machines name.
func simClusterObjects(ns, name string, kubeconfig []byte) []client.Object {
	return []client.Object{
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "bench-bootstrap", Namespace: ns},
			Data: map[string][]byte{"value": []byte("#!/bin/sh\n")}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: remote.SecretName(name), Namespace: ns,
			Labels: map[string]string{clusterv1.ClusterNameLabel: name}},
			Type: clusterv1.ClusterSecretType, Data: map[string][]byte{remote.KubeconfigKey: kubeconfig}},
		&infrav1.SimCluster{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			Spec: infrav1.SimClusterSpec{Region: "sim-east-1"}},
		&clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			Spec: clusterv1.ClusterSpec{InfrastructureRef: clusterv1.ContractVersionedObjectReference{
				APIGroup: infrav1.GroupVersion.Group, Kind: "SimCluster", Name: name}}},
	}
}
