package authority

import "regexp"

// The namespaces OpenShift keeps each API's copies in, used wherever none is given: an empty
// manager.Env namespace, the command line's --machine-api-namespace and
// --cluster-api-namespace.
const (
	DefaultMachineAPINamespace = "openshift-machine-api"
	DefaultClusterAPINamespace = "openshift-cluster-api"
)

// Namespaces is where each API's copies live.
type Namespaces struct {
	MachineAPI string
	ClusterAPI string
	// AdditionalSyncMachineLabels are the manager's --additional-sync-machine-labels: Node
	// labels outside the Cluster API's own domains that the conversion accepts on Machines.
	AdditionalSyncMachineLabels []*regexp.Regexp
}
