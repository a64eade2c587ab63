package machinehealthcheck_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/machina-dev/machina/internal/cloud/api"
	"github.com/machina-dev/machina/internal/cloud/server"
	"github.com/machina-dev/machina/internal/controllers/clusterapi"
	ct "github.com/machina-dev/machina/internal/controllers/clusterapi/internal/capitest"
	"github.com/machina-dev/machina/internal/controllers/sim"
	"github.com/machina-dev/machina/internal/lab"
	"github.com/machina-dev/machina/internal/testenv"
)

var env *testenv.Env

func TestMachineHealthCheck(t *testing.T) {
	env = testenv.Start(t, testenv.Options{Groups: clusterapi.GroupName + "," + sim.GroupName,
		Delays: server.Delays{Pending: 200 * time.Millisecond, ShuttingDown: 200 * time.Millisecond}})
	ct.SetupCluster(t, env)
	ct.NewTemplate(t, env, "small", "s1.small")

	// First and alone: its capacity fault stops every launch in the zone the others use too.
	t.Run("NodeStartupTimeout", testStartupTimeout)
	// Then side by side, after this function returns: each has its own MachineSet, check and
	// faults on its own instances, and mostly waits on timeouts.
	t.Run("NodeNotReadyIsRemediatedByTheMachineSet", parallel(testNodeNotReady))
	t.Run("ShortCircuitAndRemediateAnnotation", parallel(testShortCircuit))
	t.Run("SkipRemediationAnnotation", parallel(testSkipRemediation))
	t.Run("ExternalRemediationTemplate", parallel(testExternal))
	t.Run("OutageStopsRemediation", parallel(testOutage))
}

func parallel(f func(*testing.T)) func(*testing.T) {
	return func(t *testing.T) {
		t.Parallel()
		f(t)
	}
}

// newCheck builds a MachineHealthCheck for the Machines of a MachineSet made by
// ct.MachineSet, treating a Node Ready=False/Unknown for a second as unhealthy.
func newCheck(set string) *clusterv1.MachineHealthCheck {
	return &clusterv1.MachineHealthCheck{ObjectMeta: metav1.ObjectMeta{Name: set, Namespace: ct.NS},
		Spec: clusterv1.MachineHealthCheckSpec{ClusterName: ct.Cluster,
			Selector: metav1.LabelSelector{MatchLabels: map[string]string{"set": set}},
			Checks: clusterv1.MachineHealthCheckChecks{UnhealthyNodeConditions: []clusterv1.UnhealthyNodeCondition{
				{Type: corev1.NodeReady, Status: corev1.ConditionFalse, TimeoutSeconds: ptr.To[int32](1)},
				{Type: corev1.NodeReady, Status: corev1.ConditionUnknown, TimeoutSeconds: ptr.To[int32](1)},
			}}}}
}

func create(t *testing.T, e *testenv.Env, objs ...client.Object) {
	t.Helper()
	for _, o := range objs {
		if err := e.Client.Create(context.Background(), o); err != nil {
			t.Fatal(err)
		}
	}
}

// waitCheck waits until the check's status satisfies ok.
func waitCheck(t *testing.T, e *testenv.Env, mhc *clusterv1.MachineHealthCheck, what string, ok func(*clusterv1.MachineHealthCheck) bool) *clusterv1.MachineHealthCheck {
	t.Helper()
	got := &clusterv1.MachineHealthCheck{}
	e.Eventually(60*time.Second, "MachineHealthCheck "+mhc.Name+": "+what, func(ctx context.Context) (bool, string, error) {
		if err := e.Client.Get(ctx, client.ObjectKeyFromObject(mhc), got); err != nil {
			return false, err.Error(), nil
		}
		s := got.Status
		return ok(got), fmt.Sprintf("expected %d healthy %d allowed %d targets %v %s", ptr.Deref(s.ExpectedMachines, -1),
			ptr.Deref(s.CurrentHealthy, -1), ptr.Deref(s.RemediationsAllowed, -1), s.Targets, ct.Conds(s.Conditions)), nil
	})
	return got
}

func healthy(n int32) func(*clusterv1.MachineHealthCheck) bool {
	return func(m *clusterv1.MachineHealthCheck) bool {
		return ptr.Deref(m.Status.ExpectedMachines, -1) == n && ptr.Deref(m.Status.CurrentHealthy, -1) == n
	}
}

func getMachine(ctx context.Context, e *testenv.Env, name string) (*clusterv1.Machine, error) {
	m := &clusterv1.Machine{}
	return m, e.Client.Get(ctx, client.ObjectKey{Namespace: ct.NS, Name: name}, m)
}

// waitCondition waits until the Machine's condition of type tp starts with want
// ("Status/Reason").
func waitCondition(t *testing.T, e *testenv.Env, name, tp, want string) {
	t.Helper()
	e.Eventually(60*time.Second, "Machine "+name+" "+tp+" "+want, func(ctx context.Context) (bool, string, error) {
		m, err := getMachine(ctx, e, name)
		if err != nil {
			return false, err.Error(), nil
		}
		c := ct.Condition(m.Status.Conditions, tp)
		return strings.HasPrefix(c, want), ct.Conds(m.Status.Conditions), nil
	})
}

// waitReplaced waits until the MachineSet has n Running Machines, none of them old.
func waitReplaced(t *testing.T, e *testenv.Env, ms *clusterv1.MachineSet, n int, old ...string) {
	t.Helper()
	e.Eventually(120*time.Second, fmt.Sprintf("Machines %v replaced", old), func(ctx context.Context) (bool, string, error) {
		machines, err := ct.Machines(ctx, e, ms)
		if err != nil {
			return false, err.Error(), nil
		}
		running := 0
		for _, m := range machines {
			if slices.Contains(old, m.Name) {
				return false, "still there: " + m.Name, nil
			}
			if m.Status.NodeRef.IsDefined() {
				running++
			}
		}
		return running == n && len(machines) == n, fmt.Sprint(ct.Names(machines)), nil
	})
}

func annotate(t *testing.T, e *testenv.Env, name string, set map[string]string, remove ...string) {
	t.Helper()
	ctx := context.Background()
	m, err := getMachine(ctx, e, name)
	if err != nil {
		t.Fatal(err)
	}
	base := m.DeepCopy()
	if m.Annotations == nil {
		m.Annotations = map[string]string{}
	}
	for k, v := range set {
		m.Annotations[k] = v
	}
	for _, k := range remove {
		delete(m.Annotations, k)
	}
	if err := e.Client.Patch(ctx, m, client.MergeFrom(base)); err != nil {
		t.Fatal(err)
	}
}

func cleanup(t *testing.T, e *testenv.Env, ms *clusterv1.MachineSet, mhc *clusterv1.MachineHealthCheck) {
	t.Helper()
	if err := e.Client.Delete(context.Background(), mhc); err != nil {
		t.Fatal(err)
	}
	ct.Scale(t, e, ms, 0)
	ct.WaitRunning(t, e, ms, 0, 60*time.Second)
}

func testNodeNotReady(t *testing.T) {
	e := env.For(t)
	ctx := context.Background()
	ms := ct.MachineSet("mhc-notready", 2, "small")
	mhc := newCheck("mhc-notready")
	mhc.Spec.Remediation.TriggerIf.UnhealthyLessThanOrEqualTo = ptr.To(intstr.FromInt32(1))
	create(t, e, ms)
	machines := ct.WaitRunning(t, e, ms, 2, 90*time.Second)
	create(t, e, mhc)
	got := waitCheck(t, e, mhc, "2 healthy", healthy(2))
	if !slices.Equal(got.Status.Targets, ct.Names(machines)) || ptr.Deref(got.Status.RemediationsAllowed, -1) != 1 ||
		!meta.IsStatusConditionTrue(got.Status.Conditions, clusterv1.MachineHealthCheckRemediationAllowedCondition) {
		t.Errorf("status %+v", got.Status)
	}
	for _, m := range machines {
		waitCondition(t, e, m.Name, clusterv1.MachineHealthCheckSucceededCondition, "True/"+clusterv1.MachineHealthCheckSucceededReason)
	}
	victim := machines[0].Name
	f, err := e.Cloud.CreateFault(ctx, api.Fault{Kind: api.FaultNodeNotReady, InstanceIDs: ct.InstanceIDs(t, e, machines[0])})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = e.Cloud.DeleteFaults(context.Background(), f.FaultID) })
	// Unhealthy: reported on the Machine, handed to the owner, which deletes it.
	var sawCondition, sawOwner bool
	e.Eventually(60*time.Second, "Machine "+victim+" remediated", func(ctx context.Context) (bool, string, error) {
		m, err := getMachine(ctx, e, victim)
		if apierrors.IsNotFound(err) {
			return true, "", nil
		}
		if err != nil {
			return false, err.Error(), nil
		}
		if c := meta.FindStatusCondition(m.Status.Conditions, clusterv1.MachineHealthCheckSucceededCondition); c != nil &&
			c.Status == metav1.ConditionFalse && c.Reason == clusterv1.MachineHealthCheckUnhealthyNodeReason {
			sawCondition = true
		}
		if c := meta.FindStatusCondition(m.Status.Conditions, clusterv1.MachineOwnerRemediatedCondition); c != nil &&
			c.Reason == clusterv1.MachineSetMachineRemediationMachineDeletingReason {
			sawOwner = true
		}
		return !m.DeletionTimestamp.IsZero() && sawOwner, ct.Conds(m.Status.Conditions), nil
	})
	if !sawCondition {
		t.Errorf("HealthCheckSucceeded=False/UnhealthyNode never seen on %s", victim)
	}
	waitReplaced(t, e, ms, 2, victim)
	if _, err := e.Cloud.DeleteFaults(ctx, f.FaultID); err != nil {
		t.Fatal(err)
	}
	waitCheck(t, e, mhc, "2 healthy again", healthy(2))
	cleanup(t, e, ms, mhc)
}

func testStartupTimeout(t *testing.T) {
	e := env.For(t)
	ctx := context.Background()
	// No capacity in the zone: the Machine never gets a Node.
	f, err := e.Cloud.CreateFault(ctx, api.Fault{Kind: api.FaultCapacity, Zone: "sim-east-1a"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = e.Cloud.DeleteFaults(context.Background(), f.FaultID) })
	ms := ct.MachineSet("mhc-startup", 1, "small")
	create(t, e, ms)
	var first string
	e.Eventually(30*time.Second, "first Machine", func(ctx context.Context) (bool, string, error) {
		machines, err := ct.Machines(ctx, e, ms)
		if err != nil || len(machines) != 1 {
			return false, fmt.Sprint(err), nil
		}
		first = machines[0].Name
		return true, "", nil
	})
	mhc := newCheck("mhc-startup")
	mhc.Spec.Checks.NodeStartupTimeoutSeconds = ptr.To[int32](4)
	// First held back by the trigger, so the verdict can be seen before the Machine goes.
	mhc.Spec.Remediation.TriggerIf.UnhealthyInRange = "[2-3]"
	create(t, e, mhc)
	waitCheck(t, e, mhc, "1 unhealthy, not remediated", func(m *clusterv1.MachineHealthCheck) bool {
		return ptr.Deref(m.Status.ExpectedMachines, -1) == 1 && ptr.Deref(m.Status.CurrentHealthy, -1) == 0 &&
			meta.IsStatusConditionFalse(m.Status.Conditions, clusterv1.MachineHealthCheckRemediationAllowedCondition)
	})
	waitCondition(t, e, first, clusterv1.MachineHealthCheckSucceededCondition, "False/"+clusterv1.MachineHealthCheckNodeStartupTimeoutReason)
	// Allowed: the MachineSet replaces it.
	got := &clusterv1.MachineHealthCheck{}
	if err := e.Client.Get(ctx, client.ObjectKeyFromObject(mhc), got); err != nil {
		t.Fatal(err)
	}
	base := got.DeepCopy()
	got.Spec.Remediation.TriggerIf.UnhealthyInRange = ""
	if err := e.Client.Patch(ctx, got, client.MergeFrom(base)); err != nil {
		t.Fatal(err)
	}
	e.Eventually(60*time.Second, "Machine "+first+" replaced", func(ctx context.Context) (bool, string, error) {
		machines, err := ct.Machines(ctx, e, ms)
		if err != nil {
			return false, err.Error(), nil
		}
		return !slices.Contains(ct.Names(machines), first) && len(machines) == 1, fmt.Sprint(ct.Names(machines)), nil
	})
	if _, err := e.Cloud.DeleteFaults(ctx, f.FaultID); err != nil {
		t.Fatal(err)
	}
	cleanup(t, e, ms, mhc)
}

func testShortCircuit(t *testing.T) {
	e := env.For(t)
	ctx := context.Background()
	ms := ct.MachineSet("mhc-short", 2, "small")
	mhc := newCheck("mhc-short")
	mhc.Spec.Remediation.TriggerIf.UnhealthyLessThanOrEqualTo = ptr.To(intstr.FromString("50%"))
	create(t, e, ms)
	machines := ct.Names(ct.WaitRunning(t, e, ms, 2, 90*time.Second))
	// Both marked for remediation before the check looks (marked one by one, the first would
	// be remediated alone): 2 unhealthy of 2 is more than 50%.
	for _, name := range machines {
		annotate(t, e, name, map[string]string{clusterv1.RemediateMachineAnnotation: ""})
	}
	create(t, e, mhc)
	got := waitCheck(t, e, mhc, "short-circuited", func(m *clusterv1.MachineHealthCheck) bool {
		return meta.IsStatusConditionFalse(m.Status.Conditions, clusterv1.MachineHealthCheckRemediationAllowedCondition)
	})
	if c := meta.FindStatusCondition(got.Status.Conditions, clusterv1.MachineHealthCheckRemediationAllowedCondition); c.Reason != clusterv1.MachineHealthCheckTooManyUnhealthyReason ||
		ptr.Deref(got.Status.RemediationsAllowed, -1) != 0 || ptr.Deref(got.Status.CurrentHealthy, -1) != 0 {
		t.Errorf("status %+v", got.Status)
	}
	for _, name := range machines {
		waitCondition(t, e, name, clusterv1.MachineHealthCheckSucceededCondition, "False/"+clusterv1.MachineHealthCheckHasRemediateAnnotationReason)
	}
	time.Sleep(2 * time.Second)
	for _, name := range machines {
		m, err := getMachine(ctx, e, name)
		if err != nil || !m.DeletionTimestamp.IsZero() || meta.FindStatusCondition(m.Status.Conditions, clusterv1.MachineOwnerRemediatedCondition) != nil {
			t.Fatalf("short-circuited check remediated %s: %v %s", name, err, ct.Conds(m.Status.Conditions))
		}
	}
	// unhealthyInRange takes precedence: [2-3] allows 2 unhealthy.
	base := got.DeepCopy()
	got.Spec.Remediation.TriggerIf.UnhealthyInRange = "[2-3]"
	if err := e.Client.Patch(ctx, got, client.MergeFrom(base)); err != nil {
		t.Fatal(err)
	}
	waitReplaced(t, e, ms, 2, machines...)
	waitCheck(t, e, mhc, "2 healthy again", healthy(2))
	cleanup(t, e, ms, mhc)
}

// Machines with skip-remediation or paused are not targets, as upstream has it: not
// counted, not reported, not remediated.
func testSkipRemediation(t *testing.T) {
	e := env.For(t)
	ctx := context.Background()
	ms := ct.MachineSet("mhc-skip", 2, "small")
	mhc := newCheck("mhc-skip")
	create(t, e, ms)
	machines := ct.Names(ct.WaitRunning(t, e, ms, 2, 90*time.Second))
	skipped, paused := machines[0], machines[1]
	create(t, e, mhc)
	waitCheck(t, e, mhc, "2 healthy", healthy(2))
	annotate(t, e, skipped, map[string]string{clusterv1.MachineSkipRemediationAnnotation: "", clusterv1.RemediateMachineAnnotation: ""})
	got := waitCheck(t, e, mhc, "only "+paused+" a target", func(m *clusterv1.MachineHealthCheck) bool {
		return slices.Equal(m.Status.Targets, []string{paused})
	})
	if ptr.Deref(got.Status.ExpectedMachines, -1) != 1 || ptr.Deref(got.Status.CurrentHealthy, -1) != 1 {
		t.Errorf("status %+v", got.Status)
	}
	m, err := getMachine(ctx, e, skipped)
	if err != nil || !m.DeletionTimestamp.IsZero() || meta.FindStatusCondition(m.Status.Conditions, clusterv1.MachineOwnerRemediatedCondition) != nil ||
		meta.IsStatusConditionFalse(m.Status.Conditions, clusterv1.MachineHealthCheckSucceededCondition) {
		t.Fatalf("Machine with skip-remediation was checked or remediated: %v %s", err, ct.Conds(m.Status.Conditions))
	}
	annotate(t, e, paused, map[string]string{clusterv1.PausedAnnotation: ""})
	waitCheck(t, e, mhc, "no targets", func(m *clusterv1.MachineHealthCheck) bool {
		return len(m.Status.Targets) == 0 && ptr.Deref(m.Status.ExpectedMachines, -1) == 0
	})
	annotate(t, e, paused, nil, clusterv1.PausedAnnotation)
	annotate(t, e, skipped, nil, clusterv1.MachineSkipRemediationAnnotation)
	waitReplaced(t, e, ms, 2, skipped)
	cleanup(t, e, ms, mhc)
}

// remediationCRDs installs a small external remediation API, as a remediation provider would.
func remediationCRDs(t *testing.T, e *testenv.Env) {
	t.Helper()
	for _, kind := range []string{"SimRemediation", "SimRemediationTemplate"} {
		plural := strings.ToLower(kind) + "s"
		crd := &apiextensionsv1.CustomResourceDefinition{
			ObjectMeta: metav1.ObjectMeta{Name: plural + ".remediation.example.com"},
			Spec: apiextensionsv1.CustomResourceDefinitionSpec{
				Group: "remediation.example.com", Scope: apiextensionsv1.NamespaceScoped,
				Names: apiextensionsv1.CustomResourceDefinitionNames{Kind: kind, Plural: plural, ListKind: kind + "List"},
				Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{Name: "v1", Served: true, Storage: true,
					Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
						Type: "object", XPreserveUnknownFields: ptr.To(true)}}}},
			},
		}
		create(t, e, crd)
		e.Eventually(30*time.Second, "CRD "+plural, func(ctx context.Context) (bool, string, error) {
			list := &unstructured.UnstructuredList{}
			list.SetAPIVersion("remediation.example.com/v1")
			list.SetKind(kind + "List")
			err := e.Client.List(ctx, list)
			return err == nil, fmt.Sprint(err), nil
		})
	}
	// The remediation provider's rights reach the manager by aggregation (config/rbac).
	role := lab.ProviderRole("remediation-example-com", "remediation.example.com", "simremediations", "simremediationtemplates")
	if err := e.Lab.AggregateToManager(context.Background(), role); err != nil {
		t.Fatal(err)
	}
}

func testExternal(t *testing.T) {
	e := env.For(t)
	ctx := context.Background()
	remediationCRDs(t, e)
	tmpl := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "remediation.example.com/v1", "kind": "SimRemediationTemplate",
		"metadata": map[string]any{"name": "reboot", "namespace": ct.NS},
		"spec":     map[string]any{"template": map[string]any{"spec": map[string]any{"strategy": "reboot"}}},
	}}
	ms := ct.MachineSet("mhc-external", 1, "small")
	mhc := newCheck("mhc-external")
	mhc.Spec.Remediation.TemplateRef = clusterv1.MachineHealthCheckRemediationTemplateReference{
		APIVersion: "remediation.example.com/v1", Kind: "SimRemediationTemplate", Name: "reboot"}
	create(t, e, tmpl, ms)
	m := ct.WaitRunning(t, e, ms, 1, 90*time.Second)[0]
	create(t, e, mhc)
	waitCheck(t, e, mhc, "1 healthy", healthy(1))
	annotate(t, e, m.Name, map[string]string{clusterv1.RemediateMachineAnnotation: ""})

	req := &unstructured.Unstructured{}
	req.SetAPIVersion("remediation.example.com/v1")
	req.SetKind("SimRemediation")
	e.Eventually(60*time.Second, "remediation request", func(ctx context.Context) (bool, string, error) {
		err := e.Client.Get(ctx, client.ObjectKey{Namespace: ct.NS, Name: m.Name}, req)
		return err == nil, fmt.Sprint(err), nil
	})
	if s, _, _ := unstructured.NestedString(req.Object, "spec", "strategy"); s != "reboot" {
		t.Errorf("request spec not from the template: %v", req.Object["spec"])
	}
	if refs := req.GetOwnerReferences(); len(refs) != 1 || refs[0].UID != m.UID {
		t.Errorf("request not owned by the Machine: %v", refs)
	}
	waitCondition(t, e, m.Name, clusterv1.MachineExternallyRemediatedCondition, "False/"+clusterv1.MachineExternallyRemediatedWaitingForRemediationReason)
	time.Sleep(time.Second)
	if left, _ := ct.Machines(ctx, e, ms); len(left) != 1 || left[0].Name != m.Name || !left[0].DeletionTimestamp.IsZero() ||
		meta.FindStatusCondition(left[0].Status.Conditions, clusterv1.MachineOwnerRemediatedCondition) != nil {
		t.Fatalf("external remediation must leave the Machine to the external controller: %v", ct.Names(left))
	}
	// Healthy again: the request and the condition go.
	annotate(t, e, m.Name, nil, clusterv1.RemediateMachineAnnotation)
	e.Eventually(60*time.Second, "remediation request removed", func(ctx context.Context) (bool, string, error) {
		err := e.Client.Get(ctx, client.ObjectKey{Namespace: ct.NS, Name: m.Name}, req)
		return apierrors.IsNotFound(err), fmt.Sprint(err), nil
	})
	waitCondition(t, e, m.Name, clusterv1.MachineExternallyRemediatedCondition, "<none>")
	cleanup(t, e, ms, mhc)
}
