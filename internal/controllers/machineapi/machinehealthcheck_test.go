package machineapi_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/machina-dev/machina/internal/cloud/api"
	"github.com/machina-dev/machina/internal/controllers/machineapi/machinehealthcheck"
	"github.com/machina-dev/machina/internal/lab"
	"github.com/machina-dev/machina/internal/mapicond"
	"github.com/machina-dev/machina/internal/testenv"
)

func newMHC(name string, selector map[string]string, maxUnhealthy string) *machinev1beta1.MachineHealthCheck {
	mhc := &machinev1beta1.MachineHealthCheck{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: machinev1beta1.MachineHealthCheckSpec{
			Selector: metav1.LabelSelector{MatchLabels: selector},
			UnhealthyConditions: []machinev1beta1.UnhealthyCondition{
				{Type: corev1.NodeReady, Status: corev1.ConditionFalse, Timeout: metav1.Duration{Duration: time.Second}},
				{Type: corev1.NodeReady, Status: corev1.ConditionUnknown, Timeout: metav1.Duration{Duration: time.Second}},
			},
		},
	}
	if maxUnhealthy != "" {
		mhc.Spec.MaxUnhealthy = ptr.To(intstr.Parse(maxUnhealthy))
	}
	return mhc
}

// nodeNotReady makes the Nodes of the given Machines stop heartbeating and report NotReady.
func nodeNotReady(t *testing.T, e *testenv.Env, machines ...machinev1beta1.Machine) *api.Fault {
	t.Helper()
	var ids []string
	for _, m := range machines {
		ids = append(ids, e.MachineInstance(&m).InstanceID)
	}
	f, err := e.Cloud.CreateFault(context.Background(), api.Fault{Kind: api.FaultNodeNotReady, InstanceIDs: ids})
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func waitReplaced(t *testing.T, e *testenv.Env, ms *machinev1beta1.MachineSet, old string) {
	t.Helper()
	e.Eventually(120*time.Second, "unhealthy Machine "+old+" replaced", func(ctx context.Context) (bool, string, error) {
		machines, err := setMachines(ctx, e, ms)
		if err != nil {
			return false, err.Error(), nil
		}
		return !contains(names(machines), old) && len(machines) == int(*ms.Spec.Replicas),
			fmt.Sprintf("machines %v", names(machines)), nil
	})
}

func mhcStatus(ctx context.Context, e *testenv.Env, mhc *machinev1beta1.MachineHealthCheck) string {
	got := &machinev1beta1.MachineHealthCheck{}
	if err := e.Client.Get(ctx, client.ObjectKeyFromObject(mhc), got); err != nil {
		return err.Error()
	}
	c := mapicond.Get(got.Status.Conditions, machinev1beta1.RemediationAllowedCondition)
	return fmt.Sprintf("expected %v healthy %v allowed %d cond %+v", ptr.Deref(got.Status.ExpectedMachines, -1),
		ptr.Deref(got.Status.CurrentHealthy, -1), got.Status.RemediationsAllowed, c)
}

func testMHCRemediatesNotReadyNode(t *testing.T) {
	e := env.For(t)
	ctx := context.Background()
	ms := newMachineSet("mhc-notready", 2, "")
	if err := e.Client.Create(ctx, ms); err != nil {
		t.Fatal(err)
	}
	machines := waitRunning(t, e, ms, 2)
	mhc := newMHC("mhc-notready", ms.Spec.Selector.MatchLabels, "1")
	if err := e.Client.Create(ctx, mhc); err != nil {
		t.Fatal(err)
	}
	e.Eventually(30*time.Second, "all healthy", func(ctx context.Context) (bool, string, error) {
		s := mhcStatus(ctx, e, mhc)
		return s[:len("expected 2 healthy 2")] == "expected 2 healthy 2", s, nil
	})
	f := nodeNotReady(t, e, machines[0])
	waitReplaced(t, e, ms, machines[0].Name)
	_, _ = e.Cloud.DeleteFaults(ctx, f.FaultID)
	waitRunning(t, e, ms, 2)
	if err := e.Client.Delete(ctx, mhc); err != nil {
		t.Fatal(err)
	}
	scaleTo(t, e, ms, 0)
	waitRunning(t, e, ms, 0)
}

func testMHCNodeStartupTimeout(t *testing.T) {
	e := env.For(t)
	ctx := context.Background()
	// No capacity in the zone: the Machine keeps retrying and never gets a Node.
	f, err := e.Cloud.CreateFault(ctx, api.Fault{Kind: api.FaultCapacity, Zone: "sim-east-1a"})
	if err != nil {
		t.Fatal(err)
	}
	ms := newMachineSet("mhc-startup", 1, "")
	if err := e.Client.Create(ctx, ms); err != nil {
		t.Fatal(err)
	}
	var first string
	e.Eventually(30*time.Second, "first Machine", func(ctx context.Context) (bool, string, error) {
		machines, err := setMachines(ctx, e, ms)
		if err != nil || len(machines) != 1 {
			return false, fmt.Sprint(err), nil
		}
		first = machines[0].Name
		return true, "", nil
	})
	mhc := newMHC("mhc-startup", ms.Spec.Selector.MatchLabels, "")
	mhc.Spec.NodeStartupTimeout = &metav1.Duration{Duration: 3 * time.Second}
	if err := e.Client.Create(ctx, mhc); err != nil {
		t.Fatal(err)
	}
	waitReplaced(t, e, ms, first)
	if _, err := e.Cloud.DeleteFaults(ctx, f.FaultID); err != nil {
		t.Fatal(err)
	}
	waitRunning(t, e, ms, 1)
	if err := e.Client.Delete(ctx, mhc); err != nil {
		t.Fatal(err)
	}
	scaleTo(t, e, ms, 0)
	waitRunning(t, e, ms, 0)
}

func testMHCShortCircuit(t *testing.T) {
	e := env.For(t)
	ctx := context.Background()
	ms := newMachineSet("mhc-short", 2, "")
	if err := e.Client.Create(ctx, ms); err != nil {
		t.Fatal(err)
	}
	machines := waitRunning(t, e, ms, 2)
	// Both Nodes go NotReady before the check exists. With the check created first, a loaded
	// kubelet or cache that shows one Node NotReady more than the condition's timeout before
	// the other lets the check remediate it, rightly: one unhealthy of two is within
	// maxUnhealthy 1.
	f := nodeNotReady(t, e, machines...)
	e.Eventually(60*time.Second, "both Nodes NotReady", func(ctx context.Context) (bool, string, error) {
		for _, m := range machines {
			if d, err := notReadyFor(ctx, e, m); err != nil || d == 0 {
				return false, fmt.Sprintf("%s: %v", m.Name, err), nil
			}
		}
		return true, "", nil
	})
	mhc := newMHC("mhc-short", ms.Spec.Selector.MatchLabels, "1")
	if err := e.Client.Create(ctx, mhc); err != nil {
		t.Fatal(err)
	}
	e.Eventually(60*time.Second, "RemediationAllowed=False", func(ctx context.Context) (bool, string, error) {
		got := &machinev1beta1.MachineHealthCheck{}
		if err := e.Client.Get(ctx, client.ObjectKeyFromObject(mhc), got); err != nil {
			return false, err.Error(), nil
		}
		c := mapicond.Get(got.Status.Conditions, machinev1beta1.RemediationAllowedCondition)
		return c != nil && c.Status == corev1.ConditionFalse && c.Reason == machinehealthcheck.TooManyUnhealthyReason &&
			ptr.Deref(got.Status.CurrentHealthy, -1) == 0, mhcStatus(ctx, e, mhc), nil
	})
	time.Sleep(3 * time.Second)
	left, err := setMachines(ctx, e, ms)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(names(left)) != fmt.Sprint(names(machines)) {
		t.Fatalf("remediation happened although maxUnhealthy was exceeded: before %v after %v", names(machines), names(left))
	}
	if _, err := e.Cloud.DeleteFaults(ctx, f.FaultID); err != nil {
		t.Fatal(err)
	}
	e.Eventually(60*time.Second, "healthy again", func(ctx context.Context) (bool, string, error) {
		s := mhcStatus(ctx, e, mhc)
		return s[:len("expected 2 healthy 2")] == "expected 2 healthy 2", s, nil
	})
	_ = e.Client.Delete(ctx, mhc)
	scaleTo(t, e, ms, 0)
	waitRunning(t, e, ms, 0)
}

// remediationCRDs installs a small external remediation API, as a remediation provider would.
func remediationCRDs(t *testing.T, e *testenv.Env) {
	t.Helper()
	for _, kind := range []string{"SimRemediation", "SimRemediationTemplate"} {
		plural := map[string]string{"SimRemediation": "simremediations", "SimRemediationTemplate": "simremediationtemplates"}[kind]
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
		if err := e.Client.Create(context.Background(), crd); err != nil {
			t.Fatal(err)
		}
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

func testMHCExternalRemediation(t *testing.T) {
	e := env.For(t)
	ctx := context.Background()
	remediationCRDs(t, e)
	tmpl := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "remediation.example.com/v1", "kind": "SimRemediationTemplate",
		"metadata": map[string]any{"name": "reboot", "namespace": ns},
		"spec":     map[string]any{"template": map[string]any{"spec": map[string]any{"strategy": "reboot"}}},
	}}
	if err := e.Client.Create(ctx, tmpl); err != nil {
		t.Fatal(err)
	}
	ms := newMachineSet("mhc-external", 1, "")
	if err := e.Client.Create(ctx, ms); err != nil {
		t.Fatal(err)
	}
	machines := waitRunning(t, e, ms, 1)
	mhc := newMHC("mhc-external", ms.Spec.Selector.MatchLabels, "")
	mhc.Spec.RemediationTemplate = &corev1.ObjectReference{APIVersion: "remediation.example.com/v1", Kind: "SimRemediationTemplate", Name: "reboot"}
	if err := e.Client.Create(ctx, mhc); err != nil {
		t.Fatal(err)
	}
	f := nodeNotReady(t, e, machines[0])
	req := &unstructured.Unstructured{}
	req.SetAPIVersion("remediation.example.com/v1")
	req.SetKind("SimRemediation")
	e.Eventually(60*time.Second, "remediation request", func(ctx context.Context) (bool, string, error) {
		err := e.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: machines[0].Name}, req)
		return err == nil, fmt.Sprint(err), nil
	})
	if s, _, _ := unstructured.NestedString(req.Object, "spec", "strategy"); s != "reboot" {
		t.Errorf("request spec not from the template: %v", req.Object["spec"])
	}
	if ref := metav1.GetControllerOf(req); ref == nil || ref.UID != machines[0].UID {
		t.Errorf("request not owned by the Machine: %v", req.GetOwnerReferences())
	}
	if left, _ := setMachines(ctx, e, ms); len(left) != 1 || left[0].Name != machines[0].Name {
		t.Fatalf("external remediation must not delete the Machine: %v", names(left))
	}
	// Healthy again: the request goes.
	if _, err := e.Cloud.DeleteFaults(ctx, f.FaultID); err != nil {
		t.Fatal(err)
	}
	e.Eventually(60*time.Second, "remediation request removed", func(ctx context.Context) (bool, string, error) {
		err := e.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: machines[0].Name}, req)
		return apierrors.IsNotFound(err), fmt.Sprint(err), nil
	})
	_ = e.Client.Delete(ctx, mhc)
	scaleTo(t, e, ms, 0)
	waitRunning(t, e, ms, 0)
}

// notReadyFor reports how long the Machine's Node's Ready condition has been in its current
// status other than True (False from the kubelet, then Unknown from the node lifecycle
// controller), 0 when it is True.
func notReadyFor(ctx context.Context, e *testenv.Env, m machinev1beta1.Machine) (time.Duration, error) {
	got, err := get(ctx, e, m.Name)
	if err != nil || got.Status.NodeRef == nil {
		return 0, err
	}
	var n corev1.Node
	if err := e.Client.Get(ctx, client.ObjectKey{Name: got.Status.NodeRef.Name}, &n); err != nil {
		return 0, err
	}
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady && c.Status != corev1.ConditionTrue {
			return time.Since(c.LastTransitionTime.Time), nil
		}
	}
	return 0, nil
}

// nodeReadyFalse makes the kubelet of the Machine's Node report Ready=False while it keeps
// heartbeating, so the condition's transition time stays put.
func nodeReadyFalse(t *testing.T, e *testenv.Env, m machinev1beta1.Machine) *api.Fault {
	t.Helper()
	f, err := e.Cloud.CreateFault(context.Background(), api.Fault{Kind: api.FaultNodeCondition, InstanceIDs: []string{e.MachineInstance(&m).InstanceID},
		ConditionType: string(corev1.NodeReady), ConditionStatus: string(corev1.ConditionFalse), Reason: "KubeletNotReady"})
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// The outage of issue #24: three Machines, maxUnhealthy 1, Nodes failing 8 s apart with a
// 24 s timeout. When the first Node is past its timeout the second is failing too (16 s for
// its kubelet to report it, a second or two normally): two of three are not healthy, so the
// first is not remediated although it alone is eligible.
func testMHCOutageStopsRemediation(t *testing.T) {
	e := env.For(t)
	ctx := context.Background()
	ms := newMachineSet("mhc-outage", 3, "")
	if err := e.Client.Create(ctx, ms); err != nil {
		t.Fatal(err)
	}
	machines := waitRunning(t, e, ms, 3)
	mhc := newMHC("mhc-outage", ms.Spec.Selector.MatchLabels, "1")
	for i := range mhc.Spec.UnhealthyConditions {
		mhc.Spec.UnhealthyConditions[i].Timeout.Duration = 24 * time.Second
	}
	if err := e.Client.Create(ctx, mhc); err != nil {
		t.Fatal(err)
	}
	e.Eventually(30*time.Second, "all healthy", func(ctx context.Context) (bool, string, error) {
		s := mhcStatus(ctx, e, mhc)
		return strings.HasPrefix(s, "expected 3 healthy 3"), s, nil
	})
	// The kubelets keep heartbeating and report Ready=False (a NotReady fault would stop the
	// Lease too, and the node lifecycle controller's Unknown would restart the timeout).
	first := nodeReadyFalse(t, e, machines[0])
	e.Eventually(90*time.Second, "first Node NotReady for 8s", func(ctx context.Context) (bool, string, error) {
		d, err := notReadyFor(ctx, e, machines[0])
		return d >= 8*time.Second, fmt.Sprint(d, err), err
	})
	second := nodeReadyFalse(t, e, machines[1])
	want := "Remediation is not allowed: 2 of 3 Machines are not healthy, more than spec.maxUnhealthy 1 allows; " +
		"unhealthy and waiting for remediation: " + machines[0].Name
	e.Eventually(90*time.Second, "remediation stopped with the first Machine past its timeout", func(ctx context.Context) (bool, string, error) {
		got := &machinev1beta1.MachineHealthCheck{}
		if err := e.Client.Get(ctx, client.ObjectKeyFromObject(mhc), got); err != nil {
			return false, err.Error(), nil
		}
		c := mapicond.Get(got.Status.Conditions, machinev1beta1.RemediationAllowedCondition)
		return c != nil && c.Status == corev1.ConditionFalse && c.Reason == machinehealthcheck.TooManyUnhealthyReason && c.Message == want,
			mhcStatus(ctx, e, mhc), nil
	})
	// The pass that wrote this message found the first Machine past its timeout and did not
	// remediate it.
	left, err := setMachines(ctx, e, ms)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(names(left)) != fmt.Sprint(names(machines)) {
		t.Fatalf("remediation went on during the outage: before %v after %v", names(machines), names(left))
	}
	if _, err := e.Cloud.DeleteFaults(ctx, first.FaultID, second.FaultID); err != nil {
		t.Fatal(err)
	}
	e.Eventually(60*time.Second, "healthy again", func(ctx context.Context) (bool, string, error) {
		s := mhcStatus(ctx, e, mhc)
		return strings.HasPrefix(s, "expected 3 healthy 3"), s, nil
	})
	_ = e.Client.Delete(ctx, mhc)
	scaleTo(t, e, ms, 0)
	waitRunning(t, e, ms, 0)
}

// A check with cluster.x-k8s.io/paused reports the Machines but remediates nothing until the
// annotation goes.
func testMHCPausedAnnotation(t *testing.T) {
	e := env.For(t)
	ctx := context.Background()
	ms := newMachineSet("mhc-paused", 1, "")
	if err := e.Client.Create(ctx, ms); err != nil {
		t.Fatal(err)
	}
	machines := waitRunning(t, e, ms, 1)
	f := nodeNotReady(t, e, machines[0])
	// Past the check's 1 s timeout before the check exists: its first pass finds the Machine
	// eligible for remediation.
	e.Eventually(60*time.Second, "Node NotReady for 3s", func(ctx context.Context) (bool, string, error) {
		d, err := notReadyFor(ctx, e, machines[0])
		return d >= 3*time.Second, fmt.Sprint(d, err), err
	})
	mhc := newMHC("mhc-paused", ms.Spec.Selector.MatchLabels, "")
	mhc.Annotations = map[string]string{"cluster.x-k8s.io/paused": ""}
	if err := e.Client.Create(ctx, mhc); err != nil {
		t.Fatal(err)
	}
	e.Eventually(30*time.Second, "RemediationAllowed=False/RemediationPaused", func(ctx context.Context) (bool, string, error) {
		got := &machinev1beta1.MachineHealthCheck{}
		if err := e.Client.Get(ctx, client.ObjectKeyFromObject(mhc), got); err != nil {
			return false, err.Error(), nil
		}
		c := mapicond.Get(got.Status.Conditions, machinev1beta1.RemediationAllowedCondition)
		return c != nil && c.Reason == machinehealthcheck.RemediationPausedReason &&
			c.Message == "Remediation is paused: the MachineHealthCheck has the cluster.x-k8s.io/paused annotation" &&
			ptr.Deref(got.Status.CurrentHealthy, -1) == 0, mhcStatus(ctx, e, mhc), nil
	})
	if m, err := get(ctx, e, machines[0].Name); err != nil || !m.DeletionTimestamp.IsZero() {
		t.Fatalf("a paused check remediated Machine %s: %v", machines[0].Name, err)
	}
	if err := e.Client.Get(ctx, client.ObjectKeyFromObject(mhc), mhc); err != nil {
		t.Fatal(err)
	}
	base := mhc.DeepCopy()
	delete(mhc.Annotations, "cluster.x-k8s.io/paused")
	if err := e.Client.Patch(ctx, mhc, client.MergeFrom(base)); err != nil {
		t.Fatal(err)
	}
	waitReplaced(t, e, ms, machines[0].Name)
	if _, err := e.Cloud.DeleteFaults(ctx, f.FaultID); err != nil {
		t.Fatal(err)
	}
	_ = e.Client.Delete(ctx, mhc)
	scaleTo(t, e, ms, 0)
	waitRunning(t, e, ms, 0)
}
