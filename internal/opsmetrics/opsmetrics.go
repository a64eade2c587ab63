// Package opsmetrics exposes what an operator watches about machina's objects, computed
// from the manager's informer cache at scrape time: Machines by API, phase and authority,
// resources whose mirror is not synchronised, and authority migrations still pending.
//
// Controller-runtime already exports reconcile rates, errors and latencies per controller
// (controller_runtime_reconcile_*); the cloud client counts cloud API calls
// (machina_cloud_api_*); the migration controller exports each pending request's age
// (machina_migration_pending_seconds).
package opsmetrics

import (
	"context"
	"sync"
	"time"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/machina-dev/machina/internal/controllers/sync/synccommon"
	"github.com/machina-dev/machina/internal/gate"
)

var (
	machinesDesc = prometheus.NewDesc("machina_machines",
		"Machines by API (machine.openshift.io or cluster.x-k8s.io), phase and authoritative API. A Cluster API Machine's authority is its Machine API mirror's; one without a mirror counts as ClusterAPI.",
		[]string{"api", "phase", "authority"}, nil)
	notSyncedDesc = prometheus.NewDesc("machina_sync_not_synchronized",
		"Machine API resources whose Synchronized condition is False, by kind and reason (for example ConversionFailed).",
		[]string{"kind", "reason"}, nil)
	pendingDesc = prometheus.NewDesc("machina_migrations_pending",
		"Machine API resources whose requested authority (spec.authoritativeAPI) differs from their current one, by kind.",
		[]string{"kind"}, nil)
	scrapeErrorsDesc = prometheus.NewDesc("machina_opsmetrics_list_errors",
		"1 when the last scrape could not list a kind (for example its CRD is not installed), by kind.",
		[]string{"kind"}, nil)
)

// Source is where the collector reads objects: normally the manager's cache.
type Source struct {
	Reader              client.Reader
	MachineAPINamespace string
	ClusterAPINamespace string
}

type collector struct {
	mu  sync.Mutex
	src *Source
}

var (
	the      = &collector{}
	register sync.Once
)

// Use makes the collector read from src (the latest manager started in this process) and
// registers it with controller-runtime's metrics registry on first use.
func Use(src Source) {
	register.Do(func() { metrics.Registry.MustRegister(the) })
	the.mu.Lock()
	defer the.mu.Unlock()
	the.src = &src
}

func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{machinesDesc, notSyncedDesc, pendingDesc, scrapeErrorsDesc} {
		ch <- d
	}
}

func (c *collector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	src := c.src
	c.mu.Unlock()
	if src == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, m := range gather(ctx, src) {
		ch <- m
	}
}

type machineKey struct{ api, phase, authority string }
type condKey struct{ kind, reason string }

// gather lists the objects and builds the metrics.
func gather(ctx context.Context, src *Source) []prometheus.Metric {
	var out []prometheus.Metric
	listed := func(kind string, list client.ObjectList, ns string) bool {
		err := src.Reader.List(ctx, list, client.InNamespace(ns))
		v := 0.0
		if err != nil {
			v = 1
		}
		out = append(out, prometheus.MustNewConstMetric(scrapeErrorsDesc, prometheus.GaugeValue, v, kind))
		return err == nil
	}
	machines := map[machineKey]float64{}
	notSynced := map[condKey]float64{}
	pending := map[string]float64{}
	authorityOf := map[string]string{}

	var mm machinev1beta1.MachineList
	if listed("machine.openshift.io/Machine", &mm, src.MachineAPINamespace) {
		pending["Machine"] = 0
		for i := range mm.Items {
			m := &mm.Items[i]
			auth := authority(m.Status.AuthoritativeAPI)
			authorityOf[m.Name] = auth
			machines[machineKey{"machine.openshift.io", phase(ptr.Deref(m.Status.Phase, "")), auth}]++
			countConditions(notSynced, "Machine", m.Status.Conditions)
			if m.Spec.AuthoritativeAPI != "" && m.Spec.AuthoritativeAPI != m.Status.AuthoritativeAPI {
				pending["Machine"]++
			}
		}
	}
	var ms machinev1beta1.MachineSetList
	if listed("machine.openshift.io/MachineSet", &ms, src.MachineAPINamespace) {
		pending["MachineSet"] = 0
		for i := range ms.Items {
			s := &ms.Items[i]
			countConditions(notSynced, "MachineSet", s.Status.Conditions)
			if s.Spec.AuthoritativeAPI != "" && s.Spec.AuthoritativeAPI != s.Status.AuthoritativeAPI {
				pending["MachineSet"]++
			}
		}
	}
	var mhcs machinev1beta1.MachineHealthCheckList
	if listed("machine.openshift.io/MachineHealthCheck", &mhcs, src.MachineAPINamespace) {
		pending["MachineHealthCheck"] = 0
		for i := range mhcs.Items {
			h := &mhcs.Items[i]
			countConditions(notSynced, "MachineHealthCheck", h.Status.Conditions)
			current := h.Annotations[gate.MHCStatusAuthoritativeAPIAnnotation]
			if current == "" {
				current = string(machinev1beta1.MachineAuthorityMachineAPI)
			}
			if want := h.Annotations[gate.MHCAuthoritativeAPIAnnotation]; want != "" && want != current {
				pending["MachineHealthCheck"]++
			}
		}
	}
	var cm clusterv1.MachineList
	if listed("cluster.x-k8s.io/Machine", &cm, src.ClusterAPINamespace) {
		for i := range cm.Items {
			m := &cm.Items[i]
			auth, mirrored := authorityOf[m.Name]
			if !mirrored {
				auth = string(machinev1beta1.MachineAuthorityClusterAPI)
			}
			machines[machineKey{"cluster.x-k8s.io", phase(m.Status.Phase), auth}]++
		}
	}
	for k, v := range machines {
		out = append(out, prometheus.MustNewConstMetric(machinesDesc, prometheus.GaugeValue, v, k.api, k.phase, k.authority))
	}
	for k, v := range notSynced {
		out = append(out, prometheus.MustNewConstMetric(notSyncedDesc, prometheus.GaugeValue, v, k.kind, k.reason))
	}
	for k, v := range pending {
		out = append(out, prometheus.MustNewConstMetric(pendingDesc, prometheus.GaugeValue, v, k))
	}
	return out
}

func countConditions(into map[condKey]float64, kind string, conds []machinev1beta1.Condition) {
	for _, c := range conds {
		if c.Type == synccommon.SynchronizedCondition && c.Status == corev1.ConditionFalse {
			into[condKey{kind, c.Reason}]++
		}
	}
}

func phase(p string) string {
	if p == "" {
		return "None"
	}
	return p
}

func authority(a machinev1beta1.MachineAuthority) string {
	if a == "" {
		return "Undecided"
	}
	return string(a)
}
