package simmachine

import (
	"context"
	"testing"
	"time"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	infrav1 "github.com/machina-dev/machina/api/infrastructure/v1alpha1"
	"github.com/machina-dev/machina/internal/cloud/api"
	"github.com/machina-dev/machina/internal/cloud/cloudtest"
	"github.com/machina-dev/machina/internal/scheme"
)

// The sweeper terminates, on the real simulated cloud, an instance launched for a SimMachine
// that is gone and that nothing records, and no other: not one whose SimMachine exists, not
// one a Machine API Machine records (handed over in a migration), not one another
// SimMachine of the same name (a new UID) records, not one younger than the grace, not one
// the Machine API launched.
func TestOrphanSweeper(t *testing.T) {
	cloud := cloudtest.Start(t)
	ctx := context.Background()
	launch := func(uid, name, apiGroup string) api.Instance {
		t.Helper()
		resp, err := cloud.Client.RunInstances(ctx, api.RunInstancesRequest{ClientToken: uid, Region: "sim-east-1", Zone: "sim-east-1a",
			InstanceType: "s1.medium", Image: "sim-rhcos-9",
			Tags: map[string]string{TagSimMachineUID: uid, TagSimMachine: "ns/" + name, TagAPI: apiGroup}})
		if err != nil {
			t.Fatal(err)
		}
		return resp.Instance
	}
	orphan := launch("uid-gone", "gone", clusterv1.GroupVersion.Group)
	alive := launch("uid-alive", "alive", clusterv1.GroupVersion.Group)
	handed := launch("uid-handed", "handed", clusterv1.GroupVersion.Group)
	renamed := launch("uid-old", "reused", clusterv1.GroupVersion.Group)
	mapi := launch("uid-mapi", "mapi", machinev1beta1.GroupName)

	sm := func(name, uid, providerID string) *infrav1.SimMachine {
		o := &infrav1.SimMachine{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID(uid)}}
		o.Spec.ProviderID = providerID
		return o
	}
	pid := func(i api.Instance) string { return api.FormatProviderID(i.Region, i.Zone, i.InstanceID) }
	m := &machinev1beta1.Machine{ObjectMeta: metav1.ObjectMeta{Namespace: "mapi", Name: "handed"}}
	m.Spec.ProviderID = ptr.To(pid(handed))
	c := fake.NewClientBuilder().WithScheme(scheme.Scheme).WithObjects(
		sm("alive", "uid-alive", ""), sm("reused", "uid-new", pid(renamed)), m).Build()
	s := &OrphanSweeper{Cache: c, Reader: c, Cloud: cloud.Client, Grace: time.Hour}

	if n, err := s.Sweep(ctx); err != nil || n != 0 {
		t.Fatalf("within the grace: Sweep = %d, %v; want 0", n, err)
	}
	s.Grace = time.Nanosecond
	if n, err := s.Sweep(ctx); err != nil || n != 1 {
		t.Fatalf("Sweep = %d, %v; want 1", n, err)
	}
	for _, want := range []struct {
		inst       api.Instance
		terminated bool
	}{{orphan, true}, {alive, false}, {handed, false}, {renamed, false}, {mapi, false}} {
		got, err := cloud.Client.GetInstance(ctx, want.inst.InstanceID)
		if err != nil {
			t.Fatal(err)
		}
		gone := got.State == api.StateShuttingDown || got.State == api.StateTerminated
		if gone != want.terminated {
			t.Errorf("instance for %s: state %s, want terminated %v", want.inst.Tags[TagSimMachine], got.State, want.terminated)
		}
	}
}
