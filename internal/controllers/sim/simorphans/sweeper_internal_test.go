package simorphans

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
	"github.com/machina-dev/machina/internal/controllers/sim/simactuator"
	"github.com/machina-dev/machina/internal/controllers/sim/simmachine"
	"github.com/machina-dev/machina/internal/scheme"
)

// The sweeper terminates, on the real simulated cloud, an instance launched for a SimMachine
// or a Machine API Machine that is gone and that nothing records, and no other: not one
// whose object exists, not one a Machine of the other API records (handed over in a
// migration), not one another object of the same name (a new UID) records, not one younger
// than the grace, not one a SimMachinePool launched.
func TestSweeper(t *testing.T) {
	cloud := cloudtest.Start(t)
	ctx := context.Background()
	launch := func(tags map[string]string) api.Instance {
		t.Helper()
		resp, err := cloud.Client.RunInstances(ctx, api.RunInstancesRequest{ClientToken: tags["token"],
			Region: "sim-east-1", Zone: "sim-east-1a", InstanceType: "s1.medium", Image: "sim-rhcos-9", Tags: tags})
		if err != nil {
			t.Fatal(err)
		}
		return resp.Instance
	}
	capi := func(uid, name string) api.Instance {
		return launch(map[string]string{"token": uid, simmachine.TagSimMachineUID: uid, simmachine.TagSimMachine: "ns/" + name,
			simmachine.TagAPI: clusterv1.GroupVersion.Group})
	}
	mapi := func(uid, name string) api.Instance {
		return launch(map[string]string{"token": uid, simactuator.TagMachineUID: uid, simactuator.TagMachine: "mapi/" + name,
			simactuator.TagAPI: machinev1beta1.GroupName})
	}
	type want struct {
		inst       api.Instance
		what       string
		terminated bool
	}
	cases := []want{
		{capi("uid-gone", "gone"), "SimMachine gone", true},
		{capi("uid-alive", "alive"), "SimMachine exists", false},
		{capi("uid-handed", "handed"), "SimMachine gone, its Machine API Machine records it", false},
		{capi("uid-old", "reused"), "SimMachine's name reused, the new one records it", false},
		{mapi("uid-m-gone", "gone"), "Machine API Machine gone", true},
		{mapi("uid-m-renamed", "renamed"), "Machine API Machine's name reused, nothing records it", true},
		{mapi("uid-m-alive", "alive"), "Machine API Machine exists", false},
		{mapi("uid-m-migrated", "migrated"), "Machine API Machine gone, its SimMachine records it", false},
		{launch(map[string]string{"token": "pool", simmachine.TagAPI: clusterv1.GroupVersion.Group}), "a pool's", false},
	}
	pid := func(i api.Instance) string { return api.FormatProviderID(i.Region, i.Zone, i.InstanceID) }
	sm := func(name, uid, providerID string) *infrav1.SimMachine {
		o := &infrav1.SimMachine{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID(uid)}}
		o.Spec.ProviderID = providerID
		return o
	}
	m := func(name, uid, providerID string) *machinev1beta1.Machine {
		o := &machinev1beta1.Machine{ObjectMeta: metav1.ObjectMeta{Namespace: "mapi", Name: name, UID: types.UID(uid)}}
		if providerID != "" {
			o.Spec.ProviderID = ptr.To(providerID)
		}
		return o
	}
	c := fake.NewClientBuilder().WithScheme(scheme.Scheme).WithObjects(
		sm("alive", "uid-alive", ""), sm("reused", "uid-new", pid(cases[3].inst)), sm("migrated", "uid-sm", pid(cases[7].inst)),
		m("handed", "uid-handed-m", pid(cases[2].inst)), m("renamed", "uid-m-new", ""), m("alive", "uid-m-alive", "")).Build()
	s := &Sweeper{Cache: c, Reader: c, Cloud: cloud.Client, Grace: time.Hour}

	if n, err := s.Sweep(ctx); err != nil || n != 0 {
		t.Fatalf("within the grace: Sweep = %d, %v; want 0", n, err)
	}
	s.Grace = time.Nanosecond
	if n, err := s.Sweep(ctx); err != nil || n != 3 {
		t.Fatalf("Sweep = %d, %v; want 3", n, err)
	}
	for _, w := range cases {
		got, err := cloud.Client.GetInstance(ctx, w.inst.InstanceID)
		if err != nil {
			t.Fatal(err)
		}
		gone := got.State == api.StateShuttingDown || got.State == api.StateTerminated
		if gone != w.terminated {
			t.Errorf("%s: state %s, want terminated %v", w.what, got.State, w.terminated)
		}
	}
	if n, err := s.Sweep(ctx); err != nil || n != 0 {
		t.Fatalf("second sweep = %d, %v; want 0 (nothing left to sweep)", n, err)
	}
}
