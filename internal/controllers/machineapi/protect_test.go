package machineapi_test

import (
	"context"
	"testing"
	"time"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/machina-dev/machina/internal/cloud/api"
	"github.com/machina-dev/machina/internal/controllers/machineapi/machine"
	"github.com/machina-dev/machina/internal/mapicond"
)

// The Machine whose Node runs the manager (NODE_NAME, from the downward API in a cluster) is
// not drained or deleted until it carries the override annotation.
func testManagerNodeProtected(t *testing.T) {
	e := env.For(t)
	ctx := context.Background()
	m := newMachine("manager-host", nil)
	create(t, e, m)
	m = waitPhase(t, e, "manager-host", machinev1beta1.PhaseRunning, 60*time.Second)
	nodeName := m.Status.NodeRef.Name

	// Cleanups run last first: the manager restarts without NODE_NAME after it is unset.
	t.Cleanup(func() { e.StopManager(); e.StartManager() })
	t.Setenv(machine.NodeNameEnv, nodeName)
	e.StopManager()
	e.StartManager()

	if err := e.Client.Delete(ctx, m); err != nil {
		t.Fatal(err)
	}
	waitCondition(t, e, "manager-host", machinev1beta1.MachineDrainable, corev1.ConditionFalse, machine.ManagerNodeProtectedReason)
	m, err := get(ctx, e, "manager-host")
	if err != nil {
		t.Fatal(err)
	}
	want := "Node " + nodeName + " runs the machina manager: the Machine is not drained or deleted under it; " +
		"move the manager elsewhere, or add the annotation machina.dev/allow-manager-node-deletion to delete it anyway"
	if c := mapicond.Get(m.Status.Conditions, machinev1beta1.MachineDrainable); c.Message != want {
		t.Errorf("Drainable message %q, want %q", c.Message, want)
	}
	if inst := e.MachineInstances(m); len(inst) != 1 || inst[0].State != api.StateRunning {
		t.Fatalf("the manager's instance must keep running: %+v", inst)
	}
	var node corev1.Node
	if err := e.Client.Get(ctx, client.ObjectKey{Name: nodeName}, &node); err != nil || node.Spec.Unschedulable {
		t.Fatalf("the manager's Node must be left alone (not cordoned): %v unschedulable=%v", err, node.Spec.Unschedulable)
	}
	var events corev1.EventList
	if err := e.Client.List(ctx, &events, client.InNamespace(ns), client.MatchingFields{"involvedObject.name": "manager-host"}); err != nil {
		t.Fatal(err)
	}
	warned := false
	for _, ev := range events.Items {
		warned = warned || (ev.Reason == machine.ManagerNodeProtectedReason && ev.Type == corev1.EventTypeWarning && ev.Message == want)
	}
	if !warned {
		t.Errorf("no %s warning event", machine.ManagerNodeProtectedReason)
	}

	base := m.DeepCopy()
	m.Annotations = map[string]string{machine.AllowManagerNodeDeletionAnnotation: "true"}
	if err := e.Client.Patch(ctx, m, client.MergeFrom(base)); err != nil {
		t.Fatal(err)
	}
	waitGone(t, e, "manager-host", 60*time.Second)
}
