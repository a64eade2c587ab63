package machineset

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/machina-dev/machina/internal/controllers/clusterapi/external"
	"github.com/machina-dev/machina/internal/controllers/clusterapi/external/externaltest"
)

// A Machine whose InfraMachine a pass found, while the Machine controller had not reported
// on it yet, is not read again by later passes; once the Machine controller reports the
// InfraMachine missing, it is read again whatever was seen before.
func TestFinishCreationsReadsAFoundCloneOnce(t *testing.T) {
	ctx := context.Background()
	kit := externaltest.New(t)
	infra := externaltest.Object("m")
	cache := &externaltest.CountingReader{Reader: kit.Store(infra)}
	live := &externaltest.CountingReader{Reader: kit.Store(infra)}
	r := &Reconciler{Cache: cache, Reader: live,
		Resolver: &external.Resolver{Reader: kit.Store(kit.CRD), Mapper: kit.Mapper}}

	ms := &clusterv1.MachineSet{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "set"}}
	m := &clusterv1.Machine{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "m", UID: "uid-m",
		CreationTimestamp: metav1.NewTime(time.Now().Add(-time.Hour)),
		Annotations:       map[string]string{TemplateHashAnnotation: templateHash(ms)}},
		Spec: clusterv1.MachineSpec{InfrastructureRef: externaltest.Ref("m")}}

	pass := func(want int) {
		t.Helper()
		if _, err := r.finishCreations(ctx, ms, []*clusterv1.Machine{m}); err != nil {
			t.Fatal(err)
		}
		if cache.Gets != want || live.Gets != 0 {
			t.Fatalf("reads from the cache %d, from the API server %d; want %d and 0", cache.Gets, live.Gets, want)
		}
	}
	pass(1) // not reported on yet: read
	pass(1) // found before: not read again
	m.Status.Conditions = []metav1.Condition{{Type: clusterv1.MachineInfrastructureReadyCondition, Status: metav1.ConditionFalse,
		Reason: clusterv1.MachineInfrastructureDoesNotExistReason}}
	pass(2) // reported missing: read again
	pass(3)
	m.Status.Conditions = nil
	r.seen.forget(client.ObjectKeyFromObject(ms)) // a new leader
	pass(4)
}
