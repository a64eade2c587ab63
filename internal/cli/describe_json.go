package cli

import (
	"encoding/json"
	"fmt"
	"io"

	"sigs.k8s.io/yaml"
)

// The -o values of describe.
const (
	describeTree = "tree"
	describeJSON = "json"
	describeYAML = "yaml"
)

// describeOutput is what `machina describe -o json|yaml` prints. The tree is drawn from the
// same values, so both outputs always carry the same information.
type describeOutput struct {
	Clusters []clusterView `json:"clusters"`
}

// clusterView is one Cluster and everything describe shows under it.
type clusterView struct {
	Name                      string           `json:"name"`
	Infrastructure            refView          `json:"infrastructure"`
	InfrastructureProvisioned bool             `json:"infrastructureProvisioned"`
	Paused                    bool             `json:"paused,omitempty"`
	MachineDeployments        []deploymentView `json:"machineDeployments,omitempty"`
	// MachineSets are those no MachineDeployment controls (a MachineDeployment's are under it).
	MachineSets  []machineSetView `json:"machineSets,omitempty"`
	MachinePools []poolView       `json:"machinePools,omitempty"`
	// Machines are those without a MachineSet or MachinePool.
	Machines []machineView `json:"machines,omitempty"`
}

type refView struct {
	Kind string `json:"kind"`
	Name string `json:"name"`
}

// deploymentView is a Cluster API MachineDeployment and the MachineSets it controls, oldest
// revision first.
type deploymentView struct {
	Name              string `json:"name"`
	Revision          string `json:"revision,omitempty"`
	Replicas          int32  `json:"replicas"`
	UpToDateReplicas  int32  `json:"upToDateReplicas"`
	AvailableReplicas int32  `json:"availableReplicas"`
	RollingOut        bool   `json:"rollingOut,omitempty"`
	// RolloutPaused is spec.paused; Paused the Cluster API paused annotation.
	RolloutPaused bool             `json:"rolloutPaused,omitempty"`
	Paused        bool             `json:"paused,omitempty"`
	MachineSets   []machineSetView `json:"machineSets,omitempty"`
}

// machineSetView is a MachineSet's Machine API and Cluster API copies side by side; a side
// is left out when that API has no such MachineSet.
type machineSetView struct {
	Name       string        `json:"name"`
	MachineAPI *mapiSetView  `json:"machineAPI,omitempty"`
	ClusterAPI *capiSetView  `json:"clusterAPI,omitempty"`
	Machines   []machineView `json:"machines,omitempty"`
}

// syncView is what a Machine API resource tells of its pair: the authoritative API asked for
// (spec) and in force (status, empty while undecided), and its Synchronized condition (left
// out until there is one).
type syncView struct {
	AuthoritativeAPI authorityView  `json:"authoritativeAPI"`
	Synchronized     *conditionView `json:"synchronized,omitempty"`
}

type authorityView struct {
	Spec   string `json:"spec,omitempty"`
	Status string `json:"status,omitempty"`
}

type conditionView struct {
	Status  string `json:"status"`
	Reason  string `json:"reason,omitempty"`
	Message string `json:"message,omitempty"`
}

type mapiSetView struct {
	syncView
	Replicas           int32          `json:"replicas"`
	ReadyReplicas      int32          `json:"readyReplicas"`
	AuthorityMigration *conditionView `json:"authorityMigration,omitempty"`
}

type capiSetView struct {
	Replicas      int32  `json:"replicas"`
	ReadyReplicas int32  `json:"readyReplicas"`
	Revision      string `json:"revision,omitempty"`
	Paused        bool   `json:"paused,omitempty"`
}

// poolView is a Cluster API MachinePool (it has no Machine API counterpart) and its Machines.
type poolView struct {
	Name          string        `json:"name"`
	Replicas      int32         `json:"replicas"`
	ReadyReplicas int32         `json:"readyReplicas"`
	Machines      []machineView `json:"machines,omitempty"`
}

// machineView is a Machine's two copies side by side and its Node, when that Node exists.
type machineView struct {
	Name       string           `json:"name"`
	MachineAPI *mapiMachineView `json:"machineAPI,omitempty"`
	ClusterAPI *capiMachineView `json:"clusterAPI,omitempty"`
	Node       *nodeView        `json:"node,omitempty"`
}

type mapiMachineView struct {
	syncView
	Phase        string `json:"phase,omitempty"`
	ErrorMessage string `json:"errorMessage,omitempty"`
}

type capiMachineView struct {
	Phase string `json:"phase,omitempty"`
}

type nodeView struct {
	Name  string `json:"name"`
	Ready bool   `json:"ready"`
}

// checkDescribeOutput refuses an -o value describe does not know.
func checkDescribeOutput(format string) error {
	switch format {
	case describeTree, describeJSON, describeYAML:
		return nil
	}
	return &ExitError{Code: 2, Err: fmt.Errorf("--output %q: want %s, %s or %s", format, describeTree, describeJSON, describeYAML)}
}

// writeDocument prints clusters as JSON or YAML.
func writeDocument(out io.Writer, format string, clusters []clusterView) error {
	if clusters == nil {
		clusters = []clusterView{}
	}
	doc := describeOutput{Clusters: clusters}
	var b []byte
	var err error
	if format == describeYAML {
		b, err = yaml.Marshal(doc)
	} else {
		b, err = json.MarshalIndent(doc, "", "  ")
		b = append(b, '\n')
	}
	if err != nil {
		return err
	}
	_, err = out.Write(b)
	return err
}
