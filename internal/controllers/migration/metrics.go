package migration

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

var pendingSeconds = prometheus.NewGaugeVec(prometheus.GaugeOpts{
	Name: "machina_migration_pending_seconds",
	Help: "Age in seconds of each requested authority migration that has not completed (spec.authoritativeAPI differs from status).",
}, []string{"kind", "namespace", "name"})

func init() { metrics.Registry.MustRegister(pendingSeconds) }

// pendingMetric tracks when each pending request was first seen by this process. The age is
// an observation for alerting and for when a routine wait is worth reporting (quietWait);
// no step of the handover depends on it.
type pendingMetric struct {
	kind  string
	mu    sync.Mutex
	since map[string]time.Time
}

func newPendingMetric(kind string) *pendingMetric {
	return &pendingMetric{kind: kind, since: map[string]time.Time{}}
}

// observe records the request and returns how long this process has seen it pending.
func (p *pendingMetric) observe(o client.Object) time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	k := o.GetNamespace() + "/" + o.GetName()
	t, ok := p.since[k]
	if !ok {
		t = time.Now()
		p.since[k] = t
	}
	age := time.Since(t)
	pendingSeconds.WithLabelValues(p.kind, o.GetNamespace(), o.GetName()).Set(age.Seconds())
	return age
}

func (p *pendingMetric) done(o client.Object) { p.forget(client.ObjectKeyFromObject(o)) }

// forget drops a resource's series: its migration completed, or it was deleted (a series
// left behind would keep the pending-migration alert firing forever).
func (p *pendingMetric) forget(key types.NamespacedName) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.since, key.String())
	pendingSeconds.DeleteLabelValues(p.kind, key.Namespace, key.Name)
}
