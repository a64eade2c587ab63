package admission_test

import (
	"context"
	"strings"
	"testing"
	"time"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/machina-dev/machina/api/infrastructure/v1alpha1"
	"github.com/machina-dev/machina/internal/lab"
	"github.com/machina-dev/machina/internal/lab/labtest"
	"github.com/machina-dev/machina/internal/scheme"
)

func clientAs(t *testing.T, l *lab.Lab, user string, w *warnings, groups ...string) client.Client {
	t.Helper()
	cfg, err := l.UserConfig(user, groups...)
	if err != nil {
		t.Fatal(err)
	}
	cfg = rest.CopyConfig(cfg)
	if w != nil {
		cfg.WarningHandler = w
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// autoscalerUser is the identity OpenShift's cluster autoscaler runs as.
const autoscalerUser = "system:serviceaccount:openshift-machine-api:cluster-autoscaler"

// TestMirrorWritesAsUsersSeeThem proves the authority rules with two identities against the
// real apiserver: an administrator (system:masters, so RBAC allows everything) and machina's
// controller identity.
func TestMirrorWritesAsUsersSeeThem(t *testing.T) {
	l := labtest.Shared(t)
	ctx := context.Background()
	w := &warnings{}
	admin := clientAs(t, l, "alice", w, "system:masters")
	controller := clientAs(t, l, lab.ManagerUser, nil, "system:masters")

	// A Machine API Machine whose authority is the Cluster API: a mirror.
	m := machine("mirror", sim(nil))
	m.Labels = map[string]string{"team": "blue"}
	if err := admin.Create(ctx, m); err != nil {
		t.Fatal(err)
	}
	m.Status.AuthoritativeAPI = machinev1beta1.MachineAuthorityClusterAPI
	m.Status.Conditions = []machinev1beta1.Condition{{Type: "Synchronized", Status: corev1.ConditionFalse,
		Message: "spec.providerSpec.value.region: Invalid value", LastTransitionTime: metav1.Now()}}
	if err := controller.Status().Update(ctx, m); err != nil {
		t.Fatal(err)
	}
	fresh := func() *machinev1beta1.Machine {
		x := &machinev1beta1.Machine{}
		if err := admin.Get(ctx, client.ObjectKeyFromObject(m), x); err != nil {
			t.Fatal(err)
		}
		return x
	}
	// Policies load a moment after the lab starts; wait for this one to answer.
	deadline := time.Now().Add(30 * time.Second)
	for {
		x := fresh()
		x.Spec.ProviderID = ptr.To("sim://sim-east-1/sim-east-1a/i-probe")
		if err := admin.Update(ctx, x, client.DryRunAll); err != nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("mirror policy never became active")
		}
		time.Sleep(200 * time.Millisecond)
	}

	t.Run("AdminCannotChangeMirrorSpec", func(t *testing.T) {
		x := fresh()
		x.Spec.ProviderID = ptr.To("sim://sim-east-1/sim-east-1a/i-0")
		expectDenied(t, admin.Update(ctx, x), "spec: Forbidden: Machine mirror is a mirror: the Cluster API is authoritative (ClusterAPI)")
	})
	t.Run("ControllerCanChangeMirrorSpec", func(t *testing.T) {
		x := fresh()
		x.Spec.ProviderID = ptr.To("sim://sim-east-1/sim-east-1a/i-1")
		if err := controller.Update(ctx, x); err != nil {
			t.Fatalf("the sync controller's identity must be allowed: %v", err)
		}
	})
	t.Run("AdminCanRequestMigrationAndIsWarned", func(t *testing.T) {
		x := fresh()
		x.Spec.AuthoritativeAPI = machinev1beta1.MachineAuthorityClusterAPI // what it is now: no warning
		if err := admin.Update(ctx, x); err != nil {
			t.Fatal(err)
		}
		if ws := w.take(); len(ws) != 0 {
			t.Fatalf("no move requested, yet warned: %q", ws)
		}
		x = fresh()
		x.Spec.AuthoritativeAPI = machinev1beta1.MachineAuthorityMachineAPI
		if err := admin.Update(ctx, x); err != nil {
			t.Fatalf("spec.authoritativeAPI must stay changeable: %v", err)
		}
		ws := w.take()
		// Exactly what kubectl prints after "Warning: ".
		want := "Validation failed for ValidatingAdmissionPolicy 'machina-authority-warnings' with binding 'machina-authority-warnings': " +
			"spec.authoritativeAPI: the move to MachineAPI is recorded but cannot start: Synchronized is False: spec.providerSpec.value.region: Invalid value"
		if len(ws) != 1 || ws[0] != want {
			t.Fatalf("warnings %q, want %q", ws, want)
		}
	})
	t.Run("AdminLabelsOutsideReservedDomains", func(t *testing.T) {
		x := fresh()
		x.Labels["team"] = "green"
		if err := admin.Update(ctx, x); err != nil {
			t.Fatalf("a user label must stay changeable: %v", err)
		}
		x = fresh()
		x.Labels["node-role.kubernetes.io/infra"] = ""
		expectDenied(t, admin.Update(ctx, x), "metadata.labels: Forbidden: labels in the kubernetes.io, k8s.io, openshift.io, x-k8s.io and machina.dev domains of Machine mirror")
		x = fresh()
		x.Annotations = map[string]string{"machine.openshift.io/exclude-node-draining": ""}
		expectDenied(t, admin.Update(ctx, x), "metadata.annotations: Forbidden")
	})

	// A paused Cluster API copy mirrors an authoritative Machine API resource.
	capi := &clusterv1.Machine{ObjectMeta: metav1.ObjectMeta{Name: "paused-copy", Namespace: ns,
		Annotations: map[string]string{clusterv1.PausedAnnotation: ""}, Finalizers: []string{"sync.machine.openshift.io/finalizer"}},
		Spec: clusterv1.MachineSpec{ClusterName: "lab", Bootstrap: clusterv1.Bootstrap{DataSecretName: ptr.To("worker-user-data")},
			InfrastructureRef: clusterv1.ContractVersionedObjectReference{APIGroup: "infrastructure.machina.dev", Kind: "SimMachine", Name: "paused-copy"}}}
	if err := controller.Create(ctx, capi); err != nil {
		t.Fatal(err)
	}
	t.Run("AdminCannotUnpauseOrEditCAPIMirror", func(t *testing.T) {
		x := &clusterv1.Machine{}
		_ = admin.Get(ctx, client.ObjectKeyFromObject(capi), x)
		x.Spec.FailureDomain = "sim-east-1c"
		expectDenied(t, admin.Update(ctx, x), "spec: Forbidden: Machine paused-copy is a paused mirror of an authoritative Machine API resource")
		_ = admin.Get(ctx, client.ObjectKeyFromObject(capi), x)
		delete(x.Annotations, clusterv1.PausedAnnotation)
		expectDenied(t, admin.Update(ctx, x), "metadata.annotations[cluster.x-k8s.io/paused]: Forbidden: only the migration controller unpauses a mirror")
		_ = controller.Get(ctx, client.ObjectKeyFromObject(capi), x)
		delete(x.Annotations, clusterv1.PausedAnnotation)
		if err := controller.Update(ctx, x); err != nil {
			t.Fatalf("the migration controller's identity must be able to unpause: %v", err)
		}
		// An object a user paused (no sync finalizer: not a mirror) stays the user's to unpause.
		own := &clusterv1.Machine{ObjectMeta: metav1.ObjectMeta{Name: "user-paused", Namespace: ns,
			Annotations: map[string]string{clusterv1.PausedAnnotation: ""}}, Spec: capi.Spec}
		if err := admin.Create(ctx, own); err != nil {
			t.Fatal(err)
		}
		delete(own.Annotations, clusterv1.PausedAnnotation)
		if err := admin.Update(ctx, own); err != nil {
			t.Fatalf("a user must be able to unpause what they paused: %v", err)
		}
	})

	// A provider's pass that launched an instance may finish after a handover away from the
	// Cluster API paused its InfraMachine: it must still record the instance, and nothing else.
	t.Run("ProviderMayRecordItsInstanceOnPausedInfraMachine", func(t *testing.T) {
		provider := clientAs(t, l, "system:serviceaccount:capa-system:capa-controller-manager", nil, "system:serviceaccounts", "system:masters")
		newInfra := func(name string) *infrav1.SimMachine {
			sm := &infrav1.SimMachine{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns,
				Annotations: map[string]string{clusterv1.PausedAnnotation: ""}, Finalizers: []string{"sync.machine.openshift.io/finalizer"}},
				Spec: infrav1.SimMachineSpec{InstanceSpec: infrav1.InstanceSpec{InstanceType: "s1.medium", Image: "sim-rhcos-9"}}}
			if err := controller.Create(ctx, sm); err != nil {
				t.Fatal(err)
			}
			return sm
		}
		const forbidden = "is a paused mirror of an authoritative Machine API resource"
		sm := newInfra("recorded")
		sm.Spec.ProviderID = "sim://sim-east-1/sim-east-1a/i-0123456789abcdef0"
		if err := provider.Update(ctx, sm); err != nil {
			t.Fatalf("a provider must be able to record the instance it launched on a paused InfraMachine: %v", err)
		}
		sm.Spec.ProviderID = "sim://sim-east-1/sim-east-1a/i-0fedcba9876543210"
		expectDenied(t, provider.Update(ctx, sm), forbidden)
		other := newInfra("recorded-and-more")
		other.Spec.ProviderID = "sim://sim-east-1/sim-east-1a/i-0123456789abcdef1"
		other.Spec.InstanceType = "s1.large"
		expectDenied(t, provider.Update(ctx, other), forbidden)
	})

	t.Run("AutoscalerMayChangeOnlyReplicasOfCAPIMirrorMachineSet", func(t *testing.T) {
		autoscaler := clientAs(t, l, autoscalerUser, nil, "system:serviceaccounts", "system:masters")
		set := &clusterv1.MachineSet{ObjectMeta: metav1.ObjectMeta{Name: "paused-set", Namespace: ns,
			Annotations: map[string]string{clusterv1.PausedAnnotation: ""}, Finalizers: []string{"sync.machine.openshift.io/finalizer"}},
			Spec: clusterv1.MachineSetSpec{ClusterName: "lab", Replicas: ptr.To[int32](1),
				Selector: metav1.LabelSelector{MatchLabels: map[string]string{"set": "paused-set"}},
				Template: clusterv1.MachineTemplateSpec{ObjectMeta: clusterv1.ObjectMeta{Labels: map[string]string{"set": "paused-set"}},
					Spec: clusterv1.MachineSpec{ClusterName: "lab", Bootstrap: clusterv1.Bootstrap{DataSecretName: ptr.To("worker-user-data")},
						InfrastructureRef: clusterv1.ContractVersionedObjectReference{APIGroup: "infrastructure.machina.dev", Kind: "SimMachineTemplate", Name: "t"}}}}}
		if err := controller.Create(ctx, set); err != nil {
			t.Fatal(err)
		}
		get := func(c client.Client) *clusterv1.MachineSet {
			x := &clusterv1.MachineSet{}
			if err := c.Get(ctx, client.ObjectKeyFromObject(set), x); err != nil {
				t.Fatal(err)
			}
			return x
		}
		const forbidden = "spec: Forbidden: MachineSet paused-set is a paused mirror of an authoritative Machine API resource"
		// Anyone else's replicas change is refused, with the reason.
		x := get(admin)
		x.Spec.Replicas = ptr.To[int32](3)
		expectDenied(t, admin.Update(ctx, x), forbidden)
		// The autoscaler's is accepted, on the object and through the scale subresource.
		x = get(autoscaler)
		x.Spec.Replicas = ptr.To[int32](3)
		if err := autoscaler.Update(ctx, x, client.FieldOwner("cluster-autoscaler")); err != nil {
			t.Fatalf("the cluster autoscaler must be able to scale a mirrored MachineSet: %v", err)
		}
		scale := &autoscalingv1.Scale{ObjectMeta: metav1.ObjectMeta{Name: set.Name, Namespace: ns}, Spec: autoscalingv1.ScaleSpec{Replicas: 4}}
		if err := autoscaler.SubResource("scale").Update(ctx, get(autoscaler), client.WithSubResourceBody(scale)); err != nil {
			t.Fatalf("the cluster autoscaler must be able to use the scale subresource: %v", err)
		}
		if got := ptr.Deref(get(admin).Spec.Replicas, 0); got != 4 {
			t.Fatalf("replicas %d after the autoscaler scaled to 4", got)
		}
		// Any other spec change by the autoscaler, even along with replicas, is refused, and so
		// is unpausing.
		x = get(autoscaler)
		x.Spec.Replicas = ptr.To[int32](5)
		x.Spec.Template.Spec.FailureDomain = "sim-east-1c"
		expectDenied(t, autoscaler.Update(ctx, x), forbidden)
		x = get(autoscaler)
		x.Spec.Template.Spec.ReadinessGates = []clusterv1.MachineReadinessGate{{ConditionType: "Extra"}}
		expectDenied(t, autoscaler.Update(ctx, x), forbidden)
		x = get(autoscaler)
		delete(x.Annotations, clusterv1.PausedAnnotation)
		expectDenied(t, autoscaler.Update(ctx, x), "metadata.annotations[cluster.x-k8s.io/paused]: Forbidden")
		// The exception is for MachineSets only: the same identity cannot edit a mirrored Machine.
		m := &clusterv1.Machine{}
		if err := autoscaler.Get(ctx, client.ObjectKeyFromObject(capi), m); err != nil {
			t.Fatal(err)
		}
		if _, paused := m.Annotations[clusterv1.PausedAnnotation]; !paused {
			base := m.DeepCopy()
			m.Annotations = map[string]string{clusterv1.PausedAnnotation: ""}
			if err := controller.Patch(ctx, m, client.MergeFrom(base)); err != nil {
				t.Fatal(err)
			}
		}
		m.Spec.FailureDomain = "sim-east-1b"
		expectDenied(t, autoscaler.Update(ctx, m), "spec: Forbidden: Machine paused-copy is a paused mirror")
	})

	t.Run("AutoscalerMayScaleAndMarkMachineAPIMirrors", func(t *testing.T) {
		autoscaler := clientAs(t, l, autoscalerUser, nil, "system:serviceaccounts", "system:masters")
		testAutoscalerOnMachineAPIMirrors(t, admin, controller, autoscaler, m.Name)
	})

	t.Run("DeletingNonAuthoritativeMachineSetWarns", func(t *testing.T) {
		l := map[string]string{"set": "mirror"}
		ms := machineSet("mirror-set", l, l, sim(nil))
		if err := admin.Create(ctx, ms); err != nil {
			t.Fatal(err)
		}
		ms.Status.AuthoritativeAPI = machinev1beta1.MachineAuthorityClusterAPI
		if err := controller.Status().Update(ctx, ms); err != nil {
			t.Fatal(err)
		}
		w.take()
		// A foreground deletion would have the garbage collector delete the Machines the
		// Machine API still runs before the sync can let go of them.
		expectDenied(t, admin.Delete(ctx, ms, client.PropagationPolicy(metav1.DeletePropagationForeground)),
			"propagationPolicy: Forbidden: MachineSet mirror-set is a mirror of an authoritative Cluster API MachineSet")
		w.take()
		if err := admin.Delete(ctx, ms); err != nil {
			t.Fatal(err)
		}
		ws := w.take()
		if len(ws) != 1 || !strings.Contains(ws[0], "deleting it removes only Machine API copies; the cluster.x-k8s.io MachineSet and its Machines keep running, "+
			"and its Machines the Machine API still runs stay as Machine API Machines without a MachineSet") {
			t.Fatalf("warnings %q", ws)
		}
	})
}
