package simmachine

import (
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	infrav1 "github.com/machina-dev/machina/api/infrastructure/v1alpha1"
	"github.com/machina-dev/machina/internal/cloud/api"
)

// A running instance's resync is spread by the number of SimMachines with running
// instances: a minute up to 300, SimMachines/requeue.CloudLooks seconds beyond; a
// terminated instance leaves the count.
func TestResyncSpreadOverRunningInstances(t *testing.T) {
	r := &Reconciler{}
	running := &api.Instance{InstanceID: "i-1", State: api.StateRunning}
	sm := &infrav1.SimMachine{ObjectMeta: metav1.ObjectMeta{Name: "w-1", Namespace: "ns"}}
	if got := r.apply(sm, running).RequeueAfter; got < DefaultResync || got > DefaultResync*6/5 {
		t.Errorf("alone: resync in %v, want about a minute", got)
	}
	for i := range 999 {
		r.running.Seen(types.NamespacedName{Namespace: "ns", Name: fmt.Sprint("other-", i)})
	}
	if got := r.apply(sm, running).RequeueAfter; got < 200*time.Second || got > 240*time.Second {
		t.Errorf("among 1,000: resync in %v, want 200 s to 240 s", got)
	}
	r.apply(sm, &api.Instance{InstanceID: "i-1", State: api.StateTerminated})
	if r.running.Len() != 999 {
		t.Errorf("%d running after one terminated, want 999", r.running.Len())
	}
}
