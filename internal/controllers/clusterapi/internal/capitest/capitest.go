// Package capitest holds what the integration tests of the Cluster API controllers share: a
// lab with a provisioned Cluster (SimCluster and kubeconfig Secret pointing at the lab
// itself), SimMachineTemplates, MachineSets, ways to wait on their Machines, and small
// helpers for patching objects, waiting for deletion and formatting conditions and events.
package capitest

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/machina-dev/machina/api/infrastructure/v1alpha1"
	"github.com/machina-dev/machina/internal/controllers/clusterapi/remote"
	"github.com/machina-dev/machina/internal/testenv"
)

// Names the tests share.
const (
	NS            = "default"
	Cluster       = "main"
	BootstrapData = "bootstrap-data"
)

// SetupCluster creates the bootstrap data Secret and the Cluster named Cluster (see
// NewCluster), and waits until the Cluster's infrastructure is provisioned.
func SetupCluster(t testing.TB, e *testenv.Env) *clusterv1.Cluster {
	t.Helper()
	NewBootstrapData(t, e, BootstrapData, "#!/bin/sh\necho hello\n")
	return NewCluster(t, e, Cluster, false)
}

// NewBootstrapData creates a bootstrap data Secret holding value.
func NewBootstrapData(t testing.TB, e *testenv.Env, name, value string) {
	t.Helper()
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: NS},
		Data: map[string][]byte{"value": []byte(value)}}
	if err := e.Client.Create(context.Background(), secret); err != nil {
		t.Fatal(err)
	}
}

// NewCluster creates a Cluster with a SimCluster and the kubeconfig Secret pointing at the
// (self-hosted) lab, and unless paused waits until its infrastructure is provisioned.
func NewCluster(t testing.TB, e *testenv.Env, name string, paused bool) *clusterv1.Cluster {
	t.Helper()
	ctx := context.Background()
	kubeconfig, err := os.ReadFile(e.Lab.KubeconfigPath)
	if err != nil {
		t.Fatal(err)
	}
	objs := []client.Object{
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: remote.SecretName(name), Namespace: NS,
			Labels: map[string]string{clusterv1.ClusterNameLabel: name}},
			Type: clusterv1.ClusterSecretType, Data: map[string][]byte{remote.KubeconfigKey: kubeconfig}},
		&infrav1.SimCluster{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: NS,
			Labels: map[string]string{clusterv1.ClusterNameLabel: name}},
			Spec: infrav1.SimClusterSpec{Region: "sim-east-1"}},
		&clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: NS},
			Spec: clusterv1.ClusterSpec{Paused: ptr.To(paused), InfrastructureRef: clusterv1.ContractVersionedObjectReference{
				APIGroup: infrav1.GroupVersion.Group, Kind: "SimCluster", Name: name}}},
	}
	for _, o := range objs {
		if err := e.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	cl := &clusterv1.Cluster{}
	if paused {
		return cl
	}
	e.Eventually(60*time.Second, "Cluster "+name+" infrastructure provisioned", func(ctx context.Context) (bool, string, error) {
		if err := e.Client.Get(ctx, client.ObjectKey{Namespace: NS, Name: name}, cl); err != nil {
			return false, err.Error(), nil
		}
		return ptr.Deref(cl.Status.Initialization.InfrastructureProvisioned, false), Conds(cl.Status.Conditions), nil
	})
	return cl
}

// NewTemplate creates a SimMachineTemplate of the given instance type.
func NewTemplate(t testing.TB, e *testenv.Env, name, instanceType string) *infrav1.SimMachineTemplate {
	t.Helper()
	tmpl := &infrav1.SimMachineTemplate{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: NS},
		Spec: infrav1.SimMachineTemplateSpec{Template: infrav1.SimMachineTemplateResource{
			ObjectMeta: clusterv1.ObjectMeta{Labels: map[string]string{"from-template": name}},
			Spec:       infrav1.SimMachineSpec{InstanceSpec: infrav1.InstanceSpec{InstanceType: instanceType, Image: "sim-rhcos-9"}}}}}
	if err := e.Client.Create(context.Background(), tmpl); err != nil {
		t.Fatal(err)
	}
	return tmpl
}

// MachineSet builds (does not create) a MachineSet of the Cluster selecting set=name,
// whose Machines clone the template and use the shared bootstrap data Secret.
func MachineSet(name string, replicas int32, template string) *clusterv1.MachineSet {
	labels := map[string]string{"set": name}
	return &clusterv1.MachineSet{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: NS},
		Spec: clusterv1.MachineSetSpec{ClusterName: Cluster, Replicas: ptr.To(replicas),
			Selector: metav1.LabelSelector{MatchLabels: labels},
			Template: clusterv1.MachineTemplateSpec{ObjectMeta: clusterv1.ObjectMeta{Labels: labels},
				Spec: clusterv1.MachineSpec{ClusterName: Cluster, FailureDomain: "sim-east-1a",
					Bootstrap: clusterv1.Bootstrap{DataSecretName: ptr.To(BootstrapData)},
					InfrastructureRef: clusterv1.ContractVersionedObjectReference{APIGroup: infrav1.GroupVersion.Group,
						Kind: "SimMachineTemplate", Name: template}}}}}
}

// Machines lists the Machines the MachineSet controls, oldest first (by name on ties).
func Machines(ctx context.Context, e *testenv.Env, ms *clusterv1.MachineSet) ([]clusterv1.Machine, error) {
	var list clusterv1.MachineList
	if err := e.Client.List(ctx, &list, client.InNamespace(NS)); err != nil {
		return nil, err
	}
	var out []clusterv1.Machine
	for _, m := range list.Items {
		if ref := metav1.GetControllerOf(&m); ref != nil && ref.Kind == "MachineSet" && ref.Name == ms.Name {
			out = append(out, m)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i].CreationTimestamp.Time, out[j].CreationTimestamp.Time
		if !a.Equal(b) {
			return a.Before(b)
		}
		return out[i].Name < out[j].Name
	})
	return out, nil
}

// WaitRunning waits until the MachineSet has exactly n Machines, none being deleted, all
// Running with a Node, and returns them.
func WaitRunning(t testing.TB, e *testenv.Env, ms *clusterv1.MachineSet, n int, timeout time.Duration) []clusterv1.Machine {
	t.Helper()
	var out []clusterv1.Machine
	e.Eventually(timeout, fmt.Sprintf("MachineSet %s: %d Machines Running", ms.Name, n), func(ctx context.Context) (bool, string, error) {
		machines, err := Machines(ctx, e, ms)
		if err != nil {
			return false, err.Error(), nil
		}
		running := 0
		var desc []string
		for _, m := range machines {
			if m.DeletionTimestamp.IsZero() && m.Status.Phase == string(clusterv1.MachinePhaseRunning) && m.Status.NodeRef.IsDefined() {
				running++
			}
			desc = append(desc, m.Name+":"+m.Status.Phase)
		}
		out = machines
		return running == n && len(machines) == n, strings.Join(desc, " "), nil
	})
	return out
}

// Scale sets spec.replicas through the scale subresource.
func Scale(t testing.TB, e *testenv.Env, ms *clusterv1.MachineSet, n int32) {
	t.Helper()
	PatchMachineSet(t, e, ms, func(ms *clusterv1.MachineSet) { ms.Spec.Replicas = ptr.To(n) })
}

// PatchMachineSet applies mutate to the current MachineSet with a merge patch.
func PatchMachineSet(t testing.TB, e *testenv.Env, ms *clusterv1.MachineSet, mutate func(*clusterv1.MachineSet)) {
	t.Helper()
	Patch(t, e, ms, mutate)
}

// Patch reads the current state of obj (by its namespace and name) into obj, applies mutate
// and writes the change with a merge patch.
func Patch[T client.Object](t testing.TB, e *testenv.Env, obj T, mutate func(T)) {
	t.Helper()
	ctx := context.Background()
	if err := e.Client.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
		t.Fatal(err)
	}
	base := obj.DeepCopyObject().(client.Object)
	mutate(obj)
	if err := e.Client.Patch(ctx, obj, client.MergeFrom(base)); err != nil {
		t.Fatal(err)
	}
}

// WaitGone waits until the object no longer exists.
func WaitGone(t testing.TB, e *testenv.Env, obj client.Object, timeout time.Duration) {
	t.Helper()
	e.Eventually(timeout, fmt.Sprintf("%T %s deleted", obj, obj.GetName()), func(ctx context.Context) (bool, string, error) {
		err := e.Client.Get(ctx, client.ObjectKeyFromObject(obj), obj)
		if apierrors.IsNotFound(err) {
			return true, "", nil
		}
		if err != nil {
			return false, err.Error(), nil
		}
		return false, fmt.Sprintf("finalizers %v", obj.GetFinalizers()), nil
	})
}

// EventReasons lists the reasons of the events about the objects called name, oldest first.
func EventReasons(t testing.TB, e *testenv.Env, name string) []string {
	t.Helper()
	var events corev1.EventList
	if err := e.Client.List(context.Background(), &events, client.InNamespace(NS),
		client.MatchingFields{"involvedObject.name": name}); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, ev := range events.Items {
		out = append(out, ev.Reason)
	}
	return out
}

// Names lists the Machines' names.
func Names(ms []clusterv1.Machine) []string {
	out := make([]string, len(ms))
	for i := range ms {
		out[i] = ms[i].Name
	}
	return out
}

// InstanceIDs returns the cloud instance IDs behind the Machines (from their SimMachines).
func InstanceIDs(t testing.TB, e *testenv.Env, machines ...clusterv1.Machine) []string {
	t.Helper()
	var ids []string
	for _, m := range machines {
		sm := &infrav1.SimMachine{}
		if err := e.Client.Get(context.Background(), client.ObjectKey{Namespace: NS, Name: m.Spec.InfrastructureRef.Name}, sm); err != nil {
			t.Fatal(err)
		}
		if sm.Status.InstanceID == "" {
			t.Fatalf("SimMachine %s has no instance", sm.Name)
		}
		ids = append(ids, sm.Status.InstanceID)
	}
	return ids
}

// Conds formats conditions for failure messages.
func Conds(cs []metav1.Condition) string {
	var parts []string
	for _, c := range cs {
		parts = append(parts, fmt.Sprintf("%s=%s/%s: %s", c.Type, c.Status, c.Reason, c.Message))
	}
	return "[" + strings.Join(parts, "; ") + "]"
}

// Condition formats one condition ("<none>" when absent).
func Condition(cs []metav1.Condition, t string) string {
	c := meta.FindStatusCondition(cs, t)
	if c == nil {
		return "<none>"
	}
	return fmt.Sprintf("%s/%s: %s", c.Status, c.Reason, c.Message)
}
