package ocpconfig

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	configv1 "github.com/openshift/api/config/v1"
	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/machina-dev/machina/internal/scheme"
)

func featureGate(set configv1.FeatureSet, entries ...configv1.FeatureGateDetails) *configv1.FeatureGate {
	fg := &configv1.FeatureGate{ObjectMeta: metav1.ObjectMeta{Name: FeatureGateName}}
	fg.Spec.FeatureSet = set
	fg.Status.FeatureGates = entries
	return fg
}

func entry(version string, enabled bool) configv1.FeatureGateDetails {
	d := configv1.FeatureGateDetails{Version: version,
		Enabled:  []configv1.FeatureGateAttributes{{Name: "SomethingElse"}},
		Disabled: []configv1.FeatureGateAttributes{{Name: "AnotherOne"}}}
	if enabled {
		d.Enabled = append(d.Enabled, configv1.FeatureGateAttributes{Name: MachineAPIMigration})
	} else {
		d.Disabled = append(d.Disabled, configv1.FeatureGateAttributes{Name: MachineAPIMigration})
	}
	return d
}

// The rule that picks the FeatureGate's entry: the cluster's desired version, else the only
// entry, else none (undetermined, the groups wait).
func TestFromFeatureGate(t *testing.T) {
	for _, tc := range []struct {
		name                  string
		fg                    *configv1.FeatureGate
		desired               string
		enabled, undetermined bool
		version, why          string
	}{
		{"the desired version's entry, enabled", featureGate("TechPreviewNoUpgrade", entry("4.21.3", false), entry("4.22.0", true)), "4.22.0",
			true, false, "4.22.0", `FeatureGate "cluster" (featureSet TechPreviewNoUpgrade) enables MachineAPIMigration for version 4.22.0`},
		{"the desired version's entry, disabled although another version's enables it", featureGate("", entry("4.21.3", true), entry("4.22.0", false)), "4.22.0",
			false, false, "4.22.0", `FeatureGate "cluster" (featureSet Default) does not enable MachineAPIMigration for version 4.22.0`},
		{"the only entry when the desired version has none", featureGate("CustomNoUpgrade", entry("4.21.3", true)), "4.22.0",
			true, false, "4.21.3", "enables MachineAPIMigration for version 4.21.3"},
		{"the only entry without a ClusterVersion", featureGate("", entry("4.21.3", false)), "",
			false, false, "4.21.3", "does not enable MachineAPIMigration for version 4.21.3"},
		{"listed nowhere: off", featureGate("", configv1.FeatureGateDetails{Version: "4.22.0"}), "4.22.0",
			false, false, "4.22.0", "does not enable"},
		{"no entry yet", featureGate(""), "4.22.0", false, true, "", `FeatureGate "cluster" lists no feature gates yet`},
		{"several entries, none for the desired version", featureGate("", entry("4.20.1", true), entry("4.21.3", true)), "4.22.0",
			false, true, "", "lists feature gates for versions 4.20.1, 4.21.3 but not for the cluster's version 4.22.0"},
		{"several entries and no ClusterVersion", featureGate("", entry("4.20.1", true), entry("4.21.3", true)), "",
			false, true, "", `no ClusterVersion "version" to choose among them`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := FromFeatureGate(tc.fg, tc.desired)
			if !s.Checked || s.Enabled != tc.enabled || s.Undetermined() != tc.undetermined || s.Version != tc.version || s.Operate() != tc.enabled {
				t.Errorf("got %+v (undetermined %v), want enabled %v undetermined %v version %q", s, s.Undetermined(), tc.enabled, tc.undetermined, tc.version)
			}
			if !strings.Contains(s.Why, tc.why) {
				t.Errorf("why %q, want it to contain %q", s.Why, tc.why)
			}
		})
	}
}

func fakeClient(objs ...client.Object) client.WithWatch {
	return fake.NewClientBuilder().WithScheme(scheme.Scheme).WithObjects(objs...).
		WithStatusSubresource(&configv1.ClusterOperator{}).Build()
}

func clusterVersion(desired string) *configv1.ClusterVersion {
	cv := &configv1.ClusterVersion{ObjectMeta: metav1.ObjectMeta{Name: ClusterVersionName}}
	cv.Status.Desired.Version = desired
	return cv
}

func TestReadGate(t *testing.T) {
	ctx := context.Background()
	s, err := ReadGate(ctx, fakeClient())
	if err != nil || s.Checked || !s.Operate() || !strings.Contains(s.Why, "serves no FeatureGate") {
		t.Errorf("no FeatureGate: %+v, %v; want unchecked and operating", s, err)
	}
	// A cluster that does not serve the kind at all (plain Kubernetes without the CRD).
	noKinds := fake.NewClientBuilder().WithScheme(scheme.Scheme).WithInterceptorFuncs(interceptor.Funcs{
		Get: func(context.Context, client.WithWatch, client.ObjectKey, client.Object, ...client.GetOption) error {
			return &meta.NoKindMatchError{GroupKind: configv1.GroupVersion.WithKind("FeatureGate").GroupKind(), SearchedVersions: []string{"v1"}}
		}}).Build()
	s, err = ReadGate(ctx, noKinds)
	if err != nil || s.Checked || !s.Operate() {
		t.Errorf("FeatureGate kind not served: %+v, %v; want unchecked and operating", s, err)
	}
	s, err = ReadGate(ctx, fakeClient(featureGate("", entry("4.21.3", true), entry("4.22.0", false)), clusterVersion("4.22.0")))
	if err != nil || !s.Checked || s.Enabled || s.Version != "4.22.0" {
		t.Errorf("FeatureGate and ClusterVersion: %+v, %v; want the 4.22.0 entry, disabled", s, err)
	}
}

type runnable struct {
	started, stopped chan struct{}
	// err is what Start returns when stopped, as a controller still waiting for its caches does.
	err error
}

func (r *runnable) Start(ctx context.Context) error {
	close(r.started)
	<-ctx.Done()
	close(r.stopped)
	return r.err
}

func setGate(t *testing.T, c client.Client, enabled bool) {
	t.Helper()
	fg := &configv1.FeatureGate{}
	if err := c.Get(context.Background(), client.ObjectKey{Name: FeatureGateName}, fg); err != nil {
		t.Fatal(err)
	}
	fg.Status.FeatureGates = []configv1.FeatureGateDetails{entry("4.22.0", enabled)}
	if err := c.Update(context.Background(), fg); err != nil {
		t.Fatal(err)
	}
}

func closed(ch chan struct{}) bool {
	select {
	case <-ch:
		return true
	case <-time.After(2 * time.Second):
		return false
	}
}

// A gated controller waits for the gate, starts when it is enabled (after the group's check),
// stops when it is turned off, and the gate ends the manager when it is enabled once more.
func TestGateHoldsStartsStopsAndAsksForRestart(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c := fakeClient(featureGate("", entry("4.22.0", false)), clusterVersion("4.22.0"))
	checks := 0
	g, err := NewGate(ctx, "sync", c, time.Hour, func(context.Context) error { checks++; return nil })
	if err != nil {
		t.Fatal(err)
	}
	if checks != 0 || g.Running() {
		t.Fatalf("with the gate off the check ran %d times, running %v", checks, g.Running())
	}
	r := &runnable{started: make(chan struct{}), stopped: make(chan struct{}), err: errors.New("failed to wait for caches to sync: context canceled")}
	gr := &gatedRunnable{Runnable: r, gate: g}
	if !gr.NeedLeaderElection() {
		t.Error("a gated controller must still need leader election")
	}
	done := make(chan error, 1)
	go func() { done <- gr.Start(ctx) }()
	if closed(r.started) {
		t.Fatal("the controller started while the gate is off")
	}

	setGate(t, c, true)
	if err := g.look(ctx); err != nil {
		t.Fatal(err)
	}
	if !closed(r.started) || checks != 1 || !g.Running() {
		t.Fatalf("enabled: started %v, checks %d, running %v", closed(r.started), checks, g.Running())
	}

	setGate(t, c, false)
	if err := g.look(ctx); err != nil {
		t.Fatal(err)
	}
	if !closed(r.stopped) || g.Running() {
		t.Fatalf("turned off: stopped %v, running %v", closed(r.stopped), g.Running())
	}
	if err := <-done; err != nil {
		t.Fatalf("a controller the gate stopped must not fail the manager: %v", err)
	}

	setGate(t, c, true)
	if err := g.look(ctx); err == nil || !strings.Contains(err.Error(), "the manager stops to be started again") {
		t.Fatalf("enabled again: %v, want the manager stopped for a restart", err)
	}
}

// The group's check runs when the gate opens and its failure ends the manager with it.
func TestGateCheckFailsWhenItOpens(t *testing.T) {
	ctx := context.Background()
	c := fakeClient(featureGate("", entry("4.22.0", false)))
	g, err := NewGate(ctx, "migration", c, time.Hour, func(context.Context) error {
		return errors.New("CRD machines.machine.openshift.io lacks spec.authoritativeAPI")
	})
	if err != nil {
		t.Fatalf("the check must wait for the gate: %v", err)
	}
	setGate(t, c, true)
	if err := g.look(ctx); err == nil || err.Error() != "controller group migration: CRD machines.machine.openshift.io lacks spec.authoritativeAPI" {
		t.Fatalf("got %v", err)
	}
	// With the gate open at start the check fails the setup itself.
	if _, err := NewGate(ctx, "sync", c, time.Hour, func(context.Context) error { return errors.New("no") }); err == nil || err.Error() != "no" {
		t.Fatalf("got %v", err)
	}
}

func clusterOperator(conds ...configv1.ClusterOperatorStatusCondition) *configv1.ClusterOperator {
	co := &configv1.ClusterOperator{ObjectMeta: metav1.ObjectMeta{Name: ClusterOperatorName}}
	co.Status.Conditions = conds
	return co
}

// The reporter writes only its own condition, keeps the others, says when the gate is off,
// and writes nothing where there is no ClusterOperator.
func TestReporter(t *testing.T) {
	ctx := context.Background()
	mao := configv1.ClusterOperatorStatusCondition{Type: configv1.OperatorAvailable, Status: configv1.ConditionTrue, Reason: "AsExpected",
		Message: "Cluster Machine API Operator is available", LastTransitionTime: metav1.NewTime(time.Now().Add(-time.Hour).Truncate(time.Second))}
	c := fakeClient(featureGate("", entry("4.22.0", false)))
	g, err := NewGate(ctx, "sync", c, time.Hour, nil)
	if err != nil {
		t.Fatal(err)
	}
	health := Health{Reason: AsExpectedReason, Message: "fine"}
	r := &Reporter{Client: c, Reader: c, Gate: g, Condition: SyncCondition, Period: time.Hour,
		Health: func(context.Context) (Health, error) { return health, nil }}
	if err := r.Report(ctx); err != nil {
		t.Fatalf("without a ClusterOperator: %v", err)
	}
	if err := c.Get(ctx, client.ObjectKey{Name: ClusterOperatorName}, &configv1.ClusterOperator{}); err == nil {
		t.Fatal("the reporter created the ClusterOperator")
	}
	if err := c.Create(ctx, clusterOperator(mao)); err != nil {
		t.Fatal(err)
	}
	get := func() (*configv1.ClusterOperatorStatusCondition, *configv1.ClusterOperatorStatusCondition) {
		t.Helper()
		if err := r.Report(ctx); err != nil {
			t.Fatal(err)
		}
		co := &configv1.ClusterOperator{}
		if err := c.Get(ctx, client.ObjectKey{Name: ClusterOperatorName}, co); err != nil {
			t.Fatal(err)
		}
		var own, other *configv1.ClusterOperatorStatusCondition
		for i := range co.Status.Conditions {
			switch co.Status.Conditions[i].Type {
			case SyncCondition:
				own = &co.Status.Conditions[i]
			case configv1.OperatorAvailable:
				other = &co.Status.Conditions[i]
			}
		}
		if other == nil || other.Status != mao.Status || other.Message != mao.Message || !other.LastTransitionTime.Equal(&mao.LastTransitionTime) {
			t.Fatalf("machine-api-operator's condition changed: %+v", other)
		}
		if own == nil {
			t.Fatal("no condition written")
		}
		return own, other
	}
	own, _ := get()
	if own.Status != configv1.ConditionFalse || own.Reason != MachineAPIMigrationDisabledReason ||
		own.Message != `FeatureGate "cluster" (featureSet Default) does not enable MachineAPIMigration for version 4.22.0: machina's sync controllers do not run` {
		t.Errorf("gate off: %+v", own)
	}

	setGate(t, c, true)
	if err := g.look(ctx); err != nil {
		t.Fatal(err)
	}
	own, _ = get()
	if own.Status != configv1.ConditionFalse || own.Reason != AsExpectedReason || own.Message != "fine" {
		t.Errorf("running: %+v", own)
	}
	health = Health{Degraded: true, Reason: NotSynchronizedReason, Message: "broken"}
	own, _ = get()
	if own.Status != configv1.ConditionTrue || own.Reason != NotSynchronizedReason || own.Message != "broken" {
		t.Errorf("degraded: %+v", own)
	}
	// Unchanged: nothing is written.
	co := &configv1.ClusterOperator{}
	if err := c.Get(ctx, client.ObjectKey{Name: ClusterOperatorName}, co); err != nil {
		t.Fatal(err)
	}
	before := co.ResourceVersion
	get()
	if err := c.Get(ctx, client.ObjectKey{Name: ClusterOperatorName}, co); err != nil || co.ResourceVersion != before {
		t.Errorf("an unchanged condition was written again: resourceVersion %s -> %s (%v)", before, co.ResourceVersion, err)
	}
}

func machine(name string, spec, status machinev1beta1.MachineAuthority, conds ...machinev1beta1.Condition) *machinev1beta1.Machine {
	m := &machinev1beta1.Machine{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "openshift-machine-api"}}
	m.Spec.AuthoritativeAPI = spec
	m.Status.AuthoritativeAPI = status
	m.Status.Conditions = conds
	return m
}

func TestSyncHealth(t *testing.T) {
	ctx := context.Background()
	ok := machinev1beta1.Condition{Type: synchronizedCondition, Status: corev1.ConditionTrue}
	bad := func(reason, msg string) machinev1beta1.Condition {
		return machinev1beta1.Condition{Type: synchronizedCondition, Status: corev1.ConditionFalse, Reason: reason, Message: msg}
	}
	objs := []client.Object{machine("a", "MachineAPI", "MachineAPI", ok), machine("b", "MachineAPI", "MachineAPI")}
	h, err := SyncHealth(fakeClient(objs...), "openshift-machine-api")(ctx)
	if err != nil || h.Degraded || h.Reason != AsExpectedReason {
		t.Errorf("all synchronized: %+v, %v", h, err)
	}
	for _, n := range []string{"e", "d", "c", "f"} {
		objs = append(objs, machine(n, "MachineAPI", "MachineAPI", bad("ConversionFailed", "spec.providerSpec.value.region: Invalid value")))
	}
	ms := &machinev1beta1.MachineSet{ObjectMeta: metav1.ObjectMeta{Name: "set", Namespace: "openshift-machine-api"}}
	ms.Status.Conditions = []machinev1beta1.Condition{bad("MirrorWriteFailed", "held")}
	objs = append(objs, ms)
	h, err = SyncHealth(fakeClient(objs...), "openshift-machine-api")(ctx)
	want := "5 Machine API resources in openshift-machine-api are not synchronized with the Cluster API (Synchronized=False): " +
		"Machine c (ConversionFailed: spec.providerSpec.value.region: Invalid value); Machine d (ConversionFailed: spec.providerSpec.value.region: Invalid value); " +
		"Machine e (ConversionFailed: spec.providerSpec.value.region: Invalid value); and 2 more"
	if err != nil || !h.Degraded || h.Reason != NotSynchronizedReason || h.Message != want {
		t.Errorf("five unsynchronised:\n got %+v, %v\nwant %q", h, err, want)
	}
}

func TestMigrationHealth(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	clock := func() time.Time { return now }
	waiting := machinev1beta1.Condition{Type: migrationCondition, Status: corev1.ConditionFalse, Reason: "WaitingForPaused", Message: "the Machine API controller has not paused"}
	c := fakeClient(machine("moving", "ClusterAPI", "Migrating", waiting), machine("done", "ClusterAPI", "ClusterAPI"),
		machine("undecided", "MachineAPI", ""))
	health := MigrationHealth(c, "openshift-machine-api", 15*time.Minute, clock)
	h, err := health(ctx)
	if err != nil || h.Degraded {
		t.Fatalf("just seen: %+v, %v", h, err)
	}
	now = now.Add(16 * time.Minute)
	h, err = health(ctx)
	want := "1 authority migration in openshift-machine-api has been open longer than 15m0s: " +
		"Machine moving (to ClusterAPI, open since 2026-01-02T03:04:05Z; WaitingForPaused: the Machine API controller has not paused)"
	if err != nil || !h.Degraded || h.Reason != MigrationStuckReason || h.Message != want {
		t.Fatalf("after 16 minutes:\n got %+v, %v\nwant %q", h, err, want)
	}
	// Completed: no longer open, and forgotten.
	m := &machinev1beta1.Machine{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: "openshift-machine-api", Name: "moving"}, m); err != nil {
		t.Fatal(err)
	}
	m.Status.AuthoritativeAPI = "ClusterAPI"
	if err := c.Update(ctx, m); err != nil {
		t.Fatal(err)
	}
	if h, err = health(ctx); err != nil || h.Degraded {
		t.Fatalf("completed: %+v, %v", h, err)
	}
}
