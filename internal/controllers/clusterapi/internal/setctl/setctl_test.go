package setctl

import (
	"context"
	"slices"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/machina-dev/machina/internal/scheme"
)

func TestSummarise(t *testing.T) {
	if got := Summarise([]string{"a", "b"}); got != "a, b" {
		t.Errorf("got %q", got)
	}
	if got := Summarise([]string{"a", "b", "c", "d", "e", "f", "g"}); got != "a, b, c, d, e and 2 more" {
		t.Errorf("got %q", got)
	}
}

// LinkCluster labels and owns an unowned object, keeps another owner, and keeps labels.
func TestLinkCluster(t *testing.T) {
	cl := &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: "c1", UID: "u1"}}
	ms := &clusterv1.MachineSet{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"k": "v"}}}
	LinkCluster(ms, cl)
	if ms.Labels[clusterv1.ClusterNameLabel] != "c1" || ms.Labels["k"] != "v" {
		t.Errorf("labels %v", ms.Labels)
	}
	if len(ms.OwnerReferences) != 1 || ms.OwnerReferences[0].Kind != "Cluster" || ms.OwnerReferences[0].UID != "u1" {
		t.Errorf("owners %v", ms.OwnerReferences)
	}
	md := &clusterv1.MachineSet{ObjectMeta: metav1.ObjectMeta{OwnerReferences: []metav1.OwnerReference{{Kind: "MachineDeployment", Name: "d"}}}}
	LinkCluster(md, cl)
	if len(md.OwnerReferences) != 1 || md.OwnerReferences[0].Kind != "MachineDeployment" {
		t.Errorf("an owned MachineSet's owners became %v", md.OwnerReferences)
	}
}

// DeleteOwned deletes only what the owner controls in its namespace and names what is left.
func TestDeleteOwned(t *testing.T) {
	ctrlRef := func(uid types.UID) []metav1.OwnerReference {
		return []metav1.OwnerReference{{Kind: "MachineSet", Name: "x", UID: uid, Controller: new(true)}}
	}
	objs := []client.Object{
		&clusterv1.Machine{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "mine-1", OwnerReferences: ctrlRef("owner")}},
		&clusterv1.Machine{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "mine-2", OwnerReferences: ctrlRef("owner")}},
		&clusterv1.Machine{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "other", OwnerReferences: ctrlRef("other")}},
		&clusterv1.Machine{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "orphan"}},
		&clusterv1.Machine{ObjectMeta: metav1.ObjectMeta{Namespace: "elsewhere", Name: "mine-3", OwnerReferences: ctrlRef("owner")}},
	}
	c := fake.NewClientBuilder().WithScheme(scheme.Scheme).WithObjects(objs...).Build()
	ctx := context.Background()
	left, err := DeleteOwned(ctx, c, &clusterv1.MachineList{}, "ns", "owner")
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(left)
	if !slices.Equal(left, []string{"mine-1", "mine-2"}) {
		t.Errorf("left %v, want the owner's two in ns", left)
	}
	var after clusterv1.MachineList
	if err := c.List(ctx, &after); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, m := range after.Items {
		names = append(names, m.Namespace+"/"+m.Name)
	}
	slices.Sort(names)
	if want := []string{"elsewhere/mine-3", "ns/orphan", "ns/other"}; !slices.Equal(names, want) {
		t.Errorf("remaining Machines %v, want %v", names, want)
	}
	if left, err := DeleteOwned(ctx, c, &clusterv1.MachineList{}, "ns", "owner"); err != nil || len(left) != 0 {
		t.Errorf("second pass: left %v, %v", left, err)
	}
}
