package cli

import (
	"fmt"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
)

// describeDeployments gives the Cluster's MachineDeployments, each with the MachineSets it
// controls (oldest revision first).
func describeDeployments(cl *clusterv1.Cluster, s *snapshot, owned map[string]bool) []deploymentView {
	var views []deploymentView
	for i := range s.deployments {
		md := &s.deployments[i]
		if md.Spec.ClusterName != cl.Name {
			continue
		}
		v := describeDeployment(md)
		for _, ms := range deploymentSets(cl, md, s) {
			v.MachineSets = append(v.MachineSets, describeMachineSet(ms.Name, s, owned))
		}
		views = append(views, v)
	}
	return views
}

// describeDeployment gives one MachineDeployment's revision, up-to-date and available counts,
// and whether a rollout is under way or held.
func describeDeployment(md *clusterv1.MachineDeployment) deploymentView {
	_, paused := md.Annotations[clusterv1.PausedAnnotation]
	return deploymentView{
		Name:              md.Name,
		Revision:          md.Annotations[clusterv1.RevisionAnnotation],
		Replicas:          ptr.Deref(md.Spec.Replicas, 0),
		UpToDateReplicas:  ptr.Deref(md.Status.UpToDateReplicas, 0),
		AvailableReplicas: ptr.Deref(md.Status.AvailableReplicas, 0),
		RollingOut:        meta.IsStatusConditionTrue(md.Status.Conditions, clusterv1.MachineDeploymentRollingOutCondition),
		RolloutPaused:     ptr.Deref(md.Spec.Paused, false),
		Paused:            paused,
	}
}

// deploymentSets gives the Cluster API MachineSets md controls, oldest revision first.
func deploymentSets(cl *clusterv1.Cluster, md *clusterv1.MachineDeployment, s *snapshot) []*clusterv1.MachineSet {
	var sets []*clusterv1.MachineSet
	for _, ms := range s.capiSets {
		if ownerOf(ms.OwnerReferences, "MachineDeployment") == md.Name && ms.Spec.ClusterName == cl.Name {
			sets = append(sets, ms)
		}
	}
	sort.Slice(sets, func(a, b int) bool {
		ra, rb := revisionOf(sets[a]), revisionOf(sets[b])
		if ra != rb {
			return ra < rb
		}
		return sets[a].Name < sets[b].Name
	})
	return sets
}

// deployment prints a MachineDeployment and, under it, its MachineSets.
func (p printer) deployment(md deploymentView) {
	rev := md.Revision
	if rev == "" {
		rev = "-"
	}
	want := md.Replicas
	parts := []string{
		"revision " + rev,
		p.health(fmt.Sprintf("%d/%d up to date", md.UpToDateReplicas, want), md.UpToDateReplicas == want, false),
		p.health(fmt.Sprintf("%d/%d available", md.AvailableReplicas, want), md.AvailableReplicas >= want, md.AvailableReplicas == 0 && want > 0),
	}
	if md.RollingOut {
		parts = append(parts, p.paint("33", "rolling out"))
	}
	if md.RolloutPaused {
		parts = append(parts, p.paint("33", "rollout paused"))
	}
	if md.Paused {
		parts = append(parts, p.paint("2", "CAPI paused"))
	}
	fmt.Fprintf(p.out, "├─ MachineDeployment %s  %s\n", p.paint("1", md.Name), strings.Join(parts, "  "))
	for j, ms := range md.MachineSets {
		p.machineSet(ms, "│  ", j == len(md.MachineSets)-1)
	}
}

// revisionOf is a MachineSet's revision as a number (0 when missing).
func revisionOf(ms *clusterv1.MachineSet) int {
	var n int
	_, _ = fmt.Sscan(ms.Annotations[clusterv1.RevisionAnnotation], &n)
	return n
}
