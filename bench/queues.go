package main

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	dto "github.com/prometheus/client_model/go"
)

// queueStat is one controller's work queue as its metrics show it: items added, reconciles
// run, and the time items waited in the queue and spent in Reconcile.
type queueStat struct {
	adds                     float64
	waitSum, waitCount       float64
	reconcileSum, reconcileN float64
}

// queueSnapshot reads every controller's work-queue and reconcile metrics from the manager.
func (e *env) queueSnapshot() (map[string]queueStat, error) {
	families, err := scrapeMetrics("http://" + e.metricsAddr + "/metrics")
	if err != nil {
		return nil, err
	}
	out := map[string]queueStat{}
	each := func(family, label string, f func(*queueStat, *dto.Metric)) {
		for _, m := range families[family].GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == label {
					s := out[l.GetValue()]
					f(&s, m)
					out[l.GetValue()] = s
				}
			}
		}
	}
	each("workqueue_adds_total", "name", func(s *queueStat, m *dto.Metric) { s.adds += m.GetCounter().GetValue() })
	each("workqueue_queue_duration_seconds", "name", func(s *queueStat, m *dto.Metric) {
		s.waitSum += m.GetHistogram().GetSampleSum()
		s.waitCount += float64(m.GetHistogram().GetSampleCount())
	})
	each("controller_runtime_reconcile_time_seconds", "controller", func(s *queueStat, m *dto.Metric) {
		s.reconcileSum += m.GetHistogram().GetSampleSum()
		s.reconcileN += float64(m.GetHistogram().GetSampleCount())
	})
	return out, nil
}

// waitQueuesEmpty waits until no work queue of the manager has an item ready (the sum of
// workqueue_depth is zero) for quiet in a row, and fails after limit.
func (e *env) waitQueuesEmpty(quiet, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	var emptySince time.Time
	for time.Now().Before(deadline) {
		families, err := scrapeMetrics("http://" + e.metricsAddr + "/metrics")
		if err != nil {
			return err
		}
		depth := 0.0
		for _, m := range families["workqueue_depth"].GetMetric() {
			depth += m.GetGauge().GetValue()
		}
		switch {
		case depth > 0:
			emptySince = time.Time{}
		case emptySince.IsZero():
			emptySince = time.Now()
		case time.Since(emptySince) >= quiet:
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("the manager's work queues were not empty for %s within %s", quiet, limit)
}

// queueReport says, per controller, what happened between two snapshots: items added, mean
// wait in the queue, mean Reconcile time; busiest first, idle controllers left out.
func queueReport(before, after map[string]queueStat) string {
	type row struct {
		name string
		d    queueStat
	}
	var rows []row
	for name, a := range after {
		b := before[name]
		d := queueStat{adds: a.adds - b.adds, waitSum: a.waitSum - b.waitSum, waitCount: a.waitCount - b.waitCount,
			reconcileSum: a.reconcileSum - b.reconcileSum, reconcileN: a.reconcileN - b.reconcileN}
		if d.adds > 0 || d.reconcileN > 0 {
			rows = append(rows, row{name, d})
		}
	}
	slices.SortFunc(rows, func(x, y row) int { return cmp.Compare(y.d.adds, x.d.adds) })
	var parts []string
	for _, r := range rows {
		wait, rec := 0.0, 0.0
		if r.d.waitCount > 0 {
			wait = r.d.waitSum / r.d.waitCount * 1000
		}
		if r.d.reconcileN > 0 {
			rec = r.d.reconcileSum / r.d.reconcileN * 1000
		}
		parts = append(parts, fmt.Sprintf("%s adds=%.0f reconciles=%.0f wait=%.0fms reconcile=%.0fms", r.name, r.d.adds, r.d.reconcileN, wait, rec))
	}
	return "\n  queues: " + strings.Join(parts, "\n          ")
}
