package cli

import (
	"maps"
	"slices"
	"sort"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util"

	"github.com/machina-dev/machina/internal/authority"
	"github.com/machina-dev/machina/internal/mapicond"
)

// authorityMigrationCondition is the condition the migration engine explains a pending
// authority change with.
const authorityMigrationCondition machinev1beta1.ConditionType = "AuthorityMigration"

// describeClusters walks the snapshot once for each Cluster shown (all, or only the one
// named), giving what both the tree and the JSON/YAML documents are made of.
func describeClusters(clusters []clusterv1.Cluster, only string, s *snapshot) []clusterView {
	views := []clusterView{}
	for i := range clusters {
		if only == "" || clusters[i].Name == only {
			views = append(views, describeCluster(&clusters[i], s))
		}
	}
	return views
}

func describeCluster(cl *clusterv1.Cluster, s *snapshot) clusterView {
	v := clusterView{
		Name:                      cl.Name,
		Infrastructure:            refView{Kind: cl.Spec.InfrastructureRef.Kind, Name: cl.Spec.InfrastructureRef.Name},
		InfrastructureProvisioned: ptr.Deref(cl.Status.Initialization.InfrastructureProvisioned, false),
		Paused:                    ptr.Deref(cl.Spec.Paused, false),
	}
	// owned collects the Machines shown under a MachineSet or MachinePool.
	owned := map[string]bool{}
	v.MachineDeployments = describeDeployments(cl, s, owned)
	for _, n := range topLevelSets(cl, s) {
		v.MachineSets = append(v.MachineSets, describeMachineSet(n, s, owned))
	}
	v.MachinePools = describePools(cl, s, owned)
	for _, n := range looseMachines(cl, s, owned) {
		v.Machines = append(v.Machines, describeMachine(n, s))
	}
	return v
}

// topLevelSets names the Machine API MachineSets and the Cluster's Cluster API MachineSets
// that no MachineDeployment controls, sorted.
func topLevelSets(cl *clusterv1.Cluster, s *snapshot) []string {
	names := map[string]bool{}
	for n := range s.mapiSets {
		names[n] = true
	}
	for n, ms := range s.capiSets {
		if ms.Spec.ClusterName == cl.Name && ownerOf(ms.OwnerReferences, "MachineDeployment") == "" {
			names[n] = true
		}
	}
	return slices.Sorted(maps.Keys(names))
}

func describeMachineSet(name string, s *snapshot, owned map[string]bool) machineSetView {
	v := machineSetView{Name: name}
	if mapi := s.mapiSets[name]; mapi != nil {
		v.MachineAPI = &mapiSetView{
			syncView:           syncOf(mapi.Spec.AuthoritativeAPI, mapi.Status.AuthoritativeAPI, mapi.Status.Conditions),
			Replicas:           ptr.Deref(mapi.Spec.Replicas, 1),
			ReadyReplicas:      mapi.Status.ReadyReplicas,
			AuthorityMigration: conditionOf(mapi.Status.Conditions, authorityMigrationCondition),
		}
	}
	if capi := s.capiSets[name]; capi != nil {
		_, paused := capi.Annotations[clusterv1.PausedAnnotation]
		v.ClusterAPI = &capiSetView{
			Replicas:      ptr.Deref(capi.Spec.Replicas, 0),
			ReadyReplicas: ptr.Deref(capi.Status.ReadyReplicas, 0),
			Revision:      capi.Annotations[clusterv1.RevisionAnnotation],
			Paused:        paused,
		}
	}
	for _, n := range setMachines(name, s) {
		owned[n] = true
		v.Machines = append(v.Machines, describeMachine(n, s))
	}
	return v
}

// setMachines names the Machines a MachineSet controls in either API, sorted.
func setMachines(set string, s *snapshot) []string {
	var names []string
	for n, m := range s.mapiMachines {
		if ownerOf(m.OwnerReferences, "MachineSet") == set {
			names = append(names, n)
		}
	}
	for n, m := range s.capiMachines {
		if _, ok := s.mapiMachines[n]; !ok && ownerOf(m.OwnerReferences, "MachineSet") == set {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	return names
}

func describePools(cl *clusterv1.Cluster, s *snapshot, owned map[string]bool) []poolView {
	var pools []poolView
	for i := range s.pools {
		mp := &s.pools[i]
		if mp.Spec.ClusterName != cl.Name {
			continue
		}
		v := poolView{Name: mp.Name, Replicas: ptr.Deref(mp.Spec.Replicas, 0), ReadyReplicas: ptr.Deref(mp.Status.ReadyReplicas, 0)}
		for _, n := range slices.Sorted(maps.Keys(s.capiMachines)) {
			if ownerOf(s.capiMachines[n].OwnerReferences, "MachinePool") == mp.Name {
				owned[n] = true
				v.Machines = append(v.Machines, describeMachine(n, s))
			}
		}
		pools = append(pools, v)
	}
	return pools
}

// looseMachines names the Machines not shown under a MachineSet or MachinePool: the
// Cluster's Cluster API Machines and the Machine API Machines without a mirror, sorted.
func looseMachines(cl *clusterv1.Cluster, s *snapshot, owned map[string]bool) []string {
	var loose []string
	for n, m := range s.capiMachines {
		if !owned[n] && m.Spec.ClusterName == cl.Name {
			loose = append(loose, n)
		}
	}
	for n := range s.mapiMachines {
		if _, mirrored := s.capiMachines[n]; !owned[n] && !mirrored {
			loose = append(loose, n)
		}
	}
	sort.Strings(loose)
	return loose
}

func describeMachine(name string, s *snapshot) machineView {
	v := machineView{Name: name}
	node := ""
	if mapi := s.mapiMachines[name]; mapi != nil {
		v.MachineAPI = &mapiMachineView{
			syncView:     syncOf(mapi.Spec.AuthoritativeAPI, mapi.Status.AuthoritativeAPI, mapi.Status.Conditions),
			Phase:        ptr.Deref(mapi.Status.Phase, ""),
			ErrorMessage: ptr.Deref(mapi.Status.ErrorMessage, ""),
		}
		if mapi.Status.NodeRef != nil {
			node = mapi.Status.NodeRef.Name
		}
	}
	if capi := s.capiMachines[name]; capi != nil {
		v.ClusterAPI = &capiMachineView{Phase: capi.Status.Phase}
		if node == "" {
			node = capi.Status.NodeRef.Name
		}
	}
	if n, ok := s.nodes[node]; ok {
		v.Node = &nodeView{Name: n.Name, Ready: util.IsNodeReady(n)}
	}
	return v
}

func syncOf(spec, status machinev1beta1.MachineAuthority, conds []machinev1beta1.Condition) syncView {
	return syncView{
		AuthoritativeAPI: authorityView{Spec: string(spec), Status: string(status)},
		Synchronized:     conditionOf(conds, authority.SynchronizedCondition),
	}
}

func conditionOf(conds []machinev1beta1.Condition, t machinev1beta1.ConditionType) *conditionView {
	c := mapicond.Get(conds, t)
	if c == nil {
		return nil
	}
	return &conditionView{Status: string(c.Status), Reason: c.Reason, Message: c.Message}
}

func ownerOf(refs []metav1OwnerReference, kind string) string {
	for _, r := range refs {
		if r.Kind == kind && r.Controller != nil && *r.Controller {
			return r.Name
		}
	}
	return ""
}
