package authorityhook_test

import (
	"context"
	"strings"
	"testing"
	"time"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/machina-dev/machina/internal/authorityhook"
	"github.com/machina-dev/machina/internal/testenv"
)

const mapiNS, capiNS = "openshift-machine-api", "openshift-cluster-api"

// Only the webhook runs: no controller touches the objects, so every outcome is the
// webhook's (or the CEL policies') doing.
func TestAuthorityWebhook(t *testing.T) {
	e := testenv.Start(t, testenv.Options{Groups: authorityhook.GroupName})
	ctx := context.Background()
	e.SeedCluster("lab") // namespaces, Infrastructure, Cluster

	admin := e.Client // the lab administrator (system:masters)
	machina := e.ManagerClient()

	// The manager registers the webhook; wait until the apiserver calls it.
	e.Eventually(time.Minute, "webhook registered and answering", func(ctx context.Context) (bool, string, error) {
		vwc := &admissionregistrationv1.ValidatingWebhookConfiguration{}
		if err := admin.Get(ctx, client.ObjectKey{Name: authorityhook.ConfigurationName}, vwc); err != nil {
			return false, err.Error(), nil
		}
		// An unpaused Cluster API Machine without a Machine API namesake: sent to the webhook, allowed.
		err := admin.Create(ctx, capiMachine("probe", false), client.DryRunAll)
		return err == nil, errString(err), nil
	})

	t.Run("MachineAPI resource refused while a same-named Cluster API one exists", func(t *testing.T) {
		if err := admin.Create(ctx, capiMachine("taken", true)); err != nil {
			t.Fatal(err)
		}
		err := admin.Create(ctx, mapiMachine("taken", machinev1beta1.MachineAuthorityMachineAPI))
		wantDenied(t, err, `spec.authoritativeAPI: MachineAPI: a Cluster API Machine openshift-cluster-api/taken already exists`)
		if err := admin.Create(ctx, mapiMachine("taken", machinev1beta1.MachineAuthorityClusterAPI)); err != nil {
			t.Fatalf("a ClusterAPI-authoritative Machine API Machine over an existing Cluster API one was refused: %v", err)
		}
		// No Cluster API resource of that name: allowed.
		if err := admin.Create(ctx, mapiMachine("free", machinev1beta1.MachineAuthorityMachineAPI)); err != nil {
			t.Fatalf("a MachineAPI Machine with no Cluster API namesake was refused: %v", err)
		}
	})

	t.Run("MachineHealthCheck asking for MachineAPI over an existing Cluster API one", func(t *testing.T) {
		capi := &clusterv1.MachineHealthCheck{ObjectMeta: metav1.ObjectMeta{Name: "mhc-taken", Namespace: capiNS},
			Spec: clusterv1.MachineHealthCheckSpec{ClusterName: "lab", Selector: metav1.LabelSelector{MatchLabels: map[string]string{"a": "b"}}}}
		if err := admin.Create(ctx, capi); err != nil {
			t.Fatal(err)
		}
		mapi := &machinev1beta1.MachineHealthCheck{ObjectMeta: metav1.ObjectMeta{Name: "mhc-taken", Namespace: mapiNS,
			Annotations: map[string]string{"machina.dev/authoritative-api": "MachineAPI"}},
			Spec: machinev1beta1.MachineHealthCheckSpec{Selector: metav1.LabelSelector{MatchLabels: map[string]string{"a": "b"}}}}
		wantDenied(t, admin.Create(ctx, mapi), "a Cluster API MachineHealthCheck openshift-cluster-api/mhc-taken already exists")
	})

	t.Run("Cluster API copy of a MachineAPI resource only paused", func(t *testing.T) {
		if err := admin.Create(ctx, mapiMachine("owned", machinev1beta1.MachineAuthorityMachineAPI)); err != nil {
			t.Fatal(err)
		}
		err := admin.Create(ctx, capiMachine("owned", false))
		wantDenied(t, err, "the Machine API Machine openshift-machine-api/owned mirrors this resource and its authority is MachineAPI",
			"cluster.x-k8s.io/paused", "machina migrate machine/owned --to ClusterAPI")
		if err := admin.Create(ctx, capiMachine("owned", true)); err != nil {
			t.Fatalf("a paused Cluster API copy was refused: %v", err)
		}
	})

	t.Run("Cluster API copy unpaused when the Machine API side says ClusterAPI", func(t *testing.T) {
		if err := admin.Create(ctx, mapiMachine("handed", machinev1beta1.MachineAuthorityClusterAPI)); err != nil {
			t.Fatal(err)
		}
		if err := admin.Create(ctx, capiMachine("handed", false)); err != nil {
			t.Fatalf("an unpaused Cluster API Machine whose mirror asks for ClusterAPI was refused: %v", err)
		}
	})

	t.Run("machina's own identity is not subject to the webhook", func(t *testing.T) {
		if err := admin.Create(ctx, mapiMachine("synced", machinev1beta1.MachineAuthorityMachineAPI)); err != nil {
			t.Fatal(err)
		}
		wantDenied(t, admin.Create(ctx, capiMachine("synced", false), client.DryRunAll), "its authority is MachineAPI")
		if err := machina.Create(ctx, capiMachine("synced", false), client.DryRunAll); err != nil {
			t.Fatalf("the manager's create was refused: %v", err)
		}
	})

	t.Run("the configuration fails closed and carries its CA", func(t *testing.T) {
		vwc := &admissionregistrationv1.ValidatingWebhookConfiguration{}
		if err := admin.Get(ctx, client.ObjectKey{Name: authorityhook.ConfigurationName}, vwc); err != nil {
			t.Fatal(err)
		}
		if n := len(vwc.Webhooks); n != 4 {
			t.Fatalf("%d webhooks, want 4 (creates and scales in each API)", n)
		}
		for _, w := range vwc.Webhooks {
			if ptr.Deref(w.FailurePolicy, "") != admissionregistrationv1.Fail || len(w.ClientConfig.CABundle) == 0 {
				t.Errorf("webhook %s: failurePolicy %v, caBundle %d bytes", w.Name, ptr.Deref(w.FailurePolicy, ""), len(w.ClientConfig.CABundle))
			}
		}
	})
}

func mapiMachine(name string, authority machinev1beta1.MachineAuthority) *machinev1beta1.Machine {
	m := &machinev1beta1.Machine{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: mapiNS,
		Labels: map[string]string{"machine.openshift.io/cluster-api-cluster": "lab"}}}
	m.Spec.AuthoritativeAPI = authority
	// Admission requires a providerSpec value on a Machine the Machine API provisions.
	m.Spec.ProviderSpec.Value = &runtime.RawExtension{Raw: []byte(`{"apiVersion":"infrastructure.machina.dev/v1alpha1",` +
		`"kind":"SimMachineProviderSpec","region":"sim-east-1","zone":"sim-east-1a"}`)}
	return m
}

func capiMachine(name string, paused bool) *clusterv1.Machine {
	m := &clusterv1.Machine{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: capiNS},
		Spec: clusterv1.MachineSpec{ClusterName: "lab",
			Bootstrap:         clusterv1.Bootstrap{DataSecretName: ptr.To("worker-user-data")},
			InfrastructureRef: clusterv1.ContractVersionedObjectReference{APIGroup: "infrastructure.machina.dev", Kind: "SimMachine", Name: name}}}
	if paused {
		m.Annotations = map[string]string{clusterv1.PausedAnnotation: ""}
	}
	return m
}

func wantDenied(t *testing.T, err error, want ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("the request was allowed; want it denied with %q", want)
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("denial %q lacks %q", err, w)
		}
	}
	if !strings.Contains(err.Error(), "admission webhook") {
		t.Errorf("denial %q did not come from the webhook", err)
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
