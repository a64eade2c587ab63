package machine

import (
	"sync"
	"time"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/machina-dev/machina/internal/mapicond"
)

// earlySlack is how much before its planned time a pass still counts as the planned one.
const earlySlack = time.Second

// looks remembers, per Machine, when the last pass that saw its instance asked to look at it
// again, and the resourceVersion that pass left the Machine at. A requeue cannot be taken
// back: a booting instance's pass asks for a look in 20 s, the Node's arrival brings a pass
// that finds the instance running and plans the next look a minute on, and the 20-s requeue
// still fires, a cloud call (DescribeInstances on AWS) for nothing — about one per Machine
// with instances that boot as EC2's do. A pass that finds the Machine as that pass left it,
// with no Node event since, before the planned time, is such a requeue: it waits for the
// plan instead. Memory only: a new leader, or a Machine changed by anyone, looks at once.
type looks struct {
	mu   sync.Mutex
	plan map[types.NamespacedName]look
}

type look struct {
	rv   string    // the Machine's resourceVersion after the pass
	next time.Time // when the pass asked to be looked at again
	// forgot is when an event the resourceVersion does not show (its Node's) arrived; a
	// pass under way then records no plan, so the pass the event queued looks.
	forgot time.Time
}

// early returns how long a pass over m at now should wait for the look planned for it, and
// whether it is early: m is as the last looking pass left it and the plan is not due.
func (l *looks) early(m *machinev1beta1.Machine, now time.Time) (time.Duration, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	p, ok := l.plan[types.NamespacedName{Namespace: m.Namespace, Name: m.Name}]
	if !ok || p.rv != m.ResourceVersion || !now.Before(p.next.Add(-earlySlack)) {
		return 0, false
	}
	return p.next.Sub(now), true
}

// passed records the plan of a pass over m that started at start and ended with res and
// err, after its patch: a pass that saw the instance (InstanceExists True), succeeded and
// asked to look again; any other pass forgets the Machine's plan.
func (l *looks) passed(m *machinev1beta1.Machine, start time.Time, res ctrl.Result, err error) {
	key := types.NamespacedName{Namespace: m.Namespace, Name: m.Name}
	l.mu.Lock()
	defer l.mu.Unlock()
	saw := mapicond.IsTrue(m.Status.Conditions, machinev1beta1.InstanceExistsCondition) && m.DeletionTimestamp.IsZero()
	if err != nil || res.RequeueAfter <= 0 || !saw || m.ResourceVersion == "" || !l.plan[key].forgot.Before(start) {
		delete(l.plan, key)
		return
	}
	if l.plan == nil {
		l.plan = map[types.NamespacedName]look{}
	}
	l.plan[key] = look{rv: m.ResourceVersion, next: start.Add(res.RequeueAfter)}
}

// forget drops the plan of the Machine key, for an event its resourceVersion does not show
// (its Node's): the next pass looks, and a pass under way records no plan.
func (l *looks) forget(key types.NamespacedName) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.plan == nil {
		l.plan = map[types.NamespacedName]look{}
	}
	l.plan[key] = look{forgot: time.Now()}
}

// count is how many Machines have a plan: those whose instances the controller resyncs.
func (l *looks) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.plan)
}

// drop forgets the Machine key altogether: it is gone.
func (l *looks) drop(key types.NamespacedName) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.plan, key)
}
