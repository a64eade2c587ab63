package admission_test

import (
	"context"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/client"
)

const clusterIDLabel = "machine.openshift.io/cluster-api-cluster"

// testClusterIDImmutable: once a Machine or MachineSet has the cluster-ID label, no one
// changes or removes it, neither the user who owns the Machine (alice) nor a cluster
// administrator; the other labels stay the user's.
func testClusterIDImmutable(t *testing.T, admin, alice client.Client) {
	ctx := context.Background()
	sel := map[string]string{"set": "cluster-id"}
	ms := machineSet("cluster-id", sel, sel, sim(nil))
	ms.Labels = map[string]string{clusterIDLabel: "lab-7x2kq"}
	m := machine("fixed-cluster-id", sim(nil))
	m.Labels = map[string]string{clusterIDLabel: "lab-7x2kq"}
	for kind, o := range map[string]client.Object{"MachineSet": ms, "Machine": m} {
		if err := alice.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
		prefix := "metadata.labels[machine.openshift.io/cluster-api-cluster]: Forbidden: the cluster-ID label of " + kind + " " + o.GetName() +
			` is immutable once set (it is "lab-7x2kq"): `
		for _, c := range []client.Client{alice, admin} {
			o.SetLabels(map[string]string{clusterIDLabel: "other-cluster"})
			expectDenied(t, c.Update(ctx, o), prefix+`it cannot become "other-cluster"`)
			o.SetLabels(map[string]string{"team": "blue"})
			expectDenied(t, c.Update(ctx, o), prefix+"it cannot be removed")
		}
		o.SetLabels(map[string]string{clusterIDLabel: "lab-7x2kq", "team": "blue"})
		if err := alice.Update(ctx, o); err != nil {
			t.Fatalf("%s: the user's own labels must stay changeable: %v", kind, err)
		}
	}
}

// testClusterIDAddable: a Machine created without the cluster-ID label (before the
// Infrastructure names the cluster, as here) may get it later, as the sync gives a mirror
// the label.
func testClusterIDAddable(t *testing.T, admin client.Client) {
	ctx := context.Background()
	bare := machine("no-cluster-id", sim(nil))
	bare.Labels = map[string]string{"team": "blue"}
	if err := admin.Create(ctx, bare); err != nil {
		t.Fatal(err)
	}
	if _, set := bare.Labels[clusterIDLabel]; set {
		t.Fatalf("the label was defaulted without an Infrastructure: %v", bare.Labels)
	}
	bare.Labels[clusterIDLabel] = "lab-7x2kq"
	if err := admin.Update(ctx, bare); err != nil {
		t.Fatalf("adding the label to a Machine without one must stay allowed: %v", err)
	}
}
