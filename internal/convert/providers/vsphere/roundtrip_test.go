package vsphere

import (
	"testing"

	mapiv1 "github.com/openshift/api/machine/v1beta1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
	capvv1 "sigs.k8s.io/cluster-api-provider-vsphere/api/govmomi/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	"github.com/machina-dev/machina/internal/convert"
	ct "github.com/machina-dev/machina/internal/convert/converttest"
)

const (
	cluster = "ci-op-7xq2m-vk4h9"
	vcenter = "vcenter.ci.example.com"
	dc      = "cidatacenter"
)

var testPlatform = Platform{VCenters: []string{vcenter, "vcenter-2.ci.example.com"}, ClusterServer: vcenter, CredentialsSecret: DefaultCredentialsSecret}

var testCtx = convert.Context{ClusterName: cluster, Platform: testPlatform, Namespaces: convert.OpenShiftNamespaces}

var suite = ct.Suite[*mapiv1.VSphereMachineProviderSpec, *capvv1.VSphereMachineSpec]{
	Checker: ct.Checker{Ctx: testCtx, DecodeProviderSpec: ct.DecodeJSON[mapiv1.VSphereMachineProviderSpec],
		Expected: func(w convert.Warning) bool { return w.Detail == StaticAddressWarning }},
	ProviderSpec:       genProviderSpec,
	RandomProviderSpec: randomProviderSpec,
	ProviderID:         genProviderID,
	InfraSpec:          genSpec,
	RandomCAPIMachine:  randomCAPIMachine,
	FailureDomain:      func(*ct.Gen) string { return "" },
	MachineLabels:      genRole,
	MinAcceptedPercent: 5,
	ProviderSpecSeeds: []string{
		`{"apiVersion":"machine.openshift.io/v1beta1","kind":"VSphereMachineProviderSpec","credentialsSecret":{"name":"vsphere-cloud-credentials"},"userDataSecret":{"name":"worker-user-data"},"template":"ci-op-7xq2m-vk4h9-rhcos-generated-region-zone","numCPUs":4,"numCoresPerSocket":4,"memoryMiB":16384,"diskGiB":120,"snapshot":"","network":{"devices":[{"networkName":"ci-vlan-1234"}]},"workspace":{"server":"vcenter.ci.example.com","datacenter":"cidatacenter","folder":"/cidatacenter/vm/ci-op-7xq2m-vk4h9","datastore":"/cidatacenter/datastore/vsanDatastore","resourcePool":"/cidatacenter/host/cicluster//Resources"}}`,
		`{"template":"t","network":{"devices":[{"networkName":"n","ipAddrs":["10.0.0.5"],"gateway":"x","addressesFromPools":[{"resource":"InClusterIPPool","name":""}]}]},"workspace":{"vmGroup":"g"},"cloneMode":"instantClone"}`,
		`{"numCPUs":1,"numCoresPerSocket":-1,"dataDisks":[{"name":"a","sizeGiB":0},{"name":"a","sizeGiB":1,"provisioningMode":"Sparse"}]}`,
		`null`,
	},
}

// TestRoundTrip runs the shared round-trip properties (see converttest.Suite) on vSphere objects.
func TestRoundTrip(t *testing.T) { suite.Run(t) }

func FuzzRoundTrip(f *testing.F) { suite.FuzzRoundTrip(f) }

func FuzzProviderSpecBytes(f *testing.F) { suite.FuzzProviderSpecBytes(f) }

// genRole makes some generated Cluster API Machines control-plane ones (of role master, as
// mirrors of Machine API masters are), which convert.
func genRole(g *ct.Gen) map[string]string {
	if g.Intn(4) > 0 {
		return nil
	}
	return map[string]string{clusterv1.MachineControlPlaneLabel: "", convert.MachineAPIRoleLabel: convert.MachineAPIMasterRole}
}

func genProviderID(g *ct.Gen) string {
	return ct.Pick(g, "", "vsphere://4212"+g.Token()+"-5f3c-7b1e-9d4a-0c6e2f81b3a7")
}

func genTemplate(g *ct.Gen) string {
	return ct.Pick(g, cluster+"-rhcos-generated-region-zone", "/"+dc+"/vm/rhcos-"+g.Token())
}

func genTags(g *ct.Gen) []string {
	return ct.Pick(g, nil, []string{"urn:vmomi:InventoryServiceTag:5736bf56-49f5-4667-b38c-b97e09dc9578:GLOBAL"})
}

// genDevices returns network devices in the form both directions keep: DHCP, static addresses
// or addresses from pools.
func genDevices(g *ct.Gen) []mapiv1.NetworkDeviceSpec {
	out := []mapiv1.NetworkDeviceSpec{{NetworkName: "ci-vlan-" + g.Token()}}
	switch g.Intn(3) {
	case 1:
		out[0].IPAddrs = ct.Pick(g, []string{"192.168.14.20/24"}, []string{"192.168.14.21/24", "fd00:14::21/64"})
		out[0].Gateway = ct.Pick(g, "", "192.168.14.1", "fd00:14::1")
		out[0].Nameservers = ct.Pick(g, nil, []string{"192.168.14.2"})
	case 2:
		out[0].AddressesFromPools = []mapiv1.AddressesFromPool{{Group: ipamGroup, Resource: ct.Pick(g, "inclusterippools", "ippools"), Name: "pool-" + g.Token()}}
		out[0].Nameservers = ct.Pick(g, nil, []string{"192.168.14.2", "192.168.14.3"})
	}
	if g.Intn(4) == 0 {
		out = append(out, mapiv1.NetworkDeviceSpec{NetworkName: "storage-" + g.Token()})
	}
	return out
}

// genProviderSpec returns a VSphereMachineProviderSpec in the form the converter accepts
// without warnings (the installer's, with optional extras) and keeps as it is: the clone mode
// unset or linked, cores per socket unset or other than the CPU count.
func genProviderSpec(g *ct.Gen) *mapiv1.VSphereMachineProviderSpec {
	cpus := ct.Pick[int32](g, 0, 2, 4, 8)
	ps := &mapiv1.VSphereMachineProviderSpec{
		UserDataSecret:    &corev1.LocalObjectReference{Name: ct.Pick(g, "worker-user-data", g.Token())},
		CredentialsSecret: &corev1.LocalObjectReference{Name: DefaultCredentialsSecret},
		Template:          genTemplate(g),
		Workspace: &mapiv1.Workspace{Server: ct.Pick(g, vcenter, "vcenter-2.ci.example.com"), Datacenter: ct.Pick(g, dc, ""),
			Folder: ct.Pick(g, "", "/"+dc+"/vm/"+cluster), Datastore: ct.Pick(g, "", "/"+dc+"/datastore/vsanDatastore"),
			ResourcePool: ct.Pick(g, "", "/"+dc+"/host/cicluster//Resources")},
		Network:   mapiv1.NetworkSpec{Devices: genDevices(g)},
		NumCPUs:   cpus,
		MemoryMiB: ct.Pick[int64](g, 0, 8192, 16384),
		DiskGiB:   ct.Pick[int32](g, 0, 120),
		TagIDs:    genTags(g),
		CloneMode: ct.Pick[mapiv1.CloneMode](g, "", mapiv1.LinkedClone),
		Snapshot:  ct.Pick(g, "", "base"),
	}
	ps.APIVersion, ps.Kind = mapiv1.GroupVersion.String(), ProviderSpecKind
	if g.Maybe() && cpus >= 4 {
		ps.NumCoresPerSocket = cpus / 2
	}
	for i := g.Intn(3); i > 0; i-- {
		ps.DataDisks = append(ps.DataDisks, mapiv1.VSphereDisk{Name: "disk-" + string(rune('a'+i)), SizeGiB: 1 + g.Int31n(500),
			ProvisioningMode: ct.Pick[mapiv1.ProvisioningMode](g, "", mapiv1.ProvisioningModeThin, mapiv1.ProvisioningModeEagerlyZeroed)})
	}
	return ps
}

// randomProviderSpec is an arbitrary providerSpec, nudged half of the time towards values
// the converter accepts so both outcomes are exercised.
func randomProviderSpec(g *ct.Gen) *mapiv1.VSphereMachineProviderSpec {
	var ps mapiv1.VSphereMachineProviderSpec
	g.Fill.Fill(&ps)
	if g.Maybe() {
		return &ps
	}
	ok := genProviderSpec(g)
	for i := g.Intn(2); i >= 0; i-- {
		switch g.Intn(6) {
		case 0:
			ok.Network = ct.Pick(g, ps.Network, mapiv1.NetworkSpec{}, mapiv1.NetworkSpec{Devices: []mapiv1.NetworkDeviceSpec{{}}})
		case 1:
			ok.Workspace = ct.Pick(g, ps.Workspace, nil, &mapiv1.Workspace{Server: "elsewhere", VMGroup: ct.Pick(g, "", "g")})
		case 2:
			ok.NumCPUs, ok.NumCoresPerSocket = ct.Pick(g, ok.NumCPUs, 1, ps.NumCPUs), ct.Pick(g, ok.NumCPUs, ps.NumCoresPerSocket)
		case 3:
			ok.DataDisks = ct.Pick(g, ps.DataDisks, append(ok.DataDisks, ok.DataDisks...))
		case 4:
			ok.CloneMode, ok.Snapshot, ok.Template = ct.Pick(g, mapiv1.FullClone, ps.CloneMode), ps.Snapshot, ct.Pick(g, ok.Template, "")
		case 5:
			ok.TypeMeta, ok.CredentialsSecret, ok.UserDataSecret = ct.Pick(g, ok.TypeMeta, ps.TypeMeta), ps.CredentialsSecret, ct.Pick(g, ok.UserDataSecret, ps.UserDataSecret)
		}
	}
	return ok
}

// genSpec returns a VSphereMachine spec in the form the converter accepts without warnings and
// keeps as it is: the clone mode named, cores per socket named, DHCP said on devices without
// addresses.
func genSpec(g *ct.Gen) *capvv1.VSphereMachineSpec {
	cpus := ct.Pick[int32](g, 0, 2, 4, 16)
	s := &capvv1.VSphereMachineSpec{VirtualMachineCloneSpec: capvv1.VirtualMachineCloneSpec{
		Template:          genTemplate(g),
		CloneMode:         ct.Pick(g, capvv1.FullClone, capvv1.LinkedClone),
		Snapshot:          ct.Pick(g, "", "base"),
		Server:            ct.Pick(g, "", vcenter),
		Datacenter:        ct.Pick(g, anyDatacenter, dc),
		Folder:            ct.Pick(g, "", "/"+dc+"/vm/"+cluster),
		Datastore:         ct.Pick(g, "", "vsanDatastore"),
		ResourcePool:      ct.Pick(g, "", "/"+dc+"/host/cicluster//Resources"),
		NumCPUs:           cpus,
		NumCoresPerSocket: ptr.To(ct.Pick(g, effectiveCPUs(cpus), 1)),
		MemoryMiB:         ct.Pick[int64](g, 0, 8192),
		DiskGiB:           ct.Pick[int32](g, 0, 40, 120),
		TagIDs:            genTags(g),
	}}
	r := &convert.Report{}
	s.Network = networkToCAPV(mapiv1.NetworkSpec{Devices: genDevices(g)}, nil, r)
	for i := g.Intn(3); i > 0; i-- {
		s.DataDisks = append(s.DataDisks, capvv1.VSphereDisk{Name: "data-" + string(rune('a'+i)), SizeGiB: 1 + g.Int31n(100),
			ProvisioningMode: ct.Pick(g, capvv1.ProvisioningMode(""), capvv1.ThickProvisioningMode)})
	}
	return s
}

// randomCAPIMachine is an arbitrary Cluster API Machine and VSphereMachine spec, each nudged
// most of the time towards values the converter accepts.
func randomCAPIMachine(g *ct.Gen) (*clusterv1.Machine, *capvv1.VSphereMachineSpec, string) {
	var m clusterv1.Machine
	var spec capvv1.VSphereMachineSpec
	g.Fill.Fill(&m)
	g.Fill.Fill(&spec)
	pid := genProviderID(g)
	if g.Intn(3) > 0 {
		m = *g.CAPIMachine(testCtx, pid)
		m.Spec.FailureDomain = ct.Pick(g, "", "", "", "zone-a")
	}
	if g.Intn(3) > 0 {
		ok := genSpec(g)
		switch g.Intn(8) {
		case 0:
			ok.Network, ok.Thumbprint = ct.Pick(g, ok.Network, spec.Network), spec.Thumbprint
		case 1:
			ok.CloneMode, ok.NumCoresPerSocket = ct.Pick(g, ok.CloneMode, spec.CloneMode), ct.Pick(g, ok.NumCoresPerSocket, spec.NumCoresPerSocket)
		case 2:
			ok.Resources, ok.StoragePolicyName = ct.Pick(g, ok.Resources, spec.Resources), spec.StoragePolicyName
		case 3:
			ok.PowerOffMode, ok.OS = ct.Pick(g, "", capvv1.VirtualMachinePowerOpModeHard, spec.PowerOffMode), ct.Pick(g, "", capvv1.Linux, spec.OS)
		case 4:
			ok.DataDisks, ok.Server = ct.Pick(g, ok.DataDisks, spec.DataDisks), ct.Pick(g, "", spec.Server)
		}
		spec = *ok
	}
	return &m, &spec, m.Spec.ProviderID
}
