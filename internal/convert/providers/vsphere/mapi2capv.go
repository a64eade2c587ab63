package vsphere

import (
	"reflect"
	"slices"
	"strings"

	mapiv1 "github.com/openshift/api/machine/v1beta1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
	capvv1 "sigs.k8s.io/cluster-api-provider-vsphere/api/govmomi/v1beta2"

	"github.com/machina-dev/machina/internal/convert"
)

// capv is CAPV's name in messages.
const capv = "CAPV"

// anyDatacenter is the datacenter CAPV's webhook gives a VSphereMachine naming none: the
// inventory's only one, which is what the Machine API finds for an empty datacenter too.
const anyDatacenter = "*"

// minCPUs is the fewest virtual CPUs either actuator gives a VM (and CAPV's CRD accepts).
const minCPUs = 2

// ToInfra converts a VSphereMachineProviderSpec into a VSphereMachine spec.
func (p Platform) ToInfra(value *runtime.RawExtension, path *field.Path, r *convert.Report) (convert.InfraSpec, convert.MachineValues) {
	var ps mapiv1.VSphereMachineProviderSpec
	if !convert.DecodeProviderSpec(value, &ps, path, r) {
		return nil, convert.MachineValues{}
	}
	var mv convert.MachineValues
	convert.CheckTypeMeta(ps.APIVersion, ps.Kind, convert.SpecType{APIVersion: mapiv1.GroupVersion.String(), Legacy: legacyAPIVersion, Kind: ProviderSpecKind}, path, r)
	if !reflect.ValueOf(ps.ObjectMeta).IsZero() {
		r.Warn(path.Child("metadata"), "ignored by the Machine API and dropped")
	}
	out := &capvv1.VSphereMachineSpec{}

	// Clone source and placement.
	if ps.Template == "" {
		r.Error(field.Required(path.Child("template"), "the VM template to clone"))
	}
	out.Template = ps.Template
	out.CloneMode = cloneModeToCAPV(ps.CloneMode, path.Child("cloneMode"), r)
	out.Snapshot = ps.Snapshot
	p.workspaceToCAPV(ps.Workspace, out, path.Child("workspace"), r)

	// Sizing.
	sizingToCAPV(&ps, out, path, r)
	out.TagIDs = append([]string(nil), ps.TagIDs...)
	for i, t := range ps.TagIDs {
		if t == "" {
			r.Error(field.Required(path.Child("tagIDs").Index(i), "a tag's URN"))
		}
	}
	out.DataDisks = dataDisksToCAPV(ps.DataDisks, path.Child("dataDisks"), r)
	out.Network = networkToCAPV(ps.Network, path.Child("network"), r)

	// Secrets.
	switch {
	case ps.UserDataSecret == nil || ps.UserDataSecret.Name == "":
		r.Error(field.Required(path.Child("userDataSecret", "name"), "Cluster API Machines need bootstrap data (spec.bootstrap.dataSecretName)"))
	default:
		mv.DataSecretName = ptr.To(ps.UserDataSecret.Name)
	}
	switch cs := ps.CredentialsSecret; {
	case cs == nil || cs.Name == "":
		r.Warn(path.Child("credentialsSecret"), "unset; CAPV uses the VSphereCluster's identityRef (or its own credentials) and converting back sets %s", p.credentialsSecret())
	case cs.Name != p.credentialsSecret():
		r.Error(field.Invalid(path.Child("credentialsSecret", "name"), cs.Name, "CAPV takes credentials from the VSphereCluster (spec.identityRef) or its own, one set per cluster; this cluster's Machine API credentials secret is "+p.credentialsSecret()))
	}
	return out, mv
}

// cloneModeToCAPV names the clone mode explicitly: the Machine API makes a full clone when
// none is named, CAPV a linked one.
func cloneModeToCAPV(m mapiv1.CloneMode, path *field.Path, r *convert.Report) capvv1.CloneMode {
	switch m {
	case "", mapiv1.FullClone:
		return capvv1.FullClone
	case mapiv1.LinkedClone:
		return capvv1.LinkedClone
	}
	r.Error(field.NotSupported(path, m, []string{string(mapiv1.FullClone), string(mapiv1.LinkedClone)}))
	return ""
}

// workspaceToCAPV copies the placement; what is unset both actuators find the same way (the
// inventory's only datacenter, default folder, datastore and resource pool). An empty server is the cluster's vCenter in both: CAPV
// takes the VSphereCluster's spec.server, the Machine API its cloud provider configuration's.
func (p Platform) workspaceToCAPV(ws *mapiv1.Workspace, out *capvv1.VSphereMachineSpec, path *field.Path, r *convert.Report) {
	out.Datacenter = anyDatacenter
	if ws == nil {
		return
	}
	switch {
	case ws.Server == "":
		p.checkClusterServer(path.Child("server"), r)
	case p.VCenters == nil:
		r.Warn(path.Child("server"), "not checked: the cluster's vCenters (Infrastructure spec.platformSpec.vsphere.vcenters) are not known here")
	case !p.knownServer(ws.Server):
		r.Error(field.NotSupported(path.Child("server"), ws.Server, p.VCenters))
	}
	out.Server = ws.Server
	if ws.Datacenter != "" {
		out.Datacenter = ws.Datacenter
	}
	out.Folder, out.Datastore, out.ResourcePool = ws.Folder, ws.Datastore, ws.ResourcePool
	if ws.VMGroup != "" {
		r.Unsupported(path.Child("vmGroup"), ws.VMGroup, capv+" on a VSphereMachine (it adds VMs to a host group only through a VSphereFailureDomain's topology)")
	}
}

// checkClusterServer refuses a VM naming no server when the VSphereCluster's server, which CAPV
// then uses, is not one of the cluster's vCenters, where the Machine API creates it.
func (p Platform) checkClusterServer(path *field.Path, r *convert.Report) {
	if p.ClusterServer != "" && !p.knownServer(p.ClusterServer) {
		r.Error(field.Required(path, "unset, the Machine API uses the cluster's vCenter ("+strings.Join(p.VCenters, ", ")+") and CAPV the VSphereCluster's spec.server "+p.ClusterServer+": name the server"))
	}
}

// sizingToCAPV copies CPUs, memory and the boot disk. Both actuators give a VM at least two
// CPUs; the Machine API puts them all on one socket unless numCoresPerSocket says otherwise,
// CAPV leaves the template's topology, so the converter names the socket size.
func sizingToCAPV(ps *mapiv1.VSphereMachineProviderSpec, out *capvv1.VSphereMachineSpec, path *field.Path, r *convert.Report) {
	switch n := ps.NumCPUs; {
	case n < 0:
		r.Error(field.Invalid(path.Child("numCPUs"), n, "must not be negative"))
	case n == 1:
		r.Warn(path.Child("numCPUs"), "1 becomes %d: both actuators give a VM at least %d CPUs, and CAPV's CRD accepts no fewer", minCPUs, minCPUs)
		out.NumCPUs = minCPUs
	default:
		out.NumCPUs = n
	}
	switch c := ps.NumCoresPerSocket; {
	case c < 0:
		r.Error(field.Invalid(path.Child("numCoresPerSocket"), c, "must not be negative"))
	case c == 0:
		out.NumCoresPerSocket = ptr.To(effectiveCPUs(ps.NumCPUs))
	default:
		out.NumCoresPerSocket = ptr.To(c)
	}
	if ps.MemoryMiB < 0 {
		r.Error(field.Invalid(path.Child("memoryMiB"), ps.MemoryMiB, "must not be negative"))
	}
	out.MemoryMiB = max(ps.MemoryMiB, 0)
	if ps.DiskGiB < 0 {
		r.Error(field.Invalid(path.Child("diskGiB"), ps.DiskGiB, "must not be negative"))
	}
	out.DiskGiB = max(ps.DiskGiB, 0)
}

// effectiveCPUs is the number of CPUs both actuators give a VM asking for n.
func effectiveCPUs(n int32) int32 { return max(n, minCPUs) }

var provisioningModes = []string{string(mapiv1.ProvisioningModeThin), string(mapiv1.ProvisioningModeThick), string(mapiv1.ProvisioningModeEagerlyZeroed)}

// dataDisksToCAPV copies the data disks, which both actuators add to the clone by name.
func dataDisksToCAPV(in []mapiv1.VSphereDisk, path *field.Path, r *convert.Report) []capvv1.VSphereDisk {
	var out []capvv1.VSphereDisk
	for i, d := range in {
		checkDisk(d.Name, d.SizeGiB, string(d.ProvisioningMode), in[:i], path.Index(i), r)
		out = append(out, capvv1.VSphereDisk{Name: d.Name, SizeGiB: d.SizeGiB, ProvisioningMode: capvv1.ProvisioningMode(d.ProvisioningMode)})
	}
	return out
}

// checkDisk checks one data disk against what both APIs accept; before are the disks ahead of it.
func checkDisk(name string, size int32, mode string, before []mapiv1.VSphereDisk, path *field.Path, r *convert.Report) {
	if name == "" {
		r.Error(field.Required(path.Child("name"), ""))
	}
	for _, b := range before {
		if b.Name == name && name != "" {
			r.Error(field.Duplicate(path.Child("name"), name))
		}
	}
	if size < 1 {
		r.Error(field.Invalid(path.Child("sizeGiB"), size, "must be at least 1"))
	}
	if mode != "" && !slices.Contains(provisioningModes, mode) {
		r.Error(field.NotSupported(path.Child("provisioningMode"), mode, provisioningModes))
	}
}
