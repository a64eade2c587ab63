package powervs

import (
	"testing"

	mapiv1 "github.com/openshift/api/machine/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	capibmv1 "sigs.k8s.io/cluster-api-provider-ibmcloud/api/powervs/v1beta3"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	"github.com/machina-dev/machina/internal/convert"
	ct "github.com/machina-dev/machina/internal/convert/converttest"
)

const (
	cluster = "ci-op-p9w2t-b7c4d"
	// workspace is the cluster's PowerVS workspace, as the installer names it.
	workspace   = cluster + "-power-iaas"
	workspaceID = "e449d86e-c3a0-4c07-959e-8557fdf55482"
)

var testPlatform = Platform{ServiceInstanceName: workspace, CredentialsSecret: DefaultCredentialsSecret}

var testCtx = convert.Context{ClusterName: cluster, Platform: testPlatform, Namespaces: convert.OpenShiftNamespaces}

var suite = ct.Suite[*mapiv1.PowerVSMachineProviderConfig, *capibmv1.IBMPowerVSMachineSpec]{
	Checker:            ct.Checker{Ctx: testCtx, DecodeProviderSpec: ct.DecodeJSON[mapiv1.PowerVSMachineProviderConfig]},
	ProviderSpec:       genProviderSpec,
	RandomProviderSpec: randomProviderSpec,
	ProviderID:         genProviderID,
	InfraSpec:          genSpec,
	RandomCAPIMachine:  randomCAPIMachine,
	FailureDomain:      func(*ct.Gen) string { return "" }, // PowerVS Machines have none
	MinAcceptedPercent: 5,
	ProviderSpecSeeds: []string{
		`{"apiVersion":"machine.openshift.io/v1","kind":"PowerVSMachineProviderConfig","credentialsSecret":{"name":"powervs-credentials"},"image":{"name":"rhcos-ci-op-p9w2t-b7c4d","type":"Name"},"keyPairName":"ci-op-p9w2t-b7c4d-key","memoryGiB":32,"network":{"regex":"^DHCPSERVER.*ci-op-p9w2t-b7c4d.*_Private$","type":"RegEx"},"processorType":"Shared","processors":"0.5","serviceInstance":{"name":"ci-op-p9w2t-b7c4d-power-iaas","type":"Name"},"systemType":"s922","userDataSecret":{"name":"worker-user-data"}}`,
		`{"serviceInstance":{"type":"RegEx","regex":"x"},"image":{"type":"ID","name":"n"},"network":{},"processors":"0.1","memoryGiB":1,"systemType":"E880"}`,
		`{"loadBalancers":[{"name":"lb","type":"Application"}],"processors":"x","processorType":"dedicated"}`,
		`null`,
	},
}

// TestRoundTrip runs the shared round-trip properties (see converttest.Suite) on PowerVS objects.
func TestRoundTrip(t *testing.T) { suite.Run(t) }

// TestRoundTripWithoutCluster runs them again as offline conversion without the
// IBMPowerVSCluster does: the workspace is given by ID.
func TestRoundTripWithoutCluster(t *testing.T) {
	s := suite
	p := testPlatform
	p.ServiceInstanceName = ""
	s.Ctx.Platform = p
	byID := func(ps *mapiv1.PowerVSMachineProviderConfig) *mapiv1.PowerVSMachineProviderConfig {
		if ps.ServiceInstance.Type == mapiv1.PowerVSResourceTypeName {
			ps.ServiceInstance = mapiv1.PowerVSResource{Type: mapiv1.PowerVSResourceTypeID, ID: ptr.To(workspaceID)}
		}
		return ps
	}
	s.ProviderSpec = func(g *ct.Gen) *mapiv1.PowerVSMachineProviderConfig { return byID(genProviderSpec(g)) }
	s.RandomProviderSpec = func(g *ct.Gen) *mapiv1.PowerVSMachineProviderConfig { return byID(randomProviderSpec(g)) }
	s.InfraSpec = func(g *ct.Gen) *capibmv1.IBMPowerVSMachineSpec {
		spec := genSpec(g)
		spec.ServiceInstance = &capibmv1.IBMPowerVSResourceReference{ID: ptr.To(workspaceID)}
		return spec
	}
	s.Run(t)
}

func FuzzRoundTrip(f *testing.F) { suite.FuzzRoundTrip(f) }

func FuzzProviderSpecBytes(f *testing.F) { suite.FuzzProviderSpecBytes(f) }

func genProviderID(g *ct.Gen) string {
	return ct.Pick(g, "", "ibmpowervs://dal/dal10/"+workspaceID+"/"+g.Token()+"-5b3e-4f21-9c0d-"+g.Token())
}

// genProcessors returns a number of processors both APIs admit, in either form.
func genProcessors(g *ct.Gen, dedicated bool) intstr.IntOrString {
	if dedicated || g.Maybe() {
		return intstr.FromInt32(int32(1 + g.Intn(4)))
	}
	return intstr.FromString(ct.Pick(g, "0.25", "0.5", "1.75", "2"))
}

// genRef returns a resource reference of one of the given types.
func genRef(g *ct.Gen, id, name, regex string, types ...mapiv1.PowerVSResourceType) mapiv1.PowerVSResource {
	switch t := ct.Pick(g, types...); t {
	case mapiv1.PowerVSResourceTypeID:
		return mapiv1.PowerVSResource{Type: t, ID: ptr.To(id)}
	case mapiv1.PowerVSResourceTypeName:
		return mapiv1.PowerVSResource{Type: t, Name: ptr.To(name)}
	default:
		return mapiv1.PowerVSResource{Type: t, RegEx: ptr.To(regex)}
	}
}

const (
	typeID    = mapiv1.PowerVSResourceTypeID
	typeName  = mapiv1.PowerVSResourceTypeName
	typeRegEx = mapiv1.PowerVSResourceTypeRegEx
)

// genProviderSpec returns a PowerVSMachineProviderConfig in the form the converter accepts
// without warnings: the installer's, sized explicitly as the Machine API's webhook leaves it.
func genProviderSpec(g *ct.Gen) *mapiv1.PowerVSMachineProviderConfig {
	pt := ct.Pick(g, mapiv1.PowerVSProcessorTypeShared, mapiv1.PowerVSProcessorTypeCapped, mapiv1.PowerVSProcessorTypeDedicated)
	ps := &mapiv1.PowerVSMachineProviderConfig{
		UserDataSecret:    &mapiv1.PowerVSSecretReference{Name: ct.Pick(g, "worker-user-data", g.Token())},
		CredentialsSecret: &mapiv1.PowerVSSecretReference{Name: DefaultCredentialsSecret},
		ServiceInstance:   genRef(g, workspaceID, workspace, "", typeID, typeName),
		Image:             genRef(g, "b8a3c1f2-"+g.Token(), "rhcos-"+cluster, "", typeID, typeName),
		Network:           genRef(g, "7f0e2d4c-"+g.Token(), cluster+"-network", "^DHCPSERVER.*"+cluster+".*_Private$", typeID, typeName, typeRegEx),
		KeyPairName:       cluster + "-key",
		SystemType:        ct.Pick(g, capibmSystemTypes...),
		ProcessorType:     pt,
		Processors:        genProcessors(g, pt == mapiv1.PowerVSProcessorTypeDedicated),
		MemoryGiB:         ct.Pick[int32](g, 2, 32, 64, 256),
	}
	ps.APIVersion, ps.Kind = mapiv1.GroupVersion.String(), ProviderSpecKind
	return ps
}

// randomProviderSpec is an arbitrary providerSpec, nudged half of the time towards values
// the converter accepts so both outcomes are exercised.
func randomProviderSpec(g *ct.Gen) *mapiv1.PowerVSMachineProviderConfig {
	var ps mapiv1.PowerVSMachineProviderConfig
	g.Fill.Fill(&ps)
	if g.Maybe() {
		return &ps
	}
	ok := genProviderSpec(g)
	for i := g.Intn(2); i >= 0; i-- {
		switch g.Intn(6) {
		case 0:
			ok.ServiceInstance = ct.Pick(g, ps.ServiceInstance, mapiv1.PowerVSResource{Type: typeName, Name: ptr.To("other")}, mapiv1.PowerVSResource{Type: typeRegEx, RegEx: ptr.To(".*")})
		case 1:
			ok.Image, ok.Network = ct.Pick(g, ok.Image, ps.Image), ct.Pick(g, ok.Network, ps.Network)
			ok.Network.Name = ct.Pick(g, ok.Network.Name, ptr.To("also"))
		case 2:
			ok.SystemType, ok.ProcessorType = ct.Pick(g, "", "S922", "e880", ps.SystemType), ct.Pick(g, "", "shared", ps.ProcessorType)
		case 3:
			ok.Processors, ok.MemoryGiB = ct.Pick(g, intstr.IntOrString{}, intstr.FromString("0.1"), ps.Processors), ct.Pick(g, 0, 1, ps.MemoryGiB)
		case 4:
			ok.LoadBalancers, ok.KeyPairName = ps.LoadBalancers, ct.Pick(g, ok.KeyPairName, "", ps.KeyPairName)
		case 5:
			ok.TypeMeta, ok.CredentialsSecret, ok.UserDataSecret = ct.Pick(g, ok.TypeMeta, ps.TypeMeta), ps.CredentialsSecret, ct.Pick(g, ok.UserDataSecret, ps.UserDataSecret)
		}
	}
	return ok
}

// genCAPIBMRef is genRef in CAPIBM's form.
func genCAPIBMRef(g *ct.Gen, id, name, regex string, types ...mapiv1.PowerVSResourceType) capibmv1.IBMPowerVSResourceReference {
	r := genRef(g, id, name, regex, types...)
	return capibmv1.IBMPowerVSResourceReference{ID: r.ID, Name: r.Name, RegEx: r.RegEx}
}

// genSpec returns an IBMPowerVSMachine spec in the form the converter accepts without
// warnings: sized explicitly, as CAPIBM's webhook leaves it.
func genSpec(g *ct.Gen) *capibmv1.IBMPowerVSMachineSpec {
	pt := ct.Pick(g, capibmv1.PowerVSProcessorTypeShared, capibmv1.PowerVSProcessorTypeCapped, capibmv1.PowerVSProcessorTypeDedicated)
	si := genCAPIBMRef(g, workspaceID, workspace, "", typeID, typeName)
	image := genCAPIBMRef(g, "b8a3c1f2-"+g.Token(), "rhcos-"+g.Token(), "", typeID, typeName)
	return &capibmv1.IBMPowerVSMachineSpec{
		ServiceInstance: &si,
		SSHKey:          cluster + "-key",
		Image:           &image,
		Network:         genCAPIBMRef(g, "7f0e2d4c-"+g.Token(), cluster+"-network", "^DHCPSERVER.*_Private$", typeID, typeName, typeRegEx),
		SystemType:      ct.Pick(g, capibmSystemTypes...),
		ProcessorType:   pt,
		Processors:      genProcessors(g, pt == capibmv1.PowerVSProcessorTypeDedicated),
		MemoryGiB:       ct.Pick[int32](g, 2, 8, 32, 128),
	}
}

// randomCAPIMachine is an arbitrary Cluster API Machine and IBMPowerVSMachine spec, each
// nudged most of the time towards values the converter accepts.
func randomCAPIMachine(g *ct.Gen) (*clusterv1.Machine, *capibmv1.IBMPowerVSMachineSpec, string) {
	var m clusterv1.Machine
	var spec capibmv1.IBMPowerVSMachineSpec
	g.Fill.Fill(&m)
	g.Fill.Fill(&spec)
	pid := genProviderID(g)
	if g.Intn(3) > 0 {
		m = *g.CAPIMachine(testCtx, pid)
		m.Spec.FailureDomain = ct.Pick(g, "", "", "", "dal10")
	}
	if g.Intn(3) > 0 {
		ok := genSpec(g)
		switch g.Intn(5) {
		case 0:
			ok.ServiceInstance = ct.Pick(g, spec.ServiceInstance, nil, &capibmv1.IBMPowerVSResourceReference{Name: ptr.To("other")})
		case 1:
			ok.Image, ok.ImageRef = ct.Pick(g, ok.Image, spec.Image, nil), spec.ImageRef
		case 2:
			ok.Network = ct.Pick(g, spec.Network, capibmv1.IBMPowerVSResourceReference{})
		case 3:
			ok.SystemType, ok.ProcessorType, ok.Processors, ok.MemoryGiB = spec.SystemType, spec.ProcessorType, spec.Processors, spec.MemoryGiB
		case 4:
			ok.SSHKey = ct.Pick(g, "", spec.SSHKey)
		}
		spec = *ok
	}
	return &m, &spec, m.Spec.ProviderID
}
