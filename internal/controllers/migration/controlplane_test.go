package migration_test

import (
	"context"
	"fmt"
	"path"
	"testing"
	"time"

	machinev1 "github.com/openshift/api/machine/v1"
	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/machina-dev/machina/internal/testenv"
)

// testControlPlaneReplaced moves a control-plane Machine owned by OpenShift's
// ControlPlaneMachineSet (its CRD from the pinned openshift/api, served in the lab; no
// controller runs for it) to the Cluster API, then deletes its Machine API copy as the
// ControlPlaneMachineSet does when it replaces a master (rolling update, or a health check
// asking): the deletion is carried over, the Cluster API Machine goes and its instance is
// terminated; nothing is launched. Before machinesync knew the ControlPlaneMachineSet as an
// owner, the Cluster API Machine and its instance (an extra control-plane node and etcd
// member) kept running.
func testControlPlaneReplaced(t *testing.T, e *testenv.Env, pc platformCase) {
	ctx := context.Background()
	cpms := controlPlaneMachineSet(t, pc)
	if err := e.Client.Create(ctx, cpms); err != nil {
		t.Fatalf("creating the ControlPlaneMachineSet: %v", err)
	}
	t.Cleanup(func() { _ = e.Client.Delete(context.Background(), cpms) })
	name := pc.name("master-0")
	m := pc.machine(name, 0)
	m.Labels[masterRoleLabel], m.Labels[masterTypeLabel] = "master", "master"
	m.OwnerReferences = []metav1.OwnerReference{*metav1.NewControllerRef(cpms, machinev1.GroupVersion.WithKind("ControlPlaneMachineSet"))}
	if err := e.Client.Create(ctx, m); err != nil {
		t.Fatal(err)
	}
	providerID := waitRunningUnder(t, e, name, machinev1beta1.MachineAuthorityMachineAPI, "")
	request(t, e, name, machinev1beta1.MachineAuthorityClusterAPI)
	waitRunningUnder(t, e, name, machinev1beta1.MachineAuthorityClusterAPI, providerID)
	before, err := e.Cloud.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// The ControlPlaneMachineSet replaces the master: it deletes the Machine API Machine.
	if err := e.Client.Delete(ctx, &machinev1beta1.Machine{ObjectMeta: metav1.ObjectMeta{Namespace: mapiNS, Name: name}}); err != nil {
		t.Fatal(err)
	}
	e.Eventually(120*time.Second, "both copies gone and the instance terminated", func(ctx context.Context) (bool, string, error) {
		errM := e.Client.Get(ctx, client.ObjectKey{Namespace: mapiNS, Name: name}, &machinev1beta1.Machine{})
		c := &clusterv1.Machine{}
		errC := e.Client.Get(ctx, client.ObjectKey{Namespace: capiNS, Name: name}, c)
		inst, err := e.Cloud.GetInstance(ctx, path.Base(providerID))
		state := "gone"
		if err == nil {
			state = string(inst.State)
		}
		done := apierrors.IsNotFound(errM) && apierrors.IsNotFound(errC) && (err != nil || !inst.State.Alive())
		return done, fmt.Sprintf("Machine API copy: %v; Cluster API copy: %v (deleting %v); instance %s", errM, errC,
			errC == nil && !c.DeletionTimestamp.IsZero(), state), nil
	})
	now, err := e.Cloud.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if terms := now.InstancesTerminated - before.InstancesTerminated; terms != 1 {
		t.Errorf("%d instances terminated, want the master's one", terms)
	}
	checkNoNewInstance(t, e, before)
}

const (
	masterRoleLabel = "machine.openshift.io/cluster-api-machine-role"
	masterTypeLabel = "machine.openshift.io/cluster-api-machine-type"
)

// controlPlaneMachineSet is an Inactive ControlPlaneMachineSet as the installer writes it
// (named cluster, selecting the masters), with pc's providerSpec in its template.
func controlPlaneMachineSet(t *testing.T, pc platformCase) *unstructured.Unstructured {
	t.Helper()
	labels := map[string]string{masterRoleLabel: "master", masterTypeLabel: "master", clusterLabel: pc.cluster}
	cpms := &machinev1.ControlPlaneMachineSet{
		TypeMeta:   metav1.TypeMeta{APIVersion: machinev1.GroupVersion.String(), Kind: "ControlPlaneMachineSet"},
		ObjectMeta: metav1.ObjectMeta{Namespace: mapiNS, Name: "cluster"},
		Spec: machinev1.ControlPlaneMachineSetSpec{
			Replicas: ptr.To[int32](3),
			State:    machinev1.ControlPlaneMachineSetStateInactive,
			Strategy: machinev1.ControlPlaneMachineSetStrategy{Type: machinev1.RollingUpdate},
			Selector: metav1.LabelSelector{MatchLabels: labels},
			Template: machinev1.ControlPlaneMachineSetTemplate{
				MachineType: machinev1.OpenShiftMachineV1Beta1MachineType,
				OpenShiftMachineV1Beta1Machine: &machinev1.OpenShiftMachineV1Beta1MachineTemplate{
					ObjectMeta: machinev1.ControlPlaneMachineSetTemplateObjectMeta{Labels: labels},
					Spec:       machinev1beta1.MachineSpec{ProviderSpec: machinev1beta1.ProviderSpec{Value: pc.spec(pc.region, pc.zones[0], pc.small)}},
				},
			},
		},
	}
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(cpms)
	if err != nil {
		t.Fatal(err)
	}
	return &unstructured.Unstructured{Object: obj}
}
