package config_test

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/machina-dev/machina/internal/lab"
	"github.com/machina-dev/machina/internal/testenv"
)

var fakeMachineGVK = schema.GroupVersionKind{Group: "infrastructure.example.dev", Version: "v1alpha1", Kind: "FakeMachine"}

// A third party's InfraMachine kind: machina's roles name none of its kinds, so the Cluster
// API Machine controller is refused until the provider adds one ClusterRole labelled
// cluster.x-k8s.io/aggregate-to-manager: "true". Nothing else changes.
func testThirdPartyProvider(e *testenv.Env) {
	t, ctx := e.T, context.Background()
	crd := &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "fakemachines." + fakeMachineGVK.Group,
			Labels: map[string]string{"cluster.x-k8s.io/v1beta2": fakeMachineGVK.Version}},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: fakeMachineGVK.Group, Scope: apiextensionsv1.NamespaceScoped,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Kind: "FakeMachine", ListKind: "FakeMachineList",
				Plural: "fakemachines", Singular: "fakemachine"},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{Name: fakeMachineGVK.Version, Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
					Type: "object", XPreserveUnknownFields: ptr.To(true)}}}},
		},
	}
	if err := e.Client.Create(ctx, crd); err != nil {
		t.Fatal(err)
	}
	e.Eventually(30*time.Second, "FakeMachine served", func(ctx context.Context) (bool, string, error) {
		l := &unstructured.UnstructuredList{}
		l.SetGroupVersionKind(fakeMachineGVK.GroupVersion().WithKind("FakeMachineList"))
		err := e.Client.List(ctx, l)
		return err == nil, fmt.Sprint(err), nil
	})
	const ns = "third-party"
	for _, o := range []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}},
		&clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "tp"}, Spec: clusterv1.ClusterSpec{Paused: ptr.To(false)}},
	} {
		if err := e.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	fm := &unstructured.Unstructured{}
	fm.SetGroupVersionKind(fakeMachineGVK)
	fm.SetNamespace(ns)
	fm.SetName("fm1")
	if err := e.Client.Create(ctx, fm); err != nil {
		t.Fatal(err)
	}
	m := &clusterv1.Machine{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "m1"}, Spec: clusterv1.MachineSpec{
		ClusterName: "tp", Bootstrap: clusterv1.Bootstrap{DataSecretName: ptr.To("tp-bootstrap")},
		InfrastructureRef: clusterv1.ContractVersionedObjectReference{APIGroup: fakeMachineGVK.Group, Kind: "FakeMachine", Name: "fm1"},
	}}
	if err := e.Client.Create(ctx, m); err != nil {
		t.Fatal(err)
	}

	// Without a role for FakeMachines the controller cannot read it, and says so.
	e.Eventually(60*time.Second, "the Machine reports it may not read the FakeMachine", func(ctx context.Context) (bool, string, error) {
		if err := e.Client.Get(ctx, client.ObjectKeyFromObject(m), m); err != nil {
			return false, err.Error(), nil
		}
		c := meta.FindStatusCondition(m.Status.Conditions, clusterv1.MachineInfrastructureReadyCondition)
		if c == nil {
			return false, "no InfrastructureReady condition", nil
		}
		return c.Status == metav1.ConditionUnknown && strings.Contains(c.Message, "forbidden"), c.Reason + ": " + c.Message, nil
	})
	denied := false
	for _, d := range e.Lab.ManagerDenials() {
		denied = denied || strings.Contains(d, "/fakemachines")
	}
	if !denied {
		t.Errorf("no RBAC denial for fakemachines recorded: %v", e.Lab.ManagerDenials())
	}
	if err := e.Client.Get(ctx, client.ObjectKeyFromObject(fm), fm); err != nil {
		t.Fatal(err)
	}
	if len(fm.GetOwnerReferences()) != 0 {
		t.Fatalf("the FakeMachine got owners before any role allowed it: %v", fm.GetOwnerReferences())
	}

	// The provider ships its labelled role; the aggregation controller does the rest.
	role := lab.ProviderRole("example-dev-fakemachines", fakeMachineGVK.Group, "fakemachines")
	if err := e.Lab.AggregateToManager(ctx, role); err != nil {
		t.Fatal(err)
	}
	e.Eventually(60*time.Second, "the Machine owns its FakeMachine", func(ctx context.Context) (bool, string, error) {
		if err := e.Client.Get(ctx, client.ObjectKeyFromObject(fm), fm); err != nil {
			return false, err.Error(), nil
		}
		ref := metav1.GetControllerOf(fm)
		return ref != nil && ref.Kind == "Machine" && ref.Name == "m1" && fm.GetLabels()[clusterv1.ClusterNameLabel] == "tp",
			fmt.Sprintf("owners %v labels %v", fm.GetOwnerReferences(), fm.GetLabels()), nil
	})
	// Play the provider: the instance exists. The Machine reads it through the same role.
	_ = unstructured.SetNestedField(fm.Object, "fake://tp/fm1", "spec", "providerID")
	_ = unstructured.SetNestedField(fm.Object, true, "status", "initialization", "provisioned")
	if err := e.Client.Update(ctx, fm); err != nil {
		t.Fatal(err)
	}
	e.Eventually(60*time.Second, "the Machine sees its infrastructure provisioned", func(ctx context.Context) (bool, string, error) {
		if err := e.Client.Get(ctx, client.ObjectKeyFromObject(m), m); err != nil {
			return false, err.Error(), nil
		}
		c := meta.FindStatusCondition(m.Status.Conditions, clusterv1.MachineInfrastructureReadyCondition)
		return m.Spec.ProviderID == "fake://tp/fm1" && ptr.Deref(m.Status.Initialization.InfrastructureProvisioned, false) &&
				c != nil && c.Status == metav1.ConditionTrue,
			fmt.Sprintf("providerID %q provisioned %v condition %+v", m.Spec.ProviderID, m.Status.Initialization.InfrastructureProvisioned, c), nil
	})
}
