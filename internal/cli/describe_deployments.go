package cli

import (
	"fmt"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
)

// deployments prints the Cluster's MachineDeployments, each above the MachineSets it
// controls (newest revision last).
func (p printer) deployments(cl *clusterv1.Cluster, s *snapshot, owned map[string]bool) {
	for i := range s.deployments {
		md := &s.deployments[i]
		if md.Spec.ClusterName != cl.Name {
			continue
		}
		p.deployment(md)
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
		for j, ms := range sets {
			p.machineSet(ms.Name, s, "│  ", j == len(sets)-1, owned)
		}
	}
}

// deployment prints one MachineDeployment's line: revision, up-to-date and available counts,
// and whether a rollout is under way or held.
func (p printer) deployment(md *clusterv1.MachineDeployment) {
	want := ptr.Deref(md.Spec.Replicas, 0)
	upToDate, avail := ptr.Deref(md.Status.UpToDateReplicas, 0), ptr.Deref(md.Status.AvailableReplicas, 0)
	parts := []string{
		"revision " + ptr.Deref(revisionString(md.Annotations), "-"),
		p.health(fmt.Sprintf("%d/%d up to date", upToDate, want), upToDate == want, false),
		p.health(fmt.Sprintf("%d/%d available", avail, want), avail >= want, avail == 0 && want > 0),
	}
	if meta.IsStatusConditionTrue(md.Status.Conditions, clusterv1.MachineDeploymentRollingOutCondition) {
		parts = append(parts, p.paint("33", "rolling out"))
	}
	if ptr.Deref(md.Spec.Paused, false) {
		parts = append(parts, p.paint("33", "rollout paused"))
	}
	if _, paused := md.Annotations[clusterv1.PausedAnnotation]; paused {
		parts = append(parts, p.paint("2", "CAPI paused"))
	}
	fmt.Fprintf(p.out, "├─ MachineDeployment %s  %s\n", p.paint("1", md.Name), strings.Join(parts, "  "))
}

func revisionString(annotations map[string]string) *string {
	if v, ok := annotations[clusterv1.RevisionAnnotation]; ok {
		return &v
	}
	return nil
}

// revisionOf is a MachineSet's revision as a number (0 when missing).
func revisionOf(ms *clusterv1.MachineSet) int {
	var n int
	_, _ = fmt.Sscan(ms.Annotations[clusterv1.RevisionAnnotation], &n)
	return n
}
