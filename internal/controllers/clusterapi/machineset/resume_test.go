package machineset_test

import (
	"context"
	"maps"
	"slices"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/machina-dev/machina/api/infrastructure/v1alpha1"
	ct "github.com/machina-dev/machina/internal/controllers/clusterapi/internal/capitest"
	"github.com/machina-dev/machina/internal/controllers/clusterapi/machineset"
	"github.com/machina-dev/machina/internal/scheme"
	"github.com/machina-dev/machina/internal/testenv"
)

// resumeGrace is the shortened age (machineset.SetResumeGrace) after which an unfinished
// Machine of a former template is replaced.
const resumeGrace = 3 * time.Second

// pausedSet creates a paused MachineSet of one replica and returns it as stored (admission
// and defaults applied, so its template hash is the controller's).
func pausedSet(t *testing.T, e *testenv.Env, name string) *clusterv1.MachineSet {
	t.Helper()
	ms := ct.MachineSet(name, 1, "small")
	ms.Annotations = map[string]string{clusterv1.PausedAnnotation: ""}
	if err := e.Client.Create(context.Background(), ms); err != nil {
		t.Fatal(err)
	}
	return waitStatus(t, e, ms, "Paused", func(ms *clusterv1.MachineSet) bool {
		return meta.IsStatusConditionTrue(ms.Status.Conditions, clusterv1.PausedCondition)
	})
}

// unpause removes the paused annotation as the manager's identity (an admission policy keeps
// users from unpausing).
func unpause(t *testing.T, e *testenv.Env, ms *clusterv1.MachineSet) {
	t.Helper()
	cfg, err := e.Lab.ManagerConfig()
	if err != nil {
		t.Fatal(err)
	}
	mc, err := client.New(cfg, client.Options{Scheme: scheme.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	if err := mc.Patch(context.Background(), ms, client.RawPatch(types.JSONPatchType,
		[]byte(`[{"op":"remove","path":"/metadata/annotations/cluster.x-k8s.io~1paused"}]`))); err != nil {
		t.Fatal(err)
	}
}

// createUnfinished creates what a pass killed between createMachine's writes leaves: the
// Machine as the controller makes it, with the given template hash, referencing a SimMachine
// of its name that does not exist.
func createUnfinished(t *testing.T, e *testenv.Env, ms *clusterv1.MachineSet, name, hash string) *clusterv1.Machine {
	t.Helper()
	m := &clusterv1.Machine{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ms.Namespace,
		Labels:          maps.Clone(ms.Spec.Template.Labels),
		Annotations:     map[string]string{machineset.TemplateHashAnnotation: hash},
		OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(ms, clusterv1.GroupVersion.WithKind("MachineSet"))},
		Finalizers:      []string{clusterv1.MachineFinalizer}},
		Spec: *ms.Spec.Template.Spec.DeepCopy()}
	m.Labels[clusterv1.ClusterNameLabel] = ms.Spec.ClusterName
	m.Labels[clusterv1.MachineSetNameLabel] = ms.Name
	m.Spec.InfrastructureRef = clusterv1.ContractVersionedObjectReference{APIGroup: infrav1.GroupVersion.Group, Kind: "SimMachine", Name: name}
	if err := e.Client.Create(context.Background(), m); err != nil {
		t.Fatal(err)
	}
	return m
}

// testInterruptedCreation: a Machine left without its SimMachine by a killed pass is
// finished from the current template, or, when the template has changed since, replaced
// once it is older than the grace.
func testInterruptedCreation(t *testing.T) {
	t.Run("CurrentTemplateResumed", testResumed)
	t.Run("FormerTemplateReplaced", testReplaced)
}

func testResumed(t *testing.T) {
	e := env.For(t)
	ms := pausedSet(t, e, "ms-resume")
	m := createUnfinished(t, e, ms, "ms-resume-cut", machineset.TemplateHash(ms))
	unpause(t, e, ms)
	if got := ct.Names(ct.WaitRunning(t, e, ms, 1, 90*time.Second)); !slices.Equal(got, []string{m.Name}) {
		t.Fatalf("Machines %v, want only %s, finished", got, m.Name)
	}
	sm := getSimMachine(t, e, m.Name)
	if ref := metav1.GetControllerOf(sm); ref == nil || ref.Kind != "Machine" || ref.UID != m.UID {
		t.Errorf("SimMachine %s controller %+v, want Machine %s", sm.Name, ref, m.UID)
	}
	if sm.Annotations[clusterv1.TemplateClonedFromNameAnnotation] != "small" || sm.Spec.InstanceType != "s1.small" {
		t.Errorf("SimMachine %s annotations %v instance type %q, want cloned from small", sm.Name, sm.Annotations, sm.Spec.InstanceType)
	}
	waitStatus(t, e, ms, "1 ready", func(ms *clusterv1.MachineSet) bool { return counts(ms, 1, 1, 1, 1) })
	if r := ct.EventReasons(t, e, ms.Name); !slices.Contains(r, "ResumedCreation") {
		t.Errorf("MachineSet events %v, want ResumedCreation", r)
	}
	ct.Scale(t, e, ms, 0)
	ct.WaitRunning(t, e, ms, 0, 60*time.Second)
}

func testReplaced(t *testing.T) {
	e := env.For(t)
	ctx := context.Background()
	ms := pausedSet(t, e, "ms-replace")
	m := createUnfinished(t, e, ms, "ms-replace-cut", "0ld0ld00")
	unpause(t, e, ms)
	ct.WaitGone(t, e, m.DeepCopy(), 60*time.Second)
	// The creation timestamp is rounded down: the Machine went no sooner than the grace.
	if age := time.Since(m.CreationTimestamp.Time); age < resumeGrace {
		t.Errorf("Machine %s deleted %v after its creation, before the grace of %v", m.Name, age, resumeGrace)
	}
	got := ct.WaitRunning(t, e, ms, 1, 90*time.Second)
	if got[0].Name == m.Name || got[0].Annotations[machineset.TemplateHashAnnotation] != machineset.TemplateHash(ms) {
		t.Errorf("Machine %s (hash %s), want a replacement of the current template", got[0].Name,
			got[0].Annotations[machineset.TemplateHashAnnotation])
	}
	if err := e.Client.Get(ctx, client.ObjectKey{Namespace: ct.NS, Name: m.Name}, &infrav1.SimMachine{}); !apierrors.IsNotFound(err) {
		t.Errorf("SimMachine %s of the replaced Machine: %v, want NotFound", m.Name, err)
	}
	if r := ct.EventReasons(t, e, ms.Name); !slices.Contains(r, "DeletedUnfinished") || slices.Contains(r, "ResumedCreation") {
		t.Errorf("MachineSet events %v, want DeletedUnfinished and no ResumedCreation", r)
	}
	ct.Scale(t, e, ms, 0)
	ct.WaitRunning(t, e, ms, 0, 60*time.Second)
}
