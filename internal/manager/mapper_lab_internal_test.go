package manager

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"

	"github.com/machina-dev/machina/internal/lab/labtest"
)

// Against a real API server: the CRD check finds an installed kind and not a missing one,
// and fresh mappers asked for installed CRD kinds all through an API server restart never
// answer "no match" (a restarted API server lists the groups of CRDs in discovery a moment
// before it serves their resources; the soak's replicas exited on that answer).
func TestPatientMapperAcrossAPIServerRestart(t *testing.T) {
	l := labtest.Start(t)
	hc, err := rest.HTTPClientFor(l.Config)
	if err != nil {
		t.Fatal(err)
	}
	m, err := newPatientMapper(l.Config, hc)
	if err != nil {
		t.Fatal(err)
	}
	serves := m.(patientMapper).crdServes
	machineSet := schema.GroupKind{Group: "cluster.x-k8s.io", Kind: "MachineSet"}
	for _, tc := range []struct {
		m    crdMatch
		want bool
	}{
		{kindMatch(machineSet, []string{"v1beta2"}), true},
		{kindMatch(machineSet, []string{"v1alpha1"}), false},
		{kindMatch(schema.GroupKind{Group: "example.com", Kind: "Widget"}, nil), false},
	} {
		if got, err := serves(tc.m); err != nil || got != tc.want {
			t.Errorf("%s: served %v (%v), want %v", tc.m, got, err, tc.want)
		}
	}

	kinds := []schema.GroupVersionKind{
		machineSet.WithVersion("v1beta2"),
		{Group: "machine.openshift.io", Version: "v1beta1", Kind: "Machine"},
		{Group: "infrastructure.cluster.x-k8s.io", Version: "v1beta2", Kind: "AWSMachine"},
	}
	var (
		stop     atomic.Bool
		wg       sync.WaitGroup
		lookups  atomic.Int64
		mu       sync.Mutex
		noMatchs []error
	)
	wg.Add(1)
	go func() {
		defer wg.Done()
		for !stop.Load() {
			m, err := newPatientMapper(l.Config, hc)
			if err != nil {
				t.Error(err)
				return
			}
			for _, gvk := range kinds {
				_, err := m.RESTMapping(gvk.GroupKind(), gvk.Version)
				lookups.Add(1)
				if meta.IsNoMatchError(err) {
					mu.Lock()
					noMatchs = append(noMatchs, err)
					mu.Unlock()
				}
			}
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for range 2 {
		if err := l.RestartAPIServer(ctx); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Second)
	}
	stop.Store(true)
	wg.Wait()
	t.Logf("%d lookups across 2 restarts", lookups.Load())
	if len(noMatchs) > 0 {
		t.Fatalf("%d lookups of installed kinds answered no match, first: %v", len(noMatchs), noMatchs[0])
	}
}
