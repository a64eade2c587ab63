package machinedeployment_test

import (
	"context"
	"testing"
	"time"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ct "github.com/machina-dev/machina/internal/controllers/clusterapi/internal/capitest"
	"github.com/machina-dev/machina/internal/controllers/internal/provisioncap"
	"github.com/machina-dev/machina/internal/controllers/internal/provisioncap/provisioncaptest"
)

// testProvisioningLimit creates a MachineDeployment of five limited to two provisioning
// Machines: its MachineSet carries the limit, every version of its Machines the API server
// reports has at most two without a Node, and all five get theirs.
func testProvisioningLimit(t *testing.T) {
	e := env.For(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	md := newMD("md-limited", 5, "small")
	md.Annotations = map[string]string{provisioncap.Annotation: "2"}
	wc, err := client.NewWithWatch(e.Lab.Config, client.Options{Scheme: e.Client.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	w, err := wc.Watch(ctx, &clusterv1.MachineList{}, client.InNamespace(ct.NS), client.MatchingLabels{"md": md.Name})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	create(t, e, md)
	peak, up := provisioncaptest.PeakProvisioning(w.ResultChan(), 5, func(m *clusterv1.Machine) bool {
		return !m.Status.NodeRef.IsDefined() && m.DeletionTimestamp.IsZero()
	})
	if up < 5 {
		t.Fatalf("only %d of 5 Machines got a Node in time", up)
	}
	if peak != 2 {
		t.Errorf("at most %d Machines were provisioning at once; want 2 (the limit, reached)", peak)
	}
	var sets clusterv1.MachineSetList
	if err := e.Client.List(ctx, &sets, client.InNamespace(ct.NS), client.MatchingLabels{clusterv1.MachineDeploymentNameLabel: md.Name}); err != nil {
		t.Fatal(err)
	}
	for _, ms := range sets.Items {
		if ms.Annotations[provisioncap.Annotation] != "2" {
			t.Errorf("MachineSet %s annotations %v: the limit did not reach it", ms.Name, ms.Annotations)
		}
	}
}
