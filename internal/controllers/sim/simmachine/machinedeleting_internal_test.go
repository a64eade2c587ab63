package simmachine

import (
	"context"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	infrav1 "github.com/machina-dev/machina/api/infrastructure/v1alpha1"
	"github.com/machina-dev/machina/internal/cloud/api"
	"github.com/machina-dev/machina/internal/cloud/cloudtest"
	"github.com/machina-dev/machina/internal/scheme"
)

// A SimMachine whose Machine is being deleted gets no instance: the Machine's deletion
// deletes the SimMachine next, and a delete racing the finalizer write can remove it with the
// finalizer on (kubernetes/kubernetes#77988), leaving an instance launched now to no one. The
// pass asks the real simulated cloud whether an instance was launched earlier and launches
// none.
func TestNoInstanceForDeletingMachine(t *testing.T) {
	cloud := cloudtest.Start(t)
	// The fake client holds nothing: without the rule the pass would go on to read the
	// bootstrap Secret and stop there with another reason.
	r := &Reconciler{Cloud: cloud.Client, Client: fake.NewClientBuilder().WithScheme(scheme.Scheme).Build()}
	now := metav1.Now()
	m := &clusterv1.Machine{ObjectMeta: metav1.ObjectMeta{Name: "w-1", Namespace: "ns", DeletionTimestamp: &now,
		Finalizers: []string{clusterv1.MachineFinalizer}}}
	m.Spec.Bootstrap.DataSecretName = ptr.To("worker-user-data")
	cluster := &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "ns"}}
	cluster.Status.Initialization.InfrastructureProvisioned = ptr.To(true)
	sm := &infrav1.SimMachine{ObjectMeta: metav1.ObjectMeta{Name: "w-1", Namespace: "ns", UID: "uid-1",
		Finalizers: []string{infrav1.SimMachineFinalizer}}}
	sm.Spec.InstanceType = "s1.medium"

	if _, err := r.reconcileNormal(context.Background(), sm, m, cluster); err != nil {
		t.Fatal(err)
	}
	c := meta.FindStatusCondition(sm.Status.Conditions, infrav1.ReadyCondition)
	if c == nil || c.Reason != infrav1.MachineDeletingReason {
		t.Fatalf("Ready = %+v, want reason %s", c, infrav1.MachineDeletingReason)
	}
	list, err := cloud.Client.DescribeInstances(context.Background(), api.DescribeInstancesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 0 {
		t.Fatalf("instances launched for a deleting Machine: %+v", list)
	}
}
