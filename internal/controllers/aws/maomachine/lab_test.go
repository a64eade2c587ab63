package maomachine_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	maoctrl "github.com/openshift/machine-api-operator/pkg/controller/machine"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/machina-dev/machina/internal/cloud/api"
	"github.com/machina-dev/machina/internal/controllers/aws/awsactuator"
	"github.com/machina-dev/machina/internal/controllers/aws/maomachine"
	"github.com/machina-dev/machina/internal/demo"
	"github.com/machina-dev/machina/internal/lab"
	"github.com/machina-dev/machina/internal/manager"
	"github.com/machina-dev/machina/internal/testenv"
	"github.com/machina-dev/machina/internal/upstream"
)

// maoRBACManifest is where machine-api-operator's module keeps the RBAC of its controllers.
const maoRBACManifest = "install/0000_30_machine-api-operator_09_rbac.yaml"

// TestSameMachineAPIOperatorAsTheLab checks that the machine-api-operator this package is
// built with is the revision the lab builds machine-api-operator's other commands from, so the
// Machine controller and the MachineSet, health-check and NodeLink controllers beside it are
// one release.
func TestSameMachineAPIOperatorAsTheLab(t *testing.T) {
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Version}}", "github.com/openshift/machine-api-operator").Output()
	if err != nil {
		t.Fatalf("go list -m: %v", err)
	}
	if v := strings.TrimSpace(string(out)); v != lab.MAOVersion {
		t.Errorf("go.mod requires machine-api-operator %s, the lab builds %s (lab.MAOVersion)", v, lab.MAOVersion)
	}
}

// TestMachineAPIOperatorMachineController runs machine-api-operator's Machine controller with
// machina's EC2 actuator against a lab and the simulated cloud's EC2 front, as OpenShift
// runs machine-api-provider-aws's: as the machine-api-controllers ServiceAccount with
// machine-api-operator's own RBAC, watching the Machine API namespace, MachineAPIMigration on.
// Beside it run only machina's "machineapi" group, whose Machine controller leaves AWS
// Machines alone and whose NodeLink gives a Machine its Node; no AWS Machine controller of
// machina's runs, so whatever provisions a Machine here is machine-api-operator's.
func TestMachineAPIOperatorMachineController(t *testing.T) {
	env := testenv.Start(t, testenv.Options{Groups: "machineapi", EC2: true})
	cl := seedAWSCluster(t, env)
	startController(t, env)

	var running *machinev1beta1.Machine
	t.Run("MachineAPI authority: launched and Running", func(t *testing.T) {
		m := createMachine(t, env, cl, "mao-worker", machinev1beta1.MachineAuthorityMachineAPI)
		running = waitMachine(t, env, m, 3*time.Minute, "Running with a provider ID", func(m *machinev1beta1.Machine) bool {
			return ptr.Deref(m.Status.Phase, "") == machinev1beta1.PhaseRunning && ptr.Deref(m.Spec.ProviderID, "") != ""
		})
		paused := condition(running, maoctrl.PausedCondition)
		if paused == nil || paused.Status != corev1.ConditionFalse || paused.Reason != maoctrl.NotPausedConditionReason {
			t.Errorf("Paused condition %+v, want False with reason %s", paused, maoctrl.NotPausedConditionReason)
		}
		insts := env.For(t).InstancesTagged(awsactuator.TagMachineUID, string(running.UID))
		if len(insts) != 1 || insts[0].State != api.StateRunning || running.Status.NodeRef == nil {
			t.Fatalf("instances %+v, nodeRef %v: want one running instance and a Node", insts, running.Status.NodeRef)
		}
		t.Logf("%s: phase %s, providerID %s, Node %s, instance %s %s", running.Name, ptr.Deref(running.Status.Phase, ""),
			ptr.Deref(running.Spec.ProviderID, ""), running.Status.NodeRef.Name, insts[0].InstanceID, insts[0].State)
	})

	t.Run("ClusterAPI authority: paused, nothing launched", func(t *testing.T) {
		m := createMachine(t, env, cl, "mao-mirror", machinev1beta1.MachineAuthorityClusterAPI)
		mirrorStatus(t, env, m)
		m = waitMachine(t, env, m, time.Minute, "Paused", func(m *machinev1beta1.Machine) bool {
			c := condition(m, maoctrl.PausedCondition)
			return c != nil && c.Status == corev1.ConditionTrue && c.Reason == maoctrl.PausedConditionReason
		})
		// A pass that went on past the gate would have added the finalizer before launching.
		time.Sleep(3 * time.Second)
		if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(m), m); err != nil {
			t.Fatal(err)
		}
		insts := env.For(t).InstancesTagged(awsactuator.TagMachineUID, string(m.UID))
		if len(insts) != 0 || len(m.Finalizers) != 0 || ptr.Deref(m.Spec.ProviderID, "") != "" {
			t.Fatalf("paused Machine: instances %+v, finalizers %v, providerID %q: want none", insts, m.Finalizers, ptr.Deref(m.Spec.ProviderID, ""))
		}
		t.Logf("%s: status.authoritativeAPI %s, %s", m.Name, m.Status.AuthoritativeAPI, describe(m))
	})

	t.Run("deleting the Machine terminates its instance", func(t *testing.T) {
		if running == nil {
			t.Skip("no running Machine")
		}
		deleteMachine(t, env, running)
		insts := env.For(t).InstancesTagged(awsactuator.TagMachineUID, string(running.UID))
		if len(insts) != 1 || insts[0].State != api.StateTerminated {
			t.Fatalf("instances %+v: want the one instance terminated", insts)
		}
		t.Logf("%s deleted; instance %s %s", running.Name, insts[0].InstanceID, insts[0].State)
	})
}

// seedAWSCluster creates the demo AWS cluster's Infrastructure, namespaces and Secrets.
func seedAWSCluster(t *testing.T, env *testenv.Env) demo.AWSCluster {
	t.Helper()
	kc, err := os.ReadFile(env.Lab.KubeconfigPath)
	if err != nil {
		t.Fatal(err)
	}
	mapiNS, capiNS := manager.Env{}.Namespaces()
	cl := demo.DefaultAWSCluster(mapiNS, capiNS, kc)
	if err := demo.EnsureAWSClusterObjects(context.Background(), env.Client, cl); err != nil {
		t.Fatal(err)
	}
	return cl
}

// startController runs machine-api-operator's Machine controller (maomachine.Add) in a
// manager of its own, as machine-api-operator's ServiceAccount with its own RBAC, until the
// test ends.
func startController(t *testing.T, env *testenv.Env) {
	t.Helper()
	ctx := context.Background()
	dir, err := lab.ModuleDir("github.com/openshift/machine-api-operator/pkg/controller/machine")
	if err != nil {
		t.Fatal(err)
	}
	if err := env.Lab.InstallMAORBAC(ctx, filepath.Join(dir, maoRBACManifest)); err != nil {
		t.Fatal(err)
	}
	cfg, err := env.Lab.MAOConfig()
	if err != nil {
		t.Fatal(err)
	}
	mgr, err := maomachine.NewManager(cfg, lab.MAONamespace, upstream.LabAWS(env.EC2URL))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("machine-api-operator's manager: %v", err)
		}
	})
}

// createMachine creates a Machine of the demo cluster with the worker providerSpec of its
// first zone and the given spec.authoritativeAPI.
func createMachine(t *testing.T, env *testenv.Env, cl demo.AWSCluster, name string, authority machinev1beta1.MachineAuthority) *machinev1beta1.Machine {
	t.Helper()
	ms := cl.MachineSet("template", cl.Zones[0], 0)
	raw, err := json.Marshal(ms.Spec.Template.Spec.ProviderSpec.Value)
	if err != nil {
		t.Fatal(err)
	}
	m := &machinev1beta1.Machine{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: cl.MachineAPINamespace,
			Labels: map[string]string{machinev1beta1.MachineClusterIDLabel: cl.Name}},
		Spec: machinev1beta1.MachineSpec{AuthoritativeAPI: authority,
			ProviderSpec: machinev1beta1.ProviderSpec{Value: &runtime.RawExtension{Raw: raw}}},
	}
	if err := env.Client.Create(context.Background(), m); err != nil {
		t.Fatalf("creating Machine %s: %v", name, err)
	}
	return m
}

// mirrorStatus gives the Machine the status machina's sync gives the mirror of a Cluster API
// Machine (its authority and a phase), with machina's identity. Until a mirror has a phase,
// machine-api-operator's paused write (which would record an empty one) is refused by machina's
// machina-mirror-status policy, like any other status write on a mirror.
func mirrorStatus(t *testing.T, env *testenv.Env, m *machinev1beta1.Machine) {
	t.Helper()
	p := client.RawPatch(types.MergePatchType, []byte(`{"status":{"authoritativeAPI":"ClusterAPI","phase":"Provisioning"}}`))
	if err := env.ManagerClient().Status().Patch(context.Background(), m, p); err != nil {
		t.Fatal(err)
	}
}

// waitMachine waits until cond holds for the Machine and returns it.
func waitMachine(t *testing.T, env *testenv.Env, m *machinev1beta1.Machine, timeout time.Duration, what string,
	cond func(*machinev1beta1.Machine) bool) *machinev1beta1.Machine {
	t.Helper()
	cur := &machinev1beta1.Machine{}
	env.For(t).Eventually(timeout, m.Name+": "+what, func(ctx context.Context) (bool, string, error) {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(m), cur); err != nil {
			return false, err.Error(), nil
		}
		return cond(cur), describe(cur), nil
	})
	return cur
}

// deleteMachine deletes the Machine and waits until it is gone.
func deleteMachine(t *testing.T, env *testenv.Env, m *machinev1beta1.Machine) {
	t.Helper()
	if err := env.Client.Delete(context.Background(), m); err != nil {
		t.Fatal(err)
	}
	env.For(t).Eventually(3*time.Minute, m.Name+" deleted", func(ctx context.Context) (bool, string, error) {
		cur := &machinev1beta1.Machine{}
		err := env.Client.Get(ctx, client.ObjectKeyFromObject(m), cur)
		if apierrors.IsNotFound(err) {
			return true, "", nil
		}
		if err != nil {
			return false, err.Error(), nil
		}
		return false, describe(cur), nil
	})
}

func condition(m *machinev1beta1.Machine, t machinev1beta1.ConditionType) *machinev1beta1.Condition {
	for i := range m.Status.Conditions {
		if m.Status.Conditions[i].Type == t {
			return &m.Status.Conditions[i]
		}
	}
	return nil
}

// describe summarises a Machine for failure messages.
func describe(m *machinev1beta1.Machine) string {
	var conds []string
	for _, c := range m.Status.Conditions {
		conds = append(conds, fmt.Sprintf("%s=%s(%s)", c.Type, c.Status, c.Reason))
	}
	return fmt.Sprintf("phase %q providerID %q finalizers %v conditions %v", ptr.Deref(m.Status.Phase, ""),
		ptr.Deref(m.Spec.ProviderID, ""), m.Finalizers, conds)
}
