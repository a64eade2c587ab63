package maomachine

import (
	"context"
	"errors"
	"testing"
	"time"

	apifeatures "github.com/openshift/api/features"
	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	maoctrl "github.com/openshift/machine-api-operator/pkg/controller/machine"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/component-base/featuregate"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/machina-dev/machina/internal/controllers/machineapi/machine"
)

func TestFeatureGateTurnsMachineAPIMigrationOn(t *testing.T) {
	gate, err := FeatureGate()
	if err != nil {
		t.Fatal(err)
	}
	f := featuregate.Feature(apifeatures.FeatureGateMachineAPIMigration)
	if !gate.Enabled(f) {
		t.Fatalf("%s is off; known: %v", f, gate.KnownFeatures())
	}
	// Registered as library-go registers it: at its default in OpenShift's Default feature set
	// (today outside it: Alpha, off until set).
	want := featuregate.FeatureSpec{Default: false, PreRelease: featuregate.Alpha}
	if defaultOn(apifeatures.FeatureGateMachineAPIMigration) {
		want = featuregate.FeatureSpec{Default: true, PreRelease: featuregate.GA}
	}
	if spec := gate.GetAll()[f]; spec.Default != want.Default || spec.PreRelease != want.PreRelease {
		t.Errorf("%s registered as %+v, want %+v", f, spec, want)
	}
}

func TestTranslateGivesMachineAPIOperatorItsErrors(t *testing.T) {
	cause := errors.New("throttled")
	err := translate(machine.RequeueAfter(7*time.Second, "AWSThrottled", cause))
	if rq, ok := errors.AsType[*maoctrl.RequeueAfterError](err); !ok || rq.RequeueAfter != 7*time.Second {
		t.Errorf("requeue: %v, want machine-api-operator's RequeueAfterError of 7s", err)
	}
	if !errors.Is(err, cause) {
		t.Errorf("requeue: %v lost machina's cause", err)
	}
	err = translate(machine.InvalidConfiguration("spec.providerSpec.value.ami: Required value"))
	if me, ok := errors.AsType[*maoctrl.MachineError](err); !ok || me.Reason != machinev1beta1.InvalidConfigurationMachineError ||
		me.Message != "spec.providerSpec.value.ami: Required value" {
		t.Errorf("terminal: %v, want machine-api-operator's MachineError InvalidConfiguration", err)
	}
	if translate(nil) != nil || !errors.Is(translate(cause), cause) {
		t.Error("nil and other errors must pass through")
	}
}

// launcher is an actuator that records an instance on the Machine, as machina's do.
type launcher struct{ machine.Actuator }

func (launcher) Create(_ context.Context, m *machinev1beta1.Machine) error {
	m.Spec.ProviderID = ptr.To("aws:///us-east-1a/i-0123")
	m.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "10.0.0.9"}}
	m.Annotations = map[string]string{"machine.openshift.io/instance-state": "pending"}
	return machine.RequeueAfter(time.Second, "Launching", errors.New("not running yet"))
}

func TestCreateStoresWhatTheActuatorRecorded(t *testing.T) {
	s := runtime.NewScheme()
	if err := machinev1beta1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	m := &machinev1beta1.Machine{ObjectMeta: metav1.ObjectMeta{Name: "m", Namespace: "ns"}}
	c := fake.NewClientBuilder().WithScheme(s).WithObjects(m).WithStatusSubresource(m).Build()
	ctx := context.Background()
	if err := c.Get(ctx, client.ObjectKeyFromObject(m), m); err != nil {
		t.Fatal(err)
	}
	a := &Actuator{Machina: launcher{}, Client: c}
	if _, ok := errors.AsType[*maoctrl.RequeueAfterError](a.Create(ctx, m)); !ok {
		t.Fatal("the actuator's requeue was not translated")
	}
	got := &machinev1beta1.Machine{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(m), got); err != nil {
		t.Fatal(err)
	}
	if ptr.Deref(got.Spec.ProviderID, "") != "aws:///us-east-1a/i-0123" || len(got.Status.Addresses) != 1 ||
		got.Annotations["machine.openshift.io/instance-state"] != "pending" {
		t.Errorf("stored %+v %+v %v: want the provider ID, address and annotation the actuator set",
			got.Spec.ProviderID, got.Status.Addresses, got.Annotations)
	}
}

// racedLauncher launches as launcher does while another writer changes the stored Machine:
// a migration starts (status Migrating, a Synchronized condition of the sync's) and a user
// labels it.
type racedLauncher struct {
	launcher
	c client.Client
}

func (r racedLauncher) Create(ctx context.Context, m *machinev1beta1.Machine) error {
	cur := &machinev1beta1.Machine{}
	if err := r.c.Get(ctx, client.ObjectKeyFromObject(m), cur); err != nil {
		return err
	}
	cur.Labels = map[string]string{"team": "a"}
	if err := r.c.Update(ctx, cur); err != nil {
		return err
	}
	cur.Status.AuthoritativeAPI = machinev1beta1.MachineAuthorityMigrating
	cur.Status.Conditions = []machinev1beta1.Condition{{Type: "Synchronized", Status: corev1.ConditionTrue}}
	if err := r.c.Status().Update(ctx, cur); err != nil {
		return err
	}
	return r.launcher.Create(ctx, m)
}

// TestCreateStoresTheLaunchDespiteAnotherWriter: the Machine changed while the instance was
// being launched; the launch's provider ID, address and annotation are still stored (next to
// what the other writer stored), since machine-api-operator's controller may find the Machine
// paused on its next pass and never ask the actuator again.
func TestCreateStoresTheLaunchDespiteAnotherWriter(t *testing.T) {
	s := runtime.NewScheme()
	if err := machinev1beta1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	m := &machinev1beta1.Machine{ObjectMeta: metav1.ObjectMeta{Name: "m", Namespace: "ns"}}
	c := fake.NewClientBuilder().WithScheme(s).WithObjects(m).WithStatusSubresource(m).Build()
	ctx := context.Background()
	if err := c.Get(ctx, client.ObjectKeyFromObject(m), m); err != nil {
		t.Fatal(err)
	}
	a := &Actuator{Machina: racedLauncher{c: c}, Client: c}
	if _, ok := errors.AsType[*maoctrl.RequeueAfterError](a.Create(ctx, m)); !ok {
		t.Fatal("the actuator's requeue was not translated")
	}
	got := &machinev1beta1.Machine{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(m), got); err != nil {
		t.Fatal(err)
	}
	if ptr.Deref(got.Spec.ProviderID, "") != "aws:///us-east-1a/i-0123" || len(got.Status.Addresses) != 1 ||
		got.Annotations["machine.openshift.io/instance-state"] != "pending" {
		t.Errorf("stored %+v %+v %v: want the provider ID, address and annotation the actuator set",
			got.Spec.ProviderID, got.Status.Addresses, got.Annotations)
	}
	if got.Labels["team"] != "a" || got.Status.AuthoritativeAPI != machinev1beta1.MachineAuthorityMigrating || len(got.Status.Conditions) != 1 {
		t.Errorf("the other writer's label, authority and condition were lost: %v %s %+v", got.Labels, got.Status.AuthoritativeAPI, got.Status.Conditions)
	}
}

// TestRebaseKeepsAnotherInstance: a provider ID stored meanwhile that names another instance
// is not overwritten.
func TestRebaseKeepsAnotherInstance(t *testing.T) {
	before := &machinev1beta1.Machine{ObjectMeta: metav1.ObjectMeta{Name: "m"}}
	after := before.DeepCopy()
	after.Spec.ProviderID = ptr.To("aws:///us-east-1a/i-1")
	fresh := before.DeepCopy()
	fresh.Spec.ProviderID = ptr.To("aws:///us-east-1a/i-2")
	if _, err := rebase(fresh, before, after); err == nil {
		t.Fatal("rebase overwrote another instance's provider ID")
	}
}
