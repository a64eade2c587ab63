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
	"errors"
	"fmt"
	"time"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/machina-dev/machina/internal/controllers/sync/synccommon"
	"github.com/machina-dev/machina/internal/gate"
	"github.com/machina-dev/machina/internal/manager"
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

// GroupName is the --controllers name of the operator metrics; the group always runs.
const GroupName = "opsmetrics"

// Group is the operator metrics as a controller group that runs whatever --controllers says.
func Group() manager.Group {
	return manager.Group{Name: GroupName, Always: true, Setup: Setup,
		Description: "operator metrics from the informer cache: Machines by API, phase and authority, unsynchronised resources, pending migrations (always runs)"}
}

// Setup exports the operator metrics, read from mgr's cache, while mgr runs.
func Setup(mgr ctrl.Manager, env manager.Env) error {
	mapiNS, capiNS := env.Namespaces()
	return mgr.Add(&collector{src: &Source{Reader: mgr.GetCache(), MachineAPINamespace: mapiNS, ClusterAPINamespace: capiNS}})
}

// collector is a prometheus.Collector registered with controller-runtime's metrics registry
// for as long as its manager runs. One manager runs in a process at a time; a manager
// started before the previous one stopped takes the registration over.
type collector struct {
	src *Source
}

// NeedLeaderElection: every replica exports what its cache holds.
func (c *collector) NeedLeaderElection() bool { return false }

// Start registers the collector until ctx ends.
func (c *collector) Start(ctx context.Context) error {
	if err := metrics.Registry.Register(c); err != nil {
		var already prometheus.AlreadyRegisteredError
		if !errors.As(err, &already) {
			return fmt.Errorf("operator metrics: %w", err)
		}
		metrics.Registry.Unregister(already.ExistingCollector)
		if err := metrics.Registry.Register(c); err != nil {
			return fmt.Errorf("operator metrics: %w", err)
		}
	}
	<-ctx.Done()
	metrics.Registry.Unregister(c)
	return nil
}

func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{machinesDesc, notSyncedDesc, pendingDesc, scrapeErrorsDesc} {
		ch <- d
	}
}

func (c *collector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, m := range gather(ctx, c.src) {
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
