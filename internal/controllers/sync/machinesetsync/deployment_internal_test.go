package machinesetsync

import (
	"context"
	"testing"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/machina-dev/machina/internal/authority"
	"github.com/machina-dev/machina/internal/scheme"
)

// A Cluster API MachineSet a MachineDeployment controls has no Machine API counterpart: even
// when a Machine API MachineSet of the same name exists, the sync writes to neither.
func TestMachineDeploymentSetsLeftAlone(t *testing.T) {
	ns := authority.Namespaces{MachineAPI: "openshift-machine-api", ClusterAPI: "openshift-cluster-api"}
	capi := &clusterv1.MachineSet{ObjectMeta: metav1.ObjectMeta{Name: "workers-5d8f", Namespace: ns.ClusterAPI,
		OwnerReferences: []metav1.OwnerReference{{APIVersion: clusterv1.GroupVersion.String(), Kind: "MachineDeployment",
			Name: "workers", UID: "md-uid", Controller: ptr.To(true)}}},
		Spec: clusterv1.MachineSetSpec{ClusterName: "lab", Replicas: ptr.To[int32](2)}}
	mapi := &machinev1beta1.MachineSet{ObjectMeta: metav1.ObjectMeta{Name: "workers-5d8f", Namespace: ns.MachineAPI},
		Spec: machinev1beta1.MachineSetSpec{Replicas: ptr.To[int32](1)}}
	c := fake.NewClientBuilder().WithScheme(scheme.Scheme).WithObjects(capi, mapi).
		WithStatusSubresource(&machinev1beta1.MachineSet{}, &clusterv1.MachineSet{}).Build()
	ctx := context.Background()
	before := resourceVersions(t, c, capi, mapi)
	r := &Reconciler{Client: c, Namespaces: ns}
	if _, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: types.NamespacedName{Namespace: ns.MachineAPI, Name: mapi.Name}}); err != nil {
		t.Fatal(err)
	}
	if after := resourceVersions(t, c, capi, mapi); after != before {
		t.Errorf("resource versions %v became %v: the sync wrote to a MachineDeployment's MachineSet or its namesake", before, after)
	}
}

func resourceVersions(t *testing.T, c client.Client, objs ...client.Object) [2]string {
	t.Helper()
	var out [2]string
	for i, o := range objs[:2] {
		if err := c.Get(context.Background(), client.ObjectKeyFromObject(o), o); err != nil {
			t.Fatal(err)
		}
		out[i] = o.GetResourceVersion()
	}
	return out
}
