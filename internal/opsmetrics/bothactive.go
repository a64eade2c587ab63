package opsmetrics

import (
	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/machina-dev/machina/internal/gate"
)

var bothActiveDesc = prometheus.NewDesc("machina_authority_both_active",
	"Machine API Machines and MachineSets that both APIs reconcile at once, by kind: the Machine API copy's status.authoritativeAPI is MachineAPI while the Cluster API copy of the same name is not paused (neither it nor its Cluster). A handover never leaves a resource so for longer than the caches take to catch up.",
	[]string{"kind"}, nil)

// bothActive exports machina_authority_both_active for Machines and MachineSets: pairs (a
// Machine API object and the Cluster API object of its name, as machina_machines pairs them)
// whose two copies both have a controller acting on them. The Machine API side acts only
// when status.authoritativeAPI is MachineAPI (gate.MachineAPI); the Cluster API side acts
// unless the object has the cluster.x-k8s.io/paused annotation or its Cluster has
// spec.paused (gate.ClusterAPI). A kind is left out when a list it needs failed.
func (s *scrape) bothActive(capiMachines *clusterv1.MachineList) {
	var clusters clusterv1.ClusterList
	if !s.list("cluster.x-k8s.io/Cluster", &clusters, s.src.ClusterAPINamespace) {
		return
	}
	pausedCluster := map[string]bool{}
	for i := range clusters.Items {
		pausedCluster[clusters.Items[i].Name] = ptr.Deref(clusters.Items[i].Spec.Paused, false)
	}
	count := func(kind string, copies []capiCopy) {
		authorityOf, listed := s.authorityOf[kind]
		if !listed {
			return
		}
		n := 0.0
		for _, c := range copies {
			mapiActive := authorityOf[c.obj.GetName()] == string(machinev1beta1.MachineAuthorityMachineAPI)
			capiActive := !gate.HasPausedAnnotation(c.obj) && !pausedCluster[c.cluster]
			if mapiActive && capiActive {
				n++
			}
		}
		s.gauge(bothActiveDesc, n, kind)
	}
	if capiMachines != nil {
		var copies []capiCopy
		for i := range capiMachines.Items {
			copies = append(copies, capiCopy{&capiMachines.Items[i], capiMachines.Items[i].Spec.ClusterName})
		}
		count("Machine", copies)
	}
	var sets clusterv1.MachineSetList
	if s.list("cluster.x-k8s.io/MachineSet", &sets, s.src.ClusterAPINamespace) {
		var copies []capiCopy
		for i := range sets.Items {
			copies = append(copies, capiCopy{&sets.Items[i], sets.Items[i].Spec.ClusterName})
		}
		count("MachineSet", copies)
	}
}

// capiCopy is a Cluster API Machine or MachineSet and the name of its Cluster.
type capiCopy struct {
	obj     client.Object
	cluster string
}
