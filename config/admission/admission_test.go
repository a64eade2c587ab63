package admission_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	configv1 "github.com/openshift/api/config/v1"
	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/machina-dev/machina/internal/lab/labtest"
	"github.com/machina-dev/machina/internal/scheme"
)

const ns = "default"

type warnings struct {
	mu   sync.Mutex
	msgs []string
}

func (w *warnings) HandleWarningHeader(_ int, _ string, msg string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.msgs = append(w.msgs, msg)
}

func (w *warnings) take() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := w.msgs
	w.msgs = nil
	return out
}

// user is a non-admin identity allowed to manage Machines, the way a platform team is.
func user(t *testing.T, admin client.Client, cfg *rest.Config, w *warnings) client.Client {
	t.Helper()
	ctx := context.Background()
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "machine-editor"}, Rules: []rbacv1.PolicyRule{{
		APIGroups: []string{"machine.openshift.io"}, Resources: []string{"machines", "machinesets"},
		Verbs: []string{"get", "list", "watch", "create", "update", "patch", "delete"}}}}
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "alice-machine-editor"},
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "machine-editor"},
		Subjects: []rbacv1.Subject{{Kind: "User", Name: "alice", APIGroup: "rbac.authorization.k8s.io"}}}
	for _, o := range []client.Object{role, binding} {
		if err := admin.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	cfg = rest.CopyConfig(cfg)
	cfg.WarningHandler = w
	c, err := client.New(cfg, client.Options{Scheme: scheme.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func raw(v map[string]any) *runtime.RawExtension {
	b, _ := json.Marshal(v)
	return &runtime.RawExtension{Raw: b}
}

func sim(extra map[string]any) map[string]any {
	v := map[string]any{"apiVersion": "infrastructure.machina.dev/v1alpha1", "kind": "SimMachineProviderSpec",
		"region": "sim-east-1", "zone": "sim-east-1a"}
	for k, x := range extra {
		if x == nil {
			delete(v, k)
		} else {
			v[k] = x
		}
	}
	return v
}

func machine(name string, ps map[string]any) *machinev1beta1.Machine {
	return &machinev1beta1.Machine{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: machinev1beta1.MachineSpec{ProviderSpec: machinev1beta1.ProviderSpec{Value: raw(ps)}}}
}

func machineSet(name string, selector, labels map[string]string, ps map[string]any) *machinev1beta1.MachineSet {
	return &machinev1beta1.MachineSet{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: machinev1beta1.MachineSetSpec{Replicas: ptr.To[int32](0), Selector: metav1.LabelSelector{MatchLabels: selector},
			Template: machinev1beta1.MachineTemplateSpec{ObjectMeta: machinev1beta1.ObjectMeta{Labels: labels},
				Spec: machinev1beta1.MachineSpec{ProviderSpec: machinev1beta1.ProviderSpec{Value: raw(ps)}}}}}
}

func expectDenied(t *testing.T, err error, msg string) {
	t.Helper()
	if err == nil {
		t.Fatalf("accepted; want the apiserver to refuse with %q", msg)
	}
	if !strings.Contains(err.Error(), msg) {
		t.Fatalf("refused with %q; want it to say %q", err.Error(), msg)
	}
}

func decoded(m *machinev1beta1.Machine) map[string]any {
	var v map[string]any
	_ = json.Unmarshal(m.Spec.ProviderSpec.Value.Raw, &v)
	return v
}

// TestAdmissionAsUsersSeeIt sends requests as a non-admin user to the real kube-apiserver
// and checks each policy's answer word for word.
func TestAdmissionAsUsersSeeIt(t *testing.T) {
	l := labtest.Shared(t)
	top := t
	ctx := context.Background()
	admin, err := client.New(l.Config, client.Options{Scheme: scheme.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	aliceCfg, err := l.UserConfig("alice")
	if err != nil {
		t.Fatal(err)
	}
	w := &warnings{}
	alice := user(t, admin, aliceCfg, w)

	// Policies become active a moment after they are created: wait for the first refusal.
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := alice.Create(ctx, machine("probe", sim(map[string]any{"region": nil})), client.DryRunAll)
		if err != nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("admission policies never became active")
		}
		time.Sleep(200 * time.Millisecond)
	}

	t.Run("SimMachineDefaulted", func(t *testing.T) {
		m := machine("defaulted", sim(nil))
		if err := alice.Create(ctx, m); err != nil {
			t.Fatal(err)
		}
		v := decoded(m)
		if v["instanceType"] != "s1.medium" || v["image"] != "sim-rhcos-9" {
			t.Fatalf("defaults not applied: %v", v)
		}
		if ws := w.take(); len(ws) != 0 {
			t.Errorf("unexpected warnings: %v", ws)
		}
	})
	t.Run("SimMachineMissingRegionRefused", func(t *testing.T) {
		err := alice.Create(ctx, machine("noregion", sim(map[string]any{"region": nil})))
		expectDenied(t, err, "spec.providerSpec.value.region: Required value: the simulated cloud region, for example sim-east-1")
	})
	t.Run("SimZoneOutsideRegionRefused", func(t *testing.T) {
		err := alice.Create(ctx, machine("badzone", sim(map[string]any{"zone": "sim-west-1a"})))
		expectDenied(t, err, `spec.providerSpec.value.zone: Invalid value: "sim-west-1a": the zone must be in region sim-east-1`)
	})
	t.Run("MachineSetTemplateChecked", func(t *testing.T) {
		l := map[string]string{"a": "b"}
		err := alice.Create(ctx, machineSet("nozone", l, l, sim(map[string]any{"zone": nil})))
		expectDenied(t, err, "spec.template.spec.providerSpec.value.zone: Required value")
	})
	t.Run("UnknownFieldWarned", func(t *testing.T) {
		m := machine("typo", sim(map[string]any{"instanceTyp": "s1.large"}))
		if err := alice.Create(ctx, m); err != nil {
			t.Fatal(err)
		}
		ws := w.take()
		want := `spec.providerSpec.value: unknown field(s) "instanceTyp" will be ignored by the SimMachineProviderSpec provider`
		if len(ws) != 1 || !strings.Contains(ws[0], want) {
			t.Fatalf("warnings %q, want one saying %q", ws, want)
		}
	})
	t.Run("AWSDefaultsAndRequired", func(t *testing.T) {
		aws := map[string]any{"apiVersion": "machine.openshift.io/v1beta1", "kind": "AWSMachineProviderConfig",
			"ami": map[string]any{"id": "ami-0123456789"}, "placement": map[string]any{"region": "us-east-1", "availabilityZone": "us-east-1a"}}
		m := machine("aws", aws)
		if err := alice.Create(ctx, m); err != nil {
			t.Fatal(err)
		}
		v := decoded(m)
		if v["instanceType"] != "m5.large" || fmt.Sprint(v["credentialsSecret"]) != "map[name:aws-cloud-credentials]" ||
			fmt.Sprint(v["userDataSecret"]) != "map[name:worker-user-data]" {
			t.Fatalf("AWS defaults not applied: %v", v)
		}
		delete(aws, "ami")
		expectDenied(t, alice.Create(ctx, machine("aws-noami", aws)), "spec.providerSpec.value.ami: Required value: an AMI by id or filters")
	})
	t.Run("SelectorMustMatchTemplate", func(t *testing.T) {
		err := alice.Create(ctx, machineSet("mismatch", map[string]string{"a": "b"}, map[string]string{"a": "c"}, sim(nil)))
		expectDenied(t, err, "spec.template.metadata.labels: Invalid value: `selector` does not match template `labels`")
		ms := machineSet("expr", nil, map[string]string{"pool": "x"}, sim(nil))
		ms.Spec.Selector.MatchExpressions = []metav1.LabelSelectorRequirement{{Key: "pool", Operator: metav1.LabelSelectorOpIn, Values: []string{"y"}}}
		expectDenied(t, alice.Create(ctx, ms), "`selector` does not match template `labels`")
		ms.Spec.Selector.MatchExpressions[0].Values = []string{"x", "y"}
		if err := alice.Create(ctx, ms); err != nil {
			t.Fatalf("matching expression refused: %v", err)
		}
	})
	t.Run("MaxProvisioningIsAPositiveInteger", func(t *testing.T) {
		ms := machineSet("limited", map[string]string{"pool": "l"}, map[string]string{"pool": "l"}, sim(nil))
		ms.Annotations = map[string]string{"machina.dev/max-provisioning": "0"}
		expectDenied(t, alice.Create(ctx, ms, client.DryRunAll), `metadata.annotations[machina.dev/max-provisioning]: Invalid value: "0": must be a positive integer`)
		ms.Annotations["machina.dev/max-provisioning"] = "10"
		if err := alice.Create(ctx, ms, client.DryRunAll); err != nil {
			t.Fatalf("a limit of 10 refused: %v", err)
		}
	})
	t.Run("SelectorImmutable", func(t *testing.T) {
		l := map[string]string{"pool": "p", "tier": "t"}
		ms := machineSet("immutable", map[string]string{"pool": "p"}, l, sim(nil))
		if err := alice.Create(ctx, ms); err != nil {
			t.Fatal(err)
		}
		ms.Spec.Selector.MatchLabels = map[string]string{"pool": "p", "tier": "t"}
		expectDenied(t, alice.Update(ctx, ms), "spec.selector: Invalid value: field is immutable")
	})
	t.Run("ProviderSpecValueRequired", func(t *testing.T) {
		m := machine("novalue", nil)
		m.Spec.ProviderSpec.Value = nil
		expectDenied(t, alice.Create(ctx, m), "spec.providerSpec.value: Required value: the provider configuration "+
			"(for example a SimMachineProviderSpec) the Machine API provisions the Machine from")
		ms := machineSet("novalue", map[string]string{"a": "b"}, map[string]string{"a": "b"}, nil)
		ms.Spec.Template.Spec.ProviderSpec.Value = nil
		expectDenied(t, alice.Create(ctx, ms), "spec.template.spec.providerSpec.value: Required value: the provider configuration "+
			"(for example a SimMachineProviderSpec) the Machine API provisions the Machines from")
		// A mirror of a Cluster API-owned Machine is filled in by the sync.
		m.Spec.AuthoritativeAPI = machinev1beta1.MachineAuthorityClusterAPI
		if err := alice.Create(ctx, m, client.DryRunAll); err != nil {
			t.Fatalf("a Cluster API-authoritative Machine without a providerSpec value was refused: %v", err)
		}
	})
	// Before ClusterIDLabelDefaulted creates the Infrastructure.
	t.Run("ClusterIDLabelMayBeAdded", func(t *testing.T) { testClusterIDAddable(t, admin) })
	t.Run("ClusterIDLabelDefaulted", func(t *testing.T) {
		const label = "machine.openshift.io/cluster-api-cluster"
		createInfrastructure(t, top, admin, "lab-7x2kq", configv1.PlatformStatus{Type: configv1.NonePlatformType})
		// The policy sees the Infrastructure a moment after it changes.
		m := machine("cluster-id", sim(nil))
		deadline := time.Now().Add(30 * time.Second)
		for {
			probe := machine("cluster-id", sim(nil))
			if err := alice.Create(ctx, probe, client.DryRunAll); err != nil {
				t.Fatal(err)
			}
			if probe.Labels[label] == "lab-7x2kq" {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("label never defaulted: %v", probe.Labels)
			}
			time.Sleep(200 * time.Millisecond)
		}
		if err := alice.Create(ctx, m); err != nil {
			t.Fatal(err)
		}
		if m.Labels[label] != "lab-7x2kq" {
			t.Errorf("labels %v", m.Labels)
		}
		// A label the user set is kept.
		own := machine("own-cluster-id", sim(nil))
		own.Labels = map[string]string{label: "mine", "team": "blue"}
		if err := alice.Create(ctx, own); err != nil {
			t.Fatal(err)
		}
		if own.Labels[label] != "mine" || own.Labels["team"] != "blue" {
			t.Errorf("labels %v", own.Labels)
		}
	})
	t.Run("ClusterIDLabelImmutable", func(t *testing.T) { testClusterIDImmutable(t, admin, alice) })
	t.Run("HooksFrozenWhileDeleting", func(t *testing.T) {
		m := machine("hooked", sim(nil))
		m.Finalizers = []string{"example.com/hold"}
		m.Spec.LifecycleHooks.PreDrain = []machinev1beta1.LifecycleHook{{Name: "backup", Owner: "team-a"}}
		if err := alice.Create(ctx, m); err != nil {
			t.Fatal(err)
		}
		if err := alice.Delete(ctx, m); err != nil {
			t.Fatal(err)
		}
		if err := alice.Get(ctx, client.ObjectKeyFromObject(m), m); err != nil {
			t.Fatal(err)
		}
		m.Spec.LifecycleHooks.PreTerminate = []machinev1beta1.LifecycleHook{{Name: "late", Owner: "team-b"}}
		expectDenied(t, alice.Update(ctx, m), "spec.lifecycleHooks.preTerminate: Forbidden: pre-terminate hooks cannot be added or changed while the Machine is being deleted")
		m.Spec.LifecycleHooks = machinev1beta1.LifecycleHooks{}
		if err := alice.Update(ctx, m); err != nil {
			t.Fatalf("removing hooks while deleting must be allowed: %v", err)
		}
		m.Finalizers = nil
		if err := alice.Update(ctx, m); err != nil {
			t.Fatalf("removing the finalizer must be allowed: %v", err)
		}
	})
}

// TestMain shares one lab among the package's tests (labtest.Shared).
func TestMain(m *testing.M) { labtest.Main(m) }

// createInfrastructure creates the cluster's Infrastructure as an installer leaves it, named
// name on the platform of status, and deletes it when top (the test) ends, waiting until
// admission no longer defaults the cluster-ID label from it: the next test of the shared lab
// starts without an Infrastructure.
func createInfrastructure(t, top *testing.T, admin client.Client, name string, status configv1.PlatformStatus) {
	t.Helper()
	ctx := context.Background()
	infra := &configv1.Infrastructure{ObjectMeta: metav1.ObjectMeta{Name: "cluster"},
		Spec: configv1.InfrastructureSpec{PlatformSpec: configv1.PlatformSpec{Type: status.Type}}}
	if err := admin.Create(ctx, infra); err != nil {
		t.Fatal(err)
	}
	top.Cleanup(func() {
		if err := admin.Delete(ctx, infra); err != nil {
			top.Errorf("deleting the Infrastructure: %v", err)
			return
		}
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(200 * time.Millisecond) {
			probe := machine("no-infrastructure", sim(nil))
			if err := admin.Create(ctx, probe, client.DryRunAll); err == nil && probe.Labels[clusterIDLabel] == "" {
				return
			}
			if time.Now().After(deadline) {
				top.Errorf("admission still defaults the cluster-ID label 30s after the Infrastructure was deleted")
				return
			}
		}
	})
	infra.Status = configv1.InfrastructureStatus{InfrastructureName: name, PlatformStatus: &status,
		ControlPlaneTopology:   configv1.HighlyAvailableTopologyMode,
		InfrastructureTopology: configv1.HighlyAvailableTopologyMode}
	if err := admin.Status().Update(ctx, infra); err != nil {
		t.Fatal(err)
	}
}
