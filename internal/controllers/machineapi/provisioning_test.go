package machineapi_test

import (
	"context"
	"testing"
	"time"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/machina-dev/machina/internal/controllers/internal/provisioncap"
	"github.com/machina-dev/machina/internal/controllers/internal/provisioncap/provisioncaptest"
)

// testMachineSetProvisioningLimit scales a MachineSet limited to two provisioning Machines
// from 0 to 6: every version of its Machines the API server reports has at most two without
// a Node, all six end Running, and the set said that the rest waited.
func testMachineSetProvisioningLimit(t *testing.T) {
	e := env.For(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	ms := newMachineSet("limited", 0, "")
	ms.Annotations = map[string]string{provisioncap.Annotation: "2"}
	wc, err := client.NewWithWatch(e.Lab.Config, client.Options{Scheme: e.Client.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	w, err := wc.Watch(ctx, &machinev1beta1.MachineList{}, client.InNamespace(ns), client.MatchingLabels(ms.Spec.Selector.MatchLabels))
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	peak := make(chan int, 1)
	go func() {
		p, _ := provisioncaptest.PeakProvisioning(w.ResultChan(), 6, func(m *machinev1beta1.Machine) bool {
			return m.Status.NodeRef == nil && m.DeletionTimestamp.IsZero() && ptr.Deref(m.Status.Phase, "") != machinev1beta1.PhaseFailed
		})
		peak <- p
	}()
	if err := e.Client.Create(ctx, ms); err != nil {
		t.Fatal(err)
	}
	scaleTo(t, e, ms, 6)
	waitRunning(t, e, ms, 6)
	if got := <-peak; got != 2 {
		t.Errorf("at most %d Machines were provisioning at once; want 2 (the limit, reached)", got)
	}
	e.Eventually(30*time.Second, "an event saying Machines waited for the limit", func(ctx context.Context) (bool, string, error) {
		var list corev1.EventList
		if err := e.Client.List(ctx, &list, client.InNamespace(ns), client.MatchingFields{"involvedObject.name": ms.Name}); err != nil {
			return false, err.Error(), nil
		}
		for _, ev := range list.Items {
			if ev.Reason == "SuccessfulCreate" && ev.Message == "Created 2 Machine(s); 4 more wait: at most 2 provisioning at once (machina.dev/max-provisioning)" {
				return true, "", nil
			}
		}
		return false, "no such event", nil
	})
	scaleTo(t, e, ms, 0)
	waitRunning(t, e, ms, 0)
}
