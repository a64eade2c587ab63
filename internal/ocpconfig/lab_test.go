package ocpconfig_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	configv1 "github.com/openshift/api/config/v1"
	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/machina-dev/machina/internal/manager"
	"github.com/machina-dev/machina/internal/ocpconfig"
	"github.com/machina-dev/machina/internal/scheme"
	"github.com/machina-dev/machina/internal/testenv"
)

const (
	mapiNS  = manager.DefaultMachineAPINamespace
	capiNS  = manager.DefaultClusterAPINamespace
	version = "4.22.0"
	// maoUser is machine-api-operator's identity, which owns the ClusterOperator.
	maoUser = "system:serviceaccount:openshift-machine-api:machine-api-operator"
)

func simMachine(name string, spec *runtime.RawExtension) *machinev1beta1.Machine {
	return &machinev1beta1.Machine{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: mapiNS,
		Labels: map[string]string{"machine.openshift.io/cluster-api-cluster": "lab"}},
		Spec: machinev1beta1.MachineSpec{ProviderSpec: machinev1beta1.ProviderSpec{Value: spec}}}
}

// setGate writes the FeatureGate's status as the config operator would: one entry, for the
// cluster's version, with MachineAPIMigration enabled or disabled.
func setGate(t *testing.T, c client.Client, enabled bool) {
	t.Helper()
	ctx := context.Background()
	fg := &configv1.FeatureGate{}
	if err := c.Get(ctx, client.ObjectKey{Name: ocpconfig.FeatureGateName}, fg); err != nil {
		t.Fatal(err)
	}
	d := configv1.FeatureGateDetails{Version: version}
	gate := []configv1.FeatureGateAttributes{{Name: ocpconfig.MachineAPIMigration}}
	if enabled {
		d.Enabled = gate
	} else {
		d.Disabled = gate
	}
	fg.Status.FeatureGates = []configv1.FeatureGateDetails{d}
	if err := c.Status().Update(ctx, fg); err != nil {
		t.Fatal(err)
	}
}

func condition(co *configv1.ClusterOperator, t configv1.ClusterStatusConditionType) *configv1.ClusterOperatorStatusCondition {
	for i := range co.Status.Conditions {
		if co.Status.Conditions[i].Type == t {
			return &co.Status.Conditions[i]
		}
	}
	return nil
}

func describe(c *configv1.ClusterOperatorStatusCondition) string {
	if c == nil {
		return "<none>"
	}
	return fmt.Sprintf("%s %s %q", c.Status, c.Reason, c.Message)
}

// On an OpenShift cluster (the lab serving the config API, with a FeatureGate, a ClusterVersion
// and machine-api-operator's ClusterOperator) the sync and migration run only while the
// FeatureGate enables MachineAPIMigration, say so on the ClusterOperator when it does not, and
// report a sync failure there without disturbing machine-api-operator's own conditions.
func TestOpenShiftFeatureGateAndClusterOperator(t *testing.T) {
	e := testenv.Start(t, testenv.Options{Groups: "sync,migration"})
	e.SeedCluster("lab")
	ctx := context.Background()

	// The cluster's config objects, before the manager starts again: the gate is off.
	e.StopManager()
	cv := &configv1.ClusterVersion{ObjectMeta: metav1.ObjectMeta{Name: ocpconfig.ClusterVersionName},
		Spec: configv1.ClusterVersionSpec{ClusterID: "5b3b4c3e-0000-4000-8000-000000000001"}}
	if err := e.Client.Create(ctx, cv); err != nil {
		t.Fatal(err)
	}
	cv.Status.Desired.Version = version
	cv.Status.Desired.Image = "example.com/ocp-release:" + version
	cv.Status.VersionHash = "x"
	if err := e.Client.Status().Update(ctx, cv); err != nil {
		t.Fatal(err)
	}
	if err := e.Client.Create(ctx, &configv1.FeatureGate{ObjectMeta: metav1.ObjectMeta{Name: ocpconfig.FeatureGateName}}); err != nil {
		t.Fatal(err)
	}
	setGate(t, e.Client, false)
	maoCfg, err := e.Lab.UserConfig(maoUser, "system:masters")
	if err != nil {
		t.Fatal(err)
	}
	mao, err := client.New(maoCfg, client.Options{Scheme: scheme.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	co := &configv1.ClusterOperator{ObjectMeta: metav1.ObjectMeta{Name: ocpconfig.ClusterOperatorName}}
	if err := mao.Create(ctx, co); err != nil {
		t.Fatal(err)
	}
	maoConditions := []configv1.ClusterOperatorStatusCondition{
		{Type: configv1.OperatorAvailable, Status: configv1.ConditionTrue, Reason: "AsExpected", Message: "Cluster Machine API Operator is available at " + version},
		{Type: configv1.OperatorProgressing, Status: configv1.ConditionFalse, Reason: "AsExpected"},
		{Type: configv1.OperatorDegraded, Status: configv1.ConditionFalse, Reason: "AsExpected"},
	}
	for i := range maoConditions {
		maoConditions[i].LastTransitionTime = metav1.NewTime(time.Now().Add(-time.Hour).Truncate(time.Second))
	}
	co.Status.Conditions = maoConditions
	if err := mao.Status().Update(ctx, co); err != nil {
		t.Fatal(err)
	}
	e.StartManager()

	getCO := func(ctx context.Context) (*configv1.ClusterOperator, error) {
		co := &configv1.ClusterOperator{}
		return co, e.Client.Get(ctx, client.ObjectKey{Name: ocpconfig.ClusterOperatorName}, co)
	}
	// maoKept checks that machine-api-operator's conditions are as it wrote them.
	maoKept := func(co *configv1.ClusterOperator, want []configv1.ClusterOperatorStatusCondition) error {
		for _, w := range want {
			c := condition(co, w.Type)
			if c == nil || c.Status != w.Status || c.Reason != w.Reason || c.Message != w.Message || !c.LastTransitionTime.Equal(&w.LastTransitionTime) {
				return fmt.Errorf("machine-api-operator's %s is %s, want %s", w.Type, describe(c), describe(&w))
			}
		}
		return nil
	}
	waitConditions := func(what string, check func(sync, migration *configv1.ClusterOperatorStatusCondition) bool) {
		t.Helper()
		e.Eventually(60*time.Second, what, func(ctx context.Context) (bool, string, error) {
			co, err := getCO(ctx)
			if err != nil {
				return false, err.Error(), nil
			}
			s, m := condition(co, ocpconfig.SyncCondition), condition(co, ocpconfig.MigrationCondition)
			if err := maoKept(co, maoConditions); err != nil {
				return false, err.Error(), err
			}
			return check(s, m), "sync: " + describe(s) + "; migration: " + describe(m), nil
		})
	}

	// (a) The gate off: a Machine API Machine is not mirrored, and both groups say why.
	if err := e.Client.Create(ctx, simMachine("gated", testenv.SimProviderSpec("sim-east-1", "sim-east-1a", "s1.large"))); err != nil {
		t.Fatal(err)
	}
	off := func(c *configv1.ClusterOperatorStatusCondition, group string) bool {
		return c != nil && c.Status == configv1.ConditionFalse && c.Reason == ocpconfig.MachineAPIMigrationDisabledReason &&
			c.Message == `FeatureGate "cluster" (featureSet Default) does not enable MachineAPIMigration for version `+version+`: machina's `+group+` controllers do not run`
	}
	waitConditions("both groups report the gate off", func(s, m *configv1.ClusterOperatorStatusCondition) bool {
		return off(s, "sync") && off(m, "migration")
	})
	time.Sleep(3 * time.Second) // more than a resync period of every controller
	m := &machinev1beta1.Machine{}
	if err := e.Client.Get(ctx, client.ObjectKey{Namespace: mapiNS, Name: "gated"}, m); err != nil {
		t.Fatal(err)
	}
	if err := e.Client.Get(ctx, client.ObjectKey{Namespace: capiNS, Name: "gated"}, &clusterv1.Machine{}); !apierrors.IsNotFound(err) || m.Status.AuthoritativeAPI != "" {
		t.Fatalf("with MachineAPIMigration off the sync acted: Cluster API copy %v, status.authoritativeAPI %q", err, m.Status.AuthoritativeAPI)
	}

	// Enabled: the sync starts and mirrors the Machine; the conditions say all is well.
	setGate(t, e.Client, true)
	e.Eventually(60*time.Second, "the Machine mirrored once the gate is on", func(ctx context.Context) (bool, string, error) {
		err := e.Client.Get(ctx, client.ObjectKey{Namespace: capiNS, Name: "gated"}, &clusterv1.Machine{})
		return err == nil, fmt.Sprint(err), nil
	})
	waitConditions("both groups report all well", func(s, m *configv1.ClusterOperatorStatusCondition) bool {
		return s != nil && s.Status == configv1.ConditionFalse && s.Reason == ocpconfig.AsExpectedReason &&
			m != nil && m.Status == configv1.ConditionFalse && m.Reason == ocpconfig.AsExpectedReason
	})

	// (b) A Machine the sync cannot convert (another region than the cluster's): the sync's
	// condition turns True and names it.
	if err := e.Client.Create(ctx, simMachine("elsewhere", testenv.SimProviderSpec("sim-west-1", "sim-west-1a", "s1.large"))); err != nil {
		t.Fatal(err)
	}
	waitConditions("the unconvertible Machine on the ClusterOperator", func(s, _ *configv1.ClusterOperatorStatusCondition) bool {
		return s != nil && s.Status == configv1.ConditionTrue && s.Reason == ocpconfig.NotSynchronizedReason &&
			strings.HasPrefix(s.Message, "1 Machine API resource in "+mapiNS+" is not synchronized with the Cluster API (Synchronized=False): Machine elsewhere (ConversionFailed: ") &&
			strings.Contains(s.Message, "spec.providerSpec.value.region")
	})
	// machine-api-operator writes its conditions again (a full status update, as it does):
	// machina's stays, and machina's next writes keep machine-api-operator's.
	co, err = getCO(ctx)
	if err != nil {
		t.Fatal(err)
	}
	maoConditions[1] = configv1.ClusterOperatorStatusCondition{Type: configv1.OperatorProgressing, Status: configv1.ConditionTrue,
		Reason: "SyncingResources", Message: "Progressing towards operator: " + version, LastTransitionTime: metav1.NewTime(time.Now().Truncate(time.Second))}
	*condition(co, configv1.OperatorProgressing) = maoConditions[1]
	if err := mao.Status().Update(ctx, co); err != nil {
		t.Fatal(err)
	}
	if err := e.Client.Delete(ctx, simMachine("elsewhere", nil)); err != nil {
		t.Fatal(err)
	}
	waitConditions("the sync's condition back to AsExpected, machine-api-operator's new Progressing kept", func(s, _ *configv1.ClusterOperatorStatusCondition) bool {
		return s != nil && s.Status == configv1.ConditionFalse && s.Reason == ocpconfig.AsExpectedReason
	})

	// The gate turned off again: the controllers stop, a new Machine is not mirrored, and the
	// conditions say so.
	setGate(t, e.Client, false)
	waitConditions("both groups report the gate off again", func(s, m *configv1.ClusterOperatorStatusCondition) bool {
		return off(s, "sync") && off(m, "migration")
	})
	if err := e.Client.Create(ctx, simMachine("after", testenv.SimProviderSpec("sim-east-1", "sim-east-1a", "s1.large"))); err != nil {
		t.Fatal(err)
	}
	time.Sleep(3 * time.Second)
	if err := e.Client.Get(ctx, client.ObjectKey{Namespace: capiNS, Name: "after"}, &clusterv1.Machine{}); !apierrors.IsNotFound(err) {
		t.Fatalf("with MachineAPIMigration turned off the sync still mirrored a new Machine: %v", err)
	}
}
