package machinehealthcheck

import (
	"context"
	"testing"
	"time"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/machina-dev/machina/internal/scheme"
)

func check(maxUnhealthy string) *machinev1beta1.MachineHealthCheck {
	mhc := &machinev1beta1.MachineHealthCheck{Spec: machinev1beta1.MachineHealthCheckSpec{
		UnhealthyConditions: []machinev1beta1.UnhealthyCondition{
			{Type: corev1.NodeReady, Status: corev1.ConditionFalse, Timeout: metav1.Duration{Duration: 45 * time.Second}}},
		NodeStartupTimeout: &metav1.Duration{Duration: 10 * time.Minute},
	}}
	if maxUnhealthy != "" {
		mhc.Spec.MaxUnhealthy = ptr.To(intstr.Parse(maxUnhealthy))
	}
	return mhc
}

func machineCreated(name string, ago time.Duration, now time.Time) *machinev1beta1.Machine {
	return &machinev1beta1.Machine{ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID(name + "-uid"),
		CreationTimestamp: metav1.NewTime(now.Add(-ago))}}
}

func nodeReady(status corev1.ConditionStatus, since time.Duration, now time.Time) *corev1.Node {
	return &corev1.Node{Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{
		{Type: corev1.NodeReady, Status: status, LastTransitionTime: metav1.NewTime(now.Add(-since))}}}}
}

// The outage of the issue: three Machines, maxUnhealthy 1, Nodes failing 30 s apart. When the
// first is past its 45 s timeout the second is NotReady for 15 s: two are not healthy, so
// remediation stops, although only one is eligible for it yet.
func TestAssessCountsFailingMachinesWithinTheirTimeout(t *testing.T) {
	now := time.Now()
	targets := []target{
		{machine: machineCreated("a", time.Hour, now), node: nodeReady(corev1.ConditionFalse, 46*time.Second, now)},
		{machine: machineCreated("b", time.Hour, now), node: nodeReady(corev1.ConditionFalse, 16*time.Second, now)},
		{machine: machineCreated("c", time.Hour, now), node: nodeReady(corev1.ConditionTrue, time.Hour, now)},
	}
	v, err := assess(check("1"), targets, now)
	if err != nil {
		t.Fatal(err)
	}
	if v.allowed || v.healthy != 1 || v.expected != 3 || len(v.unhealthy) != 1 || v.unhealthy[0].machine.Name != "a" {
		t.Fatalf("allowed %v healthy %d/%d unhealthy %d; want remediation stopped with 1 of 3 healthy and only a past its timeout",
			v.allowed, v.healthy, v.expected, len(v.unhealthy))
	}
	if v.next <= 0 || v.next > 30*time.Second {
		t.Errorf("next check in %s; want when b's timeout passes (about 29s)", v.next)
	}
	if msg := v.shortCircuitMessage(check("1")); msg != "Remediation is not allowed: 2 of 3 Machines are not healthy, "+
		"more than spec.maxUnhealthy 1 allows; unhealthy and waiting for remediation: a" {
		t.Errorf("message %q", msg)
	}
	mhc := check("1")
	v.writeStatus(mhc)
	if *mhc.Status.ExpectedMachines != 3 || *mhc.Status.CurrentHealthy != 1 || mhc.Status.RemediationsAllowed != 0 {
		t.Errorf("status %+v", mhc.Status)
	}

	// A Machine still waiting for its Node is not healthy either.
	targets = []target{
		{machine: machineCreated("a", time.Hour, now), node: nodeReady(corev1.ConditionFalse, 46*time.Second, now)},
		{machine: machineCreated("booting", time.Minute, now)},
		{machine: machineCreated("c", time.Hour, now), node: nodeReady(corev1.ConditionTrue, time.Hour, now)},
	}
	if v, _ := assess(check("1"), targets, now); v.allowed || v.healthy != 1 {
		t.Errorf("a booting Machine counted as healthy: allowed %v healthy %d", v.allowed, v.healthy)
	}
	// Within the limit, only the Machine past its timeout is remediated.
	if v, _ := assess(check("2"), targets, now); !v.allowed || len(v.unhealthy) != 1 {
		t.Errorf("maxUnhealthy 2: allowed %v unhealthy %d", v.allowed, len(v.unhealthy))
	}
}

// nodeStartupTimeout runs from the Machine's last phase change, not its creation.
func TestStartupTimeoutCountsFromLastUpdated(t *testing.T) {
	now := time.Now()
	m := machineCreated("late", time.Hour, now) // waited an hour for capacity
	m.Status.Phase = ptr.To(machinev1beta1.PhaseProvisioned)
	m.Status.LastUpdated = ptr.To(metav1.NewTime(now.Add(-time.Minute)))
	tg := target{machine: m}
	tg.evaluate(check(""), now)
	if tg.unhealthy || tg.nextCheck < 8*time.Minute || tg.nextCheck > 9*time.Minute {
		t.Fatalf("unhealthy %v (%s), next check in %s; want healthy for 9 more minutes", tg.unhealthy, tg.reason, tg.nextCheck)
	}
	m.Status.LastUpdated = ptr.To(metav1.NewTime(now.Add(-11 * time.Minute)))
	tg = target{machine: m}
	tg.evaluate(check(""), now)
	if !tg.unhealthy {
		t.Fatal("no Node 11 minutes after the last phase change should be unhealthy")
	}
	// Without lastUpdated, the creation time.
	m.Status.LastUpdated = nil
	tg = target{machine: m}
	if tg.evaluate(check(""), now); !tg.unhealthy {
		t.Fatal("no Node an hour after creation should be unhealthy")
	}
}

// Cleaning up external remediation requests deletes the ones that exist for Machines that
// are healthy again, and sends no DELETE for the others (nor for a Machine being deleted).
func TestForgetRemediationsDeletesOnlyWhatExists(t *testing.T) {
	now := time.Now()
	request := func(name string, owner *machinev1beta1.Machine) *unstructured.Unstructured {
		u := &unstructured.Unstructured{}
		u.SetAPIVersion("remediation.example.com/v1")
		u.SetKind("SimRemediation")
		u.SetNamespace("ns")
		u.SetName(name)
		u.SetOwnerReferences([]metav1.OwnerReference{*metav1.NewControllerRef(owner, machinev1beta1.GroupVersion.WithKind("Machine"))})
		return u
	}
	healthy, recovered, sick := machineCreated("healthy", time.Hour, now), machineCreated("recovered", time.Hour, now),
		machineCreated("sick", time.Hour, now)
	going := machineCreated("going", time.Hour, now) // remediated already: its request goes with it
	going.DeletionTimestamp = ptr.To(metav1.NewTime(now))
	var deleted []string
	c := fake.NewClientBuilder().WithScheme(scheme.Scheme).
		WithObjects(request("recovered", recovered), request("sick", sick), request("going", going)).
		WithInterceptorFuncs(interceptor.Funcs{Delete: func(ctx context.Context, c client.WithWatch, o client.Object, opts ...client.DeleteOption) error {
			deleted = append(deleted, o.GetName())
			return c.Delete(ctx, o, opts...)
		}}).Build()
	mhc := check("")
	mhc.Namespace = "ns"
	mhc.Spec.RemediationTemplate = &corev1.ObjectReference{APIVersion: "remediation.example.com/v1", Kind: "SimRemediationTemplate", Name: "t"}
	targets := []target{{machine: healthy}, {machine: recovered}, {machine: sick, unhealthy: true}, {machine: going}}
	if err := (&Reconciler{Client: c}).forgetRemediations(context.Background(), mhc, targets); err != nil {
		t.Fatal(err)
	}
	if len(deleted) != 1 || deleted[0] != "recovered" {
		t.Fatalf("deleted %v; want only the request of the recovered Machine", deleted)
	}
}
