package vsphere

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	configv1 "github.com/openshift/api/config/v1"
	mapiv1 "github.com/openshift/api/machine/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
	capvv1 "sigs.k8s.io/cluster-api-provider-vsphere/api/govmomi/v1beta2"

	"github.com/machina-dev/machina/internal/convert"
	ct "github.com/machina-dev/machina/internal/convert/converttest"
)

func vsphereInfrastructure() *configv1.Infrastructure {
	infra := &configv1.Infrastructure{ObjectMeta: metav1.ObjectMeta{Name: "cluster"}}
	infra.Status.InfrastructureName = cluster
	infra.Status.PlatformStatus = &configv1.PlatformStatus{Type: configv1.VSpherePlatformType, VSphere: &configv1.VSpherePlatformStatus{}}
	infra.Spec.PlatformSpec.VSphere = &configv1.VSpherePlatformSpec{VCenters: []configv1.VSpherePlatformVCenterSpec{{Server: vcenter, Datacenters: []string{dc}}}}
	return infra
}

func TestNewContext(t *testing.T) {
	if _, err := NewContext(nil); err == nil {
		t.Error("nil Infrastructure accepted")
	}
	infra := vsphereInfrastructure()
	c, err := NewContext(infra)
	if err != nil {
		t.Fatal(err)
	}
	p := c.Platform.(Platform)
	if c.ClusterName != cluster || !slices.Equal(p.VCenters, []string{vcenter}) || p.credentialsSecret() != DefaultCredentialsSecret || c.Namespaces != convert.OpenShiftNamespaces {
		t.Errorf("context %+v, platform %+v", c, p)
	}
	if p := p.WithVSphereCluster(&capvv1.VSphereCluster{Spec: capvv1.VSphereClusterSpec{Server: vcenter}}); p.ClusterServer != vcenter {
		t.Errorf("with the VSphereCluster: %+v", p)
	}
	// An Infrastructure without vCenters (an old one, or a UPI cluster's) leaves them unchecked.
	infra.Spec.PlatformSpec.VSphere = nil
	if c, err := NewContext(infra); err != nil || c.Platform.(Platform).VCenters != nil {
		t.Errorf("without vCenters: %+v, %v", c.Platform, err)
	}
	infra.Status.PlatformStatus.Type = configv1.AWSPlatformType
	if _, err := NewContext(infra); err == nil || !strings.Contains(err.Error(), "not on vSphere") {
		t.Errorf("an AWS Infrastructure: %v", err)
	}
}

// installerSpec is a worker providerSpec as the OpenShift installer writes it.
func installerSpec() *mapiv1.VSphereMachineProviderSpec {
	ps := genProviderSpec(ct.New(5))
	ps.Network.Devices = []mapiv1.NetworkDeviceSpec{{NetworkName: "ci-vlan-1234"}}
	ps.Workspace = &mapiv1.Workspace{Server: vcenter, Datacenter: dc, Folder: "/" + dc + "/vm/" + cluster,
		Datastore: "/" + dc + "/datastore/vsanDatastore", ResourcePool: "/" + dc + "/host/cicluster//Resources"}
	ps.NumCPUs, ps.NumCoresPerSocket, ps.MemoryMiB, ps.DiskGiB, ps.CloneMode = 4, 4, 16384, 120, ""
	return ps
}

func toInfra(t *testing.T, p Platform, ps any) (*capvv1.VSphereMachineSpec, convert.MachineValues, *convert.Report) {
	t.Helper()
	b, err := json.Marshal(ps)
	if err != nil {
		t.Fatal(err)
	}
	r := &convert.Report{}
	spec, mv := p.ToInfra(&runtime.RawExtension{Raw: b}, field.NewPath("v"), r)
	s, _ := spec.(*capvv1.VSphereMachineSpec)
	return s, mv, r
}

// TestInstallerSpec checks what the installer's worker becomes: an explicit full clone, the
// datacenter and cores per socket named, DHCP on the device.
func TestInstallerSpec(t *testing.T) {
	ps := installerSpec()
	s, mv, r := toInfra(t, testPlatform, ps)
	if r.HasErrors() || len(r.Warnings) > 0 {
		t.Fatalf("errors %v, warnings %v", r.Errors, r.Warnings)
	}
	if s.CloneMode != capvv1.FullClone || s.Datacenter != dc || ptr.Deref(s.NumCoresPerSocket, 0) != 4 || s.Server != vcenter || s.DiskGiB != 120 {
		t.Errorf("spec %+v", s)
	}
	if d := s.Network.Devices; len(d) != 1 || !ptr.Deref(d[0].DHCP4, false) || d[0].NetworkName != "ci-vlan-1234" {
		t.Errorf("devices %+v", d)
	}
	if mv.FailureDomain != "" || ptr.Deref(mv.DataSecretName, "") != ps.UserDataSecret.Name {
		t.Errorf("machine values %+v", mv)
	}
}

// TestRefusals checks that every value CAPV cannot carry is an error naming its field, and that
// all of them are reported together.
func TestRefusals(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(*mapiv1.VSphereMachineProviderSpec)
		want   []string
	}{
		{"placement", func(ps *mapiv1.VSphereMachineProviderSpec) {
			ps.Workspace.Server, ps.Workspace.VMGroup, ps.Template = "other-vcenter", "zone-a-vms", ""
		}, []string{"v.template", "v.workspace.server", "v.workspace.vmGroup"}},
		{"clone and sizing", func(ps *mapiv1.VSphereMachineProviderSpec) {
			ps.CloneMode, ps.NumCPUs, ps.NumCoresPerSocket, ps.MemoryMiB, ps.DiskGiB = "instantClone", -1, -2, -3, -4
		}, []string{"v.cloneMode", "v.diskGiB", "v.memoryMiB", "v.numCPUs", "v.numCoresPerSocket"}},
		{"data disks", func(ps *mapiv1.VSphereMachineProviderSpec) {
			ps.DataDisks = []mapiv1.VSphereDisk{{Name: "a", SizeGiB: 0}, {Name: "a", SizeGiB: 1, ProvisioningMode: "Sparse"}, {SizeGiB: 1}}
		}, []string{"v.dataDisks[0].sizeGiB", "v.dataDisks[1].name", "v.dataDisks[1].provisioningMode", "v.dataDisks[2].name"}},
		{"network", func(ps *mapiv1.VSphereMachineProviderSpec) {
			ps.Network.Devices = []mapiv1.NetworkDeviceSpec{{IPAddrs: []string{"10.0.0.5"}, Gateway: "gw", Nameservers: []string{"dns"},
				AddressesFromPools: []mapiv1.AddressesFromPool{{Resource: "InClusterIPPool"}}}}
		}, []string{"v.network.devices[0].addressesFromPools[0].name", "v.network.devices[0].addressesFromPools[0].resource", "v.network.devices[0].gateway",
			"v.network.devices[0].ipAddrs[0]", "v.network.devices[0].nameservers[0]", "v.network.devices[0].networkName"}},
		{"no network device", func(ps *mapiv1.VSphereMachineProviderSpec) { ps.Network.Devices = nil }, []string{"v.network.devices"}},
		{"credentials and bootstrap data", func(ps *mapiv1.VSphereMachineProviderSpec) {
			ps.CredentialsSecret.Name, ps.UserDataSecret = "mine", nil
		}, []string{"v.credentialsSecret.name", "v.userDataSecret.name"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ps := installerSpec()
			tc.change(ps)
			_, _, r := toInfra(t, testPlatform, ps)
			if got := ct.Fields(r.Errors); !slices.Equal(got, tc.want) {
				t.Errorf("errors on %v, want %v:\n%v", got, tc.want, r.Errors)
			}
		})
	}
}

// TestWarnings checks the changes that are only warnings: the legacy apiVersion, no credentials
// secret, one CPU (both actuators give two).
func TestWarnings(t *testing.T) {
	ps := installerSpec()
	ps.APIVersion, ps.CredentialsSecret, ps.NumCPUs, ps.NumCoresPerSocket = legacyAPIVersion, nil, 1, 0
	s, _, r := toInfra(t, testPlatform, ps)
	if r.HasErrors() {
		t.Fatal(r.Errors)
	}
	if s.NumCPUs != 2 || ptr.Deref(s.NumCoresPerSocket, 0) != 2 {
		t.Errorf("CPUs %d, cores per socket %v", s.NumCPUs, s.NumCoresPerSocket)
	}
	if got, want := ct.Fields(r.Warnings), []string{"v.apiVersion", "v.credentialsSecret", "v.numCPUs"}; !slices.Equal(got, want) {
		t.Errorf("warnings on %v, want %v", got, want)
	}
}

// TestStaticAddresses checks how a device with addresses converts: the gateway by its family,
// pools with the in-cluster IPAM group when they name none, a warning on each such device that
// CAPV hands the addresses to a new VM in a form RHCOS does not read, and back (no warning).
func TestStaticAddresses(t *testing.T) {
	ps := installerSpec()
	ps.Network.Devices = []mapiv1.NetworkDeviceSpec{
		{NetworkName: "vlan-1", IPAddrs: []string{"192.168.14.20/24"}, Gateway: "192.168.14.1", Nameservers: []string{"192.168.14.2"}},
		{NetworkName: "vlan-2", IPAddrs: []string{"fd00::20/64"}, Gateway: "fd00::1"},
		{NetworkName: "vlan-3", AddressesFromPools: []mapiv1.AddressesFromPool{{Resource: "inclusterippools", Name: "pool-1"}}},
	}
	s, mv, r := toInfra(t, testPlatform, ps)
	if r.HasErrors() {
		t.Fatal(r.Errors)
	}
	if got, want := ct.Fields(r.Warnings), []string{"v.network.devices[0]", "v.network.devices[1]", "v.network.devices[2]"}; !slices.Equal(got, want) ||
		r.Warnings[0].Detail != StaticAddressWarning {
		t.Errorf("warnings on %v, want %v: %v", got, want, r.Warnings)
	}
	d := s.Network.Devices
	if d[0].Gateway4 != "192.168.14.1" || d[1].Gateway6 != "fd00::1" || d[0].DHCP4 != nil || d[2].DHCP4 != nil {
		t.Errorf("devices %+v", d)
	}
	if p := d[2].AddressesFromPools; len(p) != 1 || p[0] != (capvv1.IPPoolReference{APIGroup: ipamGroup, Kind: "inclusterippools", Name: "pool-1"}) {
		t.Errorf("pools %+v", p)
	}
	back := &convert.Report{}
	raw := testPlatform.FromInfra(s, mv, convert.InfraPaths{Infra: field.NewPath("s"), Machine: field.NewPath("m")}, back)
	if back.HasErrors() || len(back.Warnings) > 0 {
		t.Fatalf("back: errors %v, warnings %v", back.Errors, back.Warnings)
	}
	var got mapiv1.VSphereMachineProviderSpec
	if err := json.Unmarshal(raw.Raw, &got); err != nil {
		t.Fatal(err)
	}
	ps.Network.Devices[2].AddressesFromPools[0].Group = ipamGroup // what the Machine API claims from either way
	if !slices.EqualFunc(got.Network.Devices, ps.Network.Devices, func(a, b mapiv1.NetworkDeviceSpec) bool { return mustJSON(a) == mustJSON(b) }) {
		t.Errorf("devices back %s, want %s", mustJSON(got.Network.Devices), mustJSON(ps.Network.Devices))
	}
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// TestClusterAPIRefusals checks the VSphereMachine values the Machine API cannot carry.
func TestClusterAPIRefusals(t *testing.T) {
	s := genSpec(ct.New(3))
	s.NumCoresPerSocket, s.CloneMode, s.Server, s.AdditionalDisksGiB = nil, "instantClone", "elsewhere", []int32{20}
	s.StoragePolicyName, s.OS, s.PowerOffMode, s.NestedHV = "gold", capvv1.Windows, capvv1.VirtualMachinePowerOpModeSoft, ptr.To(true)
	s.PciDevices = []capvv1.PCIDeviceSpec{{VGPUProfile: "grid_t4-4q"}}
	s.Naming = capvv1.VSphereVMNamingSpec{Template: "{{ .machine.name }}-vm"}
	s.Thumbprint = "AA:BB"
	s.Network = capvv1.NetworkSpec{Routes: []capvv1.NetworkRouteSpec{{To: "0.0.0.0/0", Via: "10.0.0.1"}}, Devices: []capvv1.NetworkDeviceSpec{
		{NetworkName: "n", DHCP4: ptr.To(true), DHCP6: ptr.To(true), MTU: ptr.To[int64](9000), IPAddrs: []string{"10.0.0.5/24"}, Gateway4: "10.0.0.1", Gateway6: "fd00::1",
			AddressesFromPools: []capvv1.IPPoolReference{{APIGroup: ipamGroup, Kind: "InClusterIPPool", Name: "p"}}},
		{},
	}}
	r := &convert.Report{}
	paths := convert.InfraPaths{Infra: field.NewPath("s"), Machine: field.NewPath("m")}
	testPlatform.FromInfra(s, convert.MachineValues{FailureDomain: "zone-a"}, paths, r)
	want := []string{"m.bootstrap.dataSecretName", "m.failureDomain", "s.additionalDisksGiB", "s.cloneMode", "s.naming", "s.nestedHV",
		"s.network.devices[0].addressesFromPools[0].kind", "s.network.devices[0].dhcp4", "s.network.devices[0].dhcp6", "s.network.devices[0].gateway6", "s.network.devices[0].mtu",
		"s.network.devices[1].dhcp4", "s.network.devices[1].networkName", "s.network.routes",
		"s.numCoresPerSocket", "s.os", "s.pciDevices", "s.powerOffMode", "s.server", "s.storagePolicyName"}
	if got := ct.Fields(r.Errors); !slices.Equal(got, want) {
		t.Errorf("errors on %v, want %v:\n%v", got, want, r.Errors)
	}
	if got := ct.Fields(r.Warnings); !slices.Equal(got, []string{"s.thumbprint"}) {
		t.Errorf("warnings on %v", got)
	}
}

// TestClusterServer: a spec naming no server is refused both ways when the VSphereCluster's
// server, which CAPV then uses, is not one of the cluster's vCenters.
func TestClusterServer(t *testing.T) {
	p := testPlatform
	p.ClusterServer = "vcenter-old.ci.example.com"
	ps := installerSpec()
	ps.Workspace.Server = ""
	s, mv, r := toInfra(t, p, ps)
	if got := ct.Fields(r.Errors); !slices.Equal(got, []string{"v.workspace.server"}) {
		t.Errorf("errors on %v: %v", got, r.Errors)
	}
	back := &convert.Report{}
	p.FromInfra(s, mv, convert.InfraPaths{Infra: field.NewPath("s"), Machine: field.NewPath("m")}, back)
	if got := ct.Fields(back.Errors); !slices.Equal(got, []string{"s.server"}) {
		t.Errorf("back: errors on %v: %v", got, back.Errors)
	}
	if _, _, r := toInfra(t, testPlatform, ps); r.HasErrors() {
		t.Errorf("the VSphereCluster's server is a vCenter of the cluster: %v", r.Errors)
	}
}

// TestCloneModes: the Machine API's default is a full clone, CAPV's a linked one; each side's
// default converts to the other's explicit value.
func TestCloneModes(t *testing.T) {
	r := &convert.Report{}
	for in, want := range map[mapiv1.CloneMode]capvv1.CloneMode{"": capvv1.FullClone, mapiv1.FullClone: capvv1.FullClone, mapiv1.LinkedClone: capvv1.LinkedClone} {
		if got := cloneModeToCAPV(in, nil, r); got != want {
			t.Errorf("%q became %q, want %q", in, got, want)
		}
	}
	for in, want := range map[capvv1.CloneMode]mapiv1.CloneMode{"": mapiv1.LinkedClone, capvv1.FullClone: "", capvv1.LinkedClone: mapiv1.LinkedClone} {
		if got := cloneModeToMAPI(in, nil, r); got != want {
			t.Errorf("CAPV %q became %q, want %q", in, got, want)
		}
	}
	if r.HasErrors() {
		t.Error(r.Errors)
	}
}
