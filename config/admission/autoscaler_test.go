package admission_test

import (
	"context"
	"testing"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// testAutoscalerOnMachineAPIMirrors: OpenShift's cluster autoscaler works with Machine API
// MachineSets. On a Machine API mirror (the Cluster API is authoritative) it may change a
// MachineSet's spec.replicas and nothing else of its spec, and add or remove the delete-machine
// mark (either spelling) on a Machine and no other reserved annotation; an administrator may do
// none of it. Every write is a merge patch, as the autoscaler sends them. (Its scale
// subresource requests are the authority webhook's: internal/authorityhook.)
func testAutoscalerOnMachineAPIMirrors(t *testing.T, admin, controller, autoscaler client.Client, machineName string) {
	ctx := context.Background()
	l := map[string]string{"set": "scaled-mirror"}
	ms := machineSet("scaled-mirror", l, l, sim(nil))
	if err := admin.Create(ctx, ms); err != nil {
		t.Fatal(err)
	}
	ms.Status.AuthoritativeAPI = machinev1beta1.MachineAuthorityClusterAPI
	if err := controller.Status().Update(ctx, ms); err != nil {
		t.Fatal(err)
	}
	send := func(c client.Client, o client.Object, body string) error {
		return c.Patch(ctx, o, client.RawPatch(types.MergePatchType, []byte(body)), client.FieldOwner("cluster-autoscaler"))
	}
	set := &machinev1beta1.MachineSet{}
	set.Namespace, set.Name = ns, ms.Name
	const setSpec = "spec: Forbidden: MachineSet scaled-mirror is a mirror: the Cluster API is authoritative (ClusterAPI)"
	expectDenied(t, send(admin, set, `{"spec":{"replicas":3}}`), setSpec)
	if err := send(autoscaler, set, `{"spec":{"replicas":3}}`); err != nil {
		t.Fatalf("the cluster autoscaler must be able to change replicas of a Machine API MachineSet mirror: %v", err)
	}
	if set.Spec.Replicas == nil || *set.Spec.Replicas != 3 {
		t.Fatalf("replicas %v after the autoscaler's patch to 3", set.Spec.Replicas)
	}
	expectDenied(t, send(autoscaler, set, `{"spec":{"minReadySeconds":5}}`), setSpec)
	expectDenied(t, send(autoscaler, set, `{"spec":{"replicas":4,"deletePolicy":"Oldest"}}`), setSpec)

	m := &machinev1beta1.Machine{}
	m.Namespace, m.Name = ns, machineName
	const annotations = "metadata.annotations: Forbidden: annotations in the kubernetes.io, k8s.io, openshift.io, x-k8s.io and machina.dev domains of Machine "
	for _, key := range []string{"machine.openshift.io/delete-machine", "machine.openshift.io/cluster-api-delete-machine"} {
		expectDenied(t, send(admin, m, `{"metadata":{"annotations":{"`+key+`":"2026-01-01T00:00:00Z"}}}`), annotations+machineName)
		if err := send(autoscaler, m, `{"metadata":{"annotations":{"`+key+`":"2026-01-01T00:00:00Z"}}}`); err != nil {
			t.Fatalf("the cluster autoscaler must be able to mark a Machine API Machine mirror with %s: %v", key, err)
		}
		expectDenied(t, send(admin, m, `{"metadata":{"annotations":{"`+key+`":null}}}`), annotations+machineName)
		if err := send(autoscaler, m, `{"metadata":{"annotations":{"`+key+`":null}}}`); err != nil {
			t.Fatalf("the cluster autoscaler must be able to remove its mark %s: %v", key, err)
		}
	}
	expectDenied(t, send(autoscaler, m, `{"metadata":{"annotations":{"machine.openshift.io/exclude-node-draining":""}}}`), annotations+machineName)
	expectDenied(t, send(autoscaler, m, `{"metadata":{"annotations":{"cluster.x-k8s.io/delete-machine":"yes"}}}`), annotations+machineName)
	expectDenied(t, send(autoscaler, m, `{"spec":{"providerID":"sim://sim-east-1/sim-east-1a/i-autoscaler"}}`),
		"spec: Forbidden: Machine "+machineName+" is a mirror")
}
