package authorityhook_test

import (
	"context"
	"strings"
	"testing"
	"time"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
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

	t.Run("the Machine API copy is writable while Migrating from it, a mirror while Migrating back", func(t *testing.T) {
		testWritesWhileMigrating(t, e)
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

// testWritesWhileMigrating: while a MachineSet hands over from the Machine API, its Machine API
// copy is still the side the sync copies from, so an administrator other than machina may scale
// it (the webhook) and edit its spec (the machina-mapi-mirror-writes policy); migrating back
// from the Cluster API, the same writes are refused, as on a Cluster API-owned copy.
func testWritesWhileMigrating(t *testing.T, e *testenv.Env) {
	ctx := context.Background()
	cfg, err := e.Lab.UserConfig("migrating-admin", "system:masters")
	if err != nil {
		t.Fatal(err)
	}
	admin, err := client.New(cfg, client.Options{Scheme: e.Client.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	ms := &machinev1beta1.MachineSet{ObjectMeta: metav1.ObjectMeta{Name: "moving", Namespace: mapiNS}}
	ms.Spec.Selector.MatchLabels = map[string]string{"set": "moving"}
	ms.Spec.Template.Labels = map[string]string{"set": "moving"}
	ms.Spec.Template.Spec.ProviderSpec = mapiMachine("x", "").Spec.ProviderSpec
	if err := admin.Create(ctx, ms); err != nil {
		t.Fatal(err)
	}
	setStatus := func(synced machinev1beta1.SynchronizedAPI) {
		t.Helper()
		base := ms.DeepCopy()
		ms.Status.AuthoritativeAPI, ms.Status.SynchronizedAPI = machinev1beta1.MachineAuthorityMigrating, synced
		if err := e.ManagerClient().Status().Patch(ctx, ms, client.MergeFrom(base)); err != nil {
			t.Fatal(err)
		}
	}
	scale := func(n int32) error {
		return admin.SubResource("scale").Update(ctx, ms, client.WithSubResourceBody(&autoscalingv1.Scale{
			ObjectMeta: metav1.ObjectMeta{Name: ms.Name, Namespace: ms.Namespace}, Spec: autoscalingv1.ScaleSpec{Replicas: n}}))
	}
	edit := func(n int32) error {
		cur := &machinev1beta1.MachineSet{}
		if err := admin.Get(ctx, client.ObjectKeyFromObject(ms), cur); err != nil {
			return err
		}
		base := cur.DeepCopy()
		cur.Spec.Replicas = ptr.To(n)
		return admin.Patch(ctx, cur, client.MergeFrom(base))
	}
	setStatus(machinev1beta1.MachineAPISynchronized)
	if err := scale(2); err != nil {
		t.Errorf("scaling a MachineSet Migrating from the Machine API was refused: %v", err)
	}
	if err := edit(3); err != nil {
		t.Errorf("editing the replicas of a MachineSet Migrating from the Machine API was refused: %v", err)
	}
	setStatus(machinev1beta1.ClusterAPISynchronized)
	wantDenied(t, scale(4), "spec.replicas: Forbidden: MachineSet moving is a mirror: the Cluster API is authoritative (Migrating)")
	if err := edit(5); err == nil || !strings.Contains(err.Error(), "spec: Forbidden: MachineSet moving is a mirror") {
		t.Errorf("editing the replicas of a MachineSet Migrating back from the Cluster API: %v, want the mirror refusal", err)
	}
}
