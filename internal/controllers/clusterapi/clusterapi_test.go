package clusterapi_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/machina-dev/machina/api/infrastructure/v1alpha1"
	"github.com/machina-dev/machina/internal/cloud/api"
	"github.com/machina-dev/machina/internal/cloud/server"
	"github.com/machina-dev/machina/internal/controllers/clusterapi"
	"github.com/machina-dev/machina/internal/controllers/clusterapi/internal/capitest"
	"github.com/machina-dev/machina/internal/controllers/sim"
	"github.com/machina-dev/machina/internal/controllers/sim/simmachine"
	"github.com/machina-dev/machina/internal/testenv"
)

const (
	ns            = "default"
	bootstrapData = "bootstrap-data"
	userData      = "#!/bin/sh\necho hello from the bootstrap secret\n"
)

var env *testenv.Env

func TestClusterAPI(t *testing.T) {
	env = testenv.Start(t, testenv.Options{Groups: clusterapi.GroupName + "," + sim.GroupName,
		Delays: server.Delays{Pending: 300 * time.Millisecond, ShuttingDown: 300 * time.Millisecond}})
	e := env
	capitest.NewBootstrapData(t, e, bootstrapData, userData)
	newCluster(t, e, "main", false)

	t.Run("ClusterProvisionsItsInfrastructure", testClusterProvisioned)
	t.Run("MachineProvisionsWithNodeLabelsAndTaints", testMachineProvisions)
	t.Run("V1Beta1ContractProvider", testV1Beta1Provider)
	t.Run("PausedAnnotation", testPausedAnnotation)
	t.Run("PausedCluster", testPausedCluster)
	t.Run("DeletionWalksEveryStep", testDeletionSteps)
	t.Run("DrainTimeoutAndExclusion", testDrainTimeoutAndExclusion)
	t.Run("DrainRulesAndPodLabel", testDrainRules)
	t.Run("ClusterctlDescribeShowsEveryStatus", testClusterctlDescribe)
	t.Run("SimMachineAdoptsInstanceByProviderID", testAdopt)
	t.Run("InvalidSpecIsTerminalOutageIsRetried", testInvalidAndOutage)
	t.Run("RestartMidProvisioningCreatesOneInstance", testRestart)
	t.Run("ManagerNodeProtected", testManagerNodeProtected)
	t.Run("ClusterDeletionOrder", testClusterDeletion)
}

// Helpers shared with the other Cluster API controller tests.
var (
	newCluster   = capitest.NewCluster
	waitGone     = capitest.WaitGone
	conds        = capitest.Conds
	condition    = capitest.Condition
	eventReasons = capitest.EventReasons
)

// newMachine creates a SimMachine and a Machine referencing it; mutate may change the
// Machine before it is created.
func newMachine(t *testing.T, e *testenv.Env, cluster, name string, mutate func(*clusterv1.Machine)) *clusterv1.Machine {
	t.Helper()
	ctx := context.Background()
	sm := &infrav1.SimMachine{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: infrav1.SimMachineSpec{InstanceSpec: infrav1.InstanceSpec{InstanceType: "s1.small", Image: "sim-rhcos-9"}}}
	m := &clusterv1.Machine{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: clusterv1.MachineSpec{ClusterName: cluster, FailureDomain: "sim-east-1b",
			Bootstrap: clusterv1.Bootstrap{DataSecretName: ptr.To(bootstrapData)},
			InfrastructureRef: clusterv1.ContractVersionedObjectReference{
				APIGroup: infrav1.GroupVersion.Group, Kind: "SimMachine", Name: name}}}
	if mutate != nil {
		mutate(m)
	}
	if err := e.Client.Create(ctx, sm); err != nil {
		t.Fatal(err)
	}
	if err := e.Client.Create(ctx, m); err != nil {
		t.Fatal(err)
	}
	return m
}

func getMachine(ctx context.Context, e *testenv.Env, name string) (*clusterv1.Machine, error) {
	m := &clusterv1.Machine{}
	return m, e.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, m)
}

func getSimMachine(ctx context.Context, e *testenv.Env, name string) (*infrav1.SimMachine, error) {
	sm := &infrav1.SimMachine{}
	return sm, e.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, sm)
}

// waitMachine polls the Machine until ok accepts it.
func waitMachine(t *testing.T, e *testenv.Env, name, what string, timeout time.Duration, ok func(*clusterv1.Machine) bool) *clusterv1.Machine {
	t.Helper()
	var m *clusterv1.Machine
	e.Eventually(timeout, "Machine "+name+": "+what, func(ctx context.Context) (bool, string, error) {
		var err error
		if m, err = getMachine(ctx, e, name); err != nil {
			return false, err.Error(), nil
		}
		return ok(m), fmt.Sprintf("phase %q %s", m.Status.Phase, conds(m.Status.Conditions)), nil
	})
	return m
}

func waitPhase(t *testing.T, e *testenv.Env, name string, p clusterv1.MachinePhase, timeout time.Duration) *clusterv1.Machine {
	t.Helper()
	return waitMachine(t, e, name, "phase "+string(p), timeout, func(m *clusterv1.Machine) bool { return m.Status.Phase == string(p) })
}

// waitDeleting waits for the Machine's Deleting condition to have the reason.
func waitDeleting(t *testing.T, e *testenv.Env, name, reason string) *clusterv1.Machine {
	t.Helper()
	return waitMachine(t, e, name, "Deleting reason "+reason, 60*time.Second, func(m *clusterv1.Machine) bool {
		c := meta.FindStatusCondition(m.Status.Conditions, clusterv1.MachineDeletingCondition)
		return c != nil && c.Status == metav1.ConditionTrue && c.Reason == reason
	})
}

func isTrue(cs []metav1.Condition, t string) bool { return meta.IsStatusConditionTrue(cs, t) }

// instances lists the cloud instances launched for a SimMachine.
func instances(e *testenv.Env, sm *infrav1.SimMachine) []api.Instance {
	return e.InstancesTagged(simmachine.TagSimMachineUID, string(sm.UID))
}

// patchMachine applies mutate to the current Machine with a merge patch.
func patchMachine(t *testing.T, e *testenv.Env, name string, mutate func(*clusterv1.Machine)) {
	t.Helper()
	capitest.Patch(t, e, &clusterv1.Machine{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}, mutate)
}

// indexOf returns the position of s in list, -1 when absent.
func indexOf(list []string, s string) int {
	for i, x := range list {
		if x == s {
			return i
		}
	}
	return -1
}
