package testenv

import (
	"context"
	"encoding/json"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	infrav1 "github.com/machina-dev/machina/api/infrastructure/v1alpha1"
	"github.com/machina-dev/machina/internal/convert"
	"github.com/machina-dev/machina/internal/provider"
	"github.com/machina-dev/machina/internal/scheme"
)

// The simulated platform as the fake-client tests run it: its region, zones and instance
// types (SimProviderSpec builds the providerSpec naming them).
const (
	SimRegion = "sim-east-1"
	SimZoneA  = "sim-east-1a"
	SimZoneB  = "sim-east-1b"
	SimZoneC  = "sim-east-1c"
	SimLarge  = "s1.large"
	SimXLarge = "s1.xlarge"
)

// SimClusterObjects are the Cluster named name in namespace ns and its SimCluster in
// SimRegion: what the simulated platform's conversion context reads beside the Infrastructure.
func SimClusterObjects(ns, name string) []client.Object {
	return []client.Object{
		&infrav1.SimCluster{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Spec: infrav1.SimClusterSpec{Region: SimRegion}},
		&clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Spec: clusterv1.ClusterSpec{
			InfrastructureRef: clusterv1.ContractVersionedObjectReference{APIGroup: infrav1.GroupName, Kind: "SimCluster", Name: name}}},
	}
}

// SimContext is the simulated platform's conversion context of the cluster objs describe
// (an Infrastructure and SimClusterObjects).
func SimContext(t *testing.T, ns convert.Namespaces, objs ...client.Object) convert.Context {
	t.Helper()
	c := fake.NewClientBuilder().WithScheme(scheme.Scheme).WithObjects(objs...).Build()
	cc, err := provider.Context(context.Background(), c, provider.Sim(), ns)
	if err != nil {
		t.Fatal(err)
	}
	return cc
}

// SimProviders is a provider registry of the simulated platform alone.
func SimProviders(t *testing.T) *provider.Registry {
	t.Helper()
	reg, err := provider.NewRegistry(provider.Sim())
	if err != nil {
		t.Fatal(err)
	}
	return reg
}

// ReadSimProviderSpec reads a simulated Machine's providerSpec value; of names it in the
// failure.
func ReadSimProviderSpec(t *testing.T, v *runtime.RawExtension, of string) infrav1.SimMachineProviderSpec {
	t.Helper()
	var s infrav1.SimMachineProviderSpec
	if v == nil {
		t.Fatalf("%s: no providerSpec value", of)
	}
	if err := json.Unmarshal(v.Raw, &s); err != nil {
		t.Fatalf("%s: providerSpec: %v", of, err)
	}
	return s
}
