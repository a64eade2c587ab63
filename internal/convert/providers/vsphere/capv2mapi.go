package vsphere

import (
	"reflect"

	mapiv1 "github.com/openshift/api/machine/v1beta1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
	capvv1 "sigs.k8s.io/cluster-api-provider-vsphere/api/govmomi/v1beta2"

	"github.com/machina-dev/machina/internal/convert"
)

// FromInfra converts a VSphereMachine spec and the Machine's values back into a
// VSphereMachineProviderSpec. The credentials secret comes from the cluster.
func (p Platform) FromInfra(spec convert.InfraSpec, mv convert.MachineValues, paths convert.InfraPaths, r *convert.Report) *runtime.RawExtension {
	s, ok := convert.InfraSpecAs[capvv1.VSphereMachineSpec](spec, paths.Infra, r)
	if !ok {
		return nil
	}
	path := paths.Infra
	ps := &mapiv1.VSphereMachineProviderSpec{}
	ps.APIVersion = mapiv1.GroupVersion.String()
	ps.Kind = ProviderSpecKind

	if mv.FailureDomain != "" {
		r.Error(field.Invalid(paths.Machine.Child("failureDomain"), mv.FailureDomain, "CAPV places the VM by the VSphereDeploymentZone of this name, overriding the VSphereMachine's server, datacenter, folder, resource pool, datastore and networks; the Machine API places it only by the providerSpec's workspace: unset it to convert"))
	}
	ps.Template = s.Template
	if s.Template == "" {
		r.Error(field.Required(path.Child("template"), ""))
	}
	ps.CloneMode = cloneModeToMAPI(s.CloneMode, path.Child("cloneMode"), r)
	ps.Snapshot = s.Snapshot
	ps.Workspace = p.workspaceToMAPI(s, path, r)
	sizingToMAPI(s, ps, path, r)
	ps.TagIDs = append([]string(nil), s.TagIDs...)
	ps.DataDisks = dataDisksToMAPI(s.DataDisks, path.Child("dataDisks"), r)
	ps.Network = networkToMAPI(s.Network, path.Child("network"), r)
	onlyCAPV(s, path, r)

	if mv.DataSecretName != nil && *mv.DataSecretName != "" {
		ps.UserDataSecret = &corev1.LocalObjectReference{Name: *mv.DataSecretName}
	} else {
		r.Error(field.Required(paths.Machine.Child("bootstrap", "dataSecretName"), "the Machine API needs the bootstrap data secret's name"))
	}
	ps.CredentialsSecret = &corev1.LocalObjectReference{Name: p.credentialsSecret()}
	return convert.Encode(ps, path, r)
}

// cloneModeToMAPI is the reverse of cloneModeToCAPV: CAPV's default is a linked clone, the
// Machine API's a full one.
func cloneModeToMAPI(m capvv1.CloneMode, path *field.Path, r *convert.Report) mapiv1.CloneMode {
	switch m {
	case capvv1.FullClone:
		return ""
	case "", capvv1.LinkedClone:
		return mapiv1.LinkedClone
	}
	r.Error(field.NotSupported(path, m, []string{string(capvv1.FullClone), string(capvv1.LinkedClone)}))
	return ""
}

// workspaceToMAPI collects the placement; nil when the VSphereMachine names none.
func (p Platform) workspaceToMAPI(s *capvv1.VSphereMachineSpec, path *field.Path, r *convert.Report) *mapiv1.Workspace {
	switch {
	case s.Server == "":
		p.checkClusterServer(path.Child("server"), r)
	case !p.knownServer(s.Server):
		r.Error(field.NotSupported(path.Child("server"), s.Server, p.VCenters))
	}
	ws := &mapiv1.Workspace{Server: s.Server, Folder: s.Folder, Datastore: s.Datastore, ResourcePool: s.ResourcePool}
	if s.Datacenter != anyDatacenter {
		ws.Datacenter = s.Datacenter
	}
	if *ws == (mapiv1.Workspace{}) {
		return nil
	}
	return ws
}

// sizingToMAPI is the reverse of sizingToCAPV.
func sizingToMAPI(s *capvv1.VSphereMachineSpec, ps *mapiv1.VSphereMachineProviderSpec, path *field.Path, r *convert.Report) {
	ps.NumCPUs = s.NumCPUs
	if s.NumCPUs == 1 || s.NumCPUs < 0 {
		r.Error(field.Invalid(path.Child("numCPUs"), s.NumCPUs, "must be 0 or at least 2"))
	}
	switch c := ptr.Deref(s.NumCoresPerSocket, 0); {
	case c <= 0:
		r.Error(field.Required(path.Child("numCoresPerSocket"), "CAPV keeps the template's cores per socket when unset, the Machine API puts every CPU on one socket: name the template's value to convert"))
	case c == effectiveCPUs(s.NumCPUs):
		ps.NumCoresPerSocket = 0
	default:
		ps.NumCoresPerSocket = c
	}
	ps.MemoryMiB, ps.DiskGiB = s.MemoryMiB, s.DiskGiB
	if s.MemoryMiB < 0 {
		r.Error(field.Invalid(path.Child("memoryMiB"), s.MemoryMiB, "must not be negative"))
	}
	if s.DiskGiB < 0 {
		r.Error(field.Invalid(path.Child("diskGiB"), s.DiskGiB, "must not be negative"))
	}
	if len(s.AdditionalDisksGiB) > 0 {
		r.Unsupported(path.Child("additionalDisksGiB"), s.AdditionalDisksGiB, convert.MachineAPI+" (it resizes only the template's first disk; dataDisks adds new ones)")
	}
}

func dataDisksToMAPI(in []capvv1.VSphereDisk, path *field.Path, r *convert.Report) []mapiv1.VSphereDisk {
	var out []mapiv1.VSphereDisk
	for i, d := range in {
		checkDisk(d.Name, d.SizeGiB, string(d.ProvisioningMode), out, path.Index(i), r)
		out = append(out, mapiv1.VSphereDisk{Name: d.Name, SizeGiB: d.SizeGiB, ProvisioningMode: mapiv1.ProvisioningMode(d.ProvisioningMode)})
	}
	return out
}

// onlyCAPV refuses what the Machine API cannot express, and warns about the thumbprint, which
// it takes from its cloud provider configuration.
func onlyCAPV(s *capvv1.VSphereMachineSpec, path *field.Path, r *convert.Report) {
	if s.Thumbprint != "" {
		r.Warn(path.Child("thumbprint"), "dropped: the Machine API trusts vCenter's certificate by the cluster's cloud provider configuration")
	}
	if s.OS != "" && s.OS != capvv1.Linux {
		r.Unsupported(path.Child("os"), s.OS, convert.MachineAPI+" (it names Linux VMs after the Machine)")
	}
	if s.PowerOffMode != "" && s.PowerOffMode != capvv1.VirtualMachinePowerOpModeHard {
		r.Unsupported(path.Child("powerOffMode"), s.PowerOffMode, convert.MachineAPI+" (it powers a VM off hard before deleting it)")
	}
	for _, f := range []struct {
		name string
		set  bool
		v    any
	}{
		{"storagePolicyName", s.StoragePolicyName != "", s.StoragePolicyName},
		{"resources", !reflect.ValueOf(s.Resources).IsZero(), s.Resources},
		{"customVMXKeys", len(s.CustomVMXKeys) > 0, s.CustomVMXKeys},
		{"pciDevices", len(s.PciDevices) > 0, s.PciDevices},
		{"hardwareVersion", s.HardwareVersion != "", s.HardwareVersion},
		{"nestedHV", s.NestedHV != nil, s.NestedHV},
		{"ftEncryptionMode", s.FtEncryptionMode != "", s.FtEncryptionMode},
		{"migrateEncryption", s.MigrateEncryption != "", s.MigrateEncryption},
		{"cryptoKeyID", s.CryptoKeyID != "", s.CryptoKeyID},
		{"cryptoProfile", s.CryptoProfile != "", s.CryptoProfile},
		{"guestSoftPowerOffTimeoutSeconds", s.GuestSoftPowerOffTimeoutSeconds != 0, s.GuestSoftPowerOffTimeoutSeconds},
		{"naming", s.Naming != (capvv1.VSphereVMNamingSpec{}), s.Naming},
	} {
		if f.set {
			r.Unsupported(path.Child(f.name), f.v, convert.MachineAPI)
		}
	}
}
