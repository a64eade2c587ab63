package awsactuator_test

import (
	"context"
	"testing"
	"time"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
)

// testMachineSetBornWithFinalizer: with the "aws" group in the same process, the Machine API
// MachineSet creates AWS Machines carrying the Machine controller's finalizer, saving that
// controller's first write (the "machineapi" group alone knows only the simulated kinds;
// manager.Env.MachineAPIKinds tells it which actuators run here).
func testMachineSetBornWithFinalizer(t *testing.T, f *fixture) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ms := f.cluster.MachineSet(f.cluster.Name+"-born", "us-east-1a", 1)
	wc, err := client.NewWithWatch(f.env.Lab.Config, client.Options{Scheme: f.env.Client.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	w, err := wc.Watch(ctx, &machinev1beta1.MachineList{}, client.InNamespace(ms.Namespace), client.MatchingLabels(ms.Spec.Selector.MatchLabels))
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	if err := f.env.Client.Create(ctx, ms); err != nil {
		t.Fatal(err)
	}
	var m *machinev1beta1.Machine
	for m == nil {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				t.Fatal("the watch closed before the MachineSet created its Machine")
			}
			if got, isMachine := ev.Object.(*machinev1beta1.Machine); isMachine && ev.Type == watch.Added {
				m = got
			}
		case <-ctx.Done():
			t.Fatal("the MachineSet created no Machine in time")
		}
	}
	if !controllerutil.ContainsFinalizer(m, machinev1beta1.MachineFinalizer) {
		t.Errorf("%s was created without %s: %v", m.Name, machinev1beta1.MachineFinalizer, m.Finalizers)
	}
	f.running(t, m)
	if err := f.env.Client.Delete(ctx, ms); err != nil {
		t.Fatal(err)
	}
	f.deleted(t, m)
}
