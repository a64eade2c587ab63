// Package opsmetrics exposes what an operator watches about machina's objects, computed
// from the manager's informer cache at scrape time: Machines by API, phase and authority,
// resources whose mirror is not synchronised, authority migrations still pending, and
// Machines and MachineSets whose two copies are both active at once.
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

	"github.com/machina-dev/machina/internal/authority"
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
		Description: "operator metrics from the informer cache: Machines by API, phase and authority, unsynchronised resources, pending migrations, resources active in both APIs (always runs)"}
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
	for _, d := range []*prometheus.Desc{machinesDesc, notSyncedDesc, pendingDesc, bothActiveDesc, scrapeErrorsDesc} {
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

// scrape is one collection: the objects it lists and the metrics it builds from them.
type scrape struct {
	ctx context.Context
	src *Source
	out []prometheus.Metric
	// authorityOf is the status.authoritativeAPI of each Machine API Machine and MachineSet
	// by kind and name, for pairing them with their Cluster API copies; a kind is absent
	// when it could not be listed.
	authorityOf map[string]map[string]string
	notSynced   map[condKey]float64
	pending     map[string]float64
}

// list lists kind into list and records whether it could (machina_opsmetrics_list_errors).
func (s *scrape) list(kind string, list client.ObjectList, ns string) bool {
	err := s.src.Reader.List(s.ctx, list, client.InNamespace(ns))
	v := 0.0
	if err != nil {
		v = 1
	}
	s.out = append(s.out, prometheus.MustNewConstMetric(scrapeErrorsDesc, prometheus.GaugeValue, v, kind))
	return err == nil
}

func (s *scrape) gauge(desc *prometheus.Desc, v float64, labels ...string) {
	s.out = append(s.out, prometheus.MustNewConstMetric(desc, prometheus.GaugeValue, v, labels...))
}

// gather lists the objects and builds the metrics.
func gather(ctx context.Context, src *Source) []prometheus.Metric {
	s := &scrape{ctx: ctx, src: src, authorityOf: map[string]map[string]string{},
		notSynced: map[condKey]float64{}, pending: map[string]float64{}}
	machines := map[machineKey]float64{}
	s.machineAPIMachines(machines)
	s.machineAPIMachineSets()
	s.machineAPIHealthChecks()
	capiMachines := s.clusterAPIMachines(machines)
	s.bothActive(capiMachines)
	for k, v := range machines {
		s.gauge(machinesDesc, v, k.api, k.phase, k.authority)
	}
	for k, v := range s.notSynced {
		s.gauge(notSyncedDesc, v, k.kind, k.reason)
	}
	for k, v := range s.pending {
		s.gauge(pendingDesc, v, k)
	}
	return s.out
}

func (s *scrape) machineAPIMachines(machines map[machineKey]float64) {
	var mm machinev1beta1.MachineList
	if !s.list("machine.openshift.io/Machine", &mm, s.src.MachineAPINamespace) {
		return
	}
	s.pending["Machine"] = 0
	s.authorityOf["Machine"] = map[string]string{}
	for i := range mm.Items {
		m := &mm.Items[i]
		auth := authorityLabel(m.Status.AuthoritativeAPI)
		s.authorityOf["Machine"][m.Name] = auth
		machines[machineKey{"machine.openshift.io", phase(ptr.Deref(m.Status.Phase, "")), auth}]++
		countConditions(s.notSynced, "Machine", m.Status.Conditions)
		if m.Spec.AuthoritativeAPI != "" && m.Spec.AuthoritativeAPI != m.Status.AuthoritativeAPI {
			s.pending["Machine"]++
		}
	}
}

func (s *scrape) machineAPIMachineSets() {
	var ms machinev1beta1.MachineSetList
	if !s.list("machine.openshift.io/MachineSet", &ms, s.src.MachineAPINamespace) {
		return
	}
	s.pending["MachineSet"] = 0
	s.authorityOf["MachineSet"] = map[string]string{}
	for i := range ms.Items {
		m := &ms.Items[i]
		s.authorityOf["MachineSet"][m.Name] = authorityLabel(m.Status.AuthoritativeAPI)
		countConditions(s.notSynced, "MachineSet", m.Status.Conditions)
		if m.Spec.AuthoritativeAPI != "" && m.Spec.AuthoritativeAPI != m.Status.AuthoritativeAPI {
			s.pending["MachineSet"]++
		}
	}
}

func (s *scrape) machineAPIHealthChecks() {
	var mhcs machinev1beta1.MachineHealthCheckList
	if !s.list("machine.openshift.io/MachineHealthCheck", &mhcs, s.src.MachineAPINamespace) {
		return
	}
	s.pending["MachineHealthCheck"] = 0
	for i := range mhcs.Items {
		h := &mhcs.Items[i]
		countConditions(s.notSynced, "MachineHealthCheck", h.Status.Conditions)
		current := h.Annotations[authority.MHCStatusAuthoritativeAPIAnnotation]
		if current == "" {
			current = string(machinev1beta1.MachineAuthorityMachineAPI)
		}
		if want := h.Annotations[authority.MHCAuthoritativeAPIAnnotation]; want != "" && want != current {
			s.pending["MachineHealthCheck"]++
		}
	}
}

// clusterAPIMachines counts the Cluster API Machines and returns them, nil when they could
// not be listed.
func (s *scrape) clusterAPIMachines(machines map[machineKey]float64) *clusterv1.MachineList {
	var cm clusterv1.MachineList
	if !s.list("cluster.x-k8s.io/Machine", &cm, s.src.ClusterAPINamespace) {
		return nil
	}
	for i := range cm.Items {
		m := &cm.Items[i]
		auth, mirrored := s.authorityOf["Machine"][m.Name]
		if !mirrored {
			auth = string(machinev1beta1.MachineAuthorityClusterAPI)
		}
		machines[machineKey{"cluster.x-k8s.io", phase(m.Status.Phase), auth}]++
	}
	return &cm
}

func countConditions(into map[condKey]float64, kind string, conds []machinev1beta1.Condition) {
	for _, c := range conds {
		if c.Type == authority.SynchronizedCondition && c.Status == corev1.ConditionFalse {
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

func authorityLabel(a machinev1beta1.MachineAuthority) string {
	if a == "" {
		return "Undecided"
	}
	return string(a)
}
