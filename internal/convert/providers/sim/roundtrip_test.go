package sim

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	simv1 "github.com/machina-dev/machina/api/infrastructure/v1alpha1"
	"github.com/machina-dev/machina/internal/convert"
	ct "github.com/machina-dev/machina/internal/convert/converttest"
)

const (
	region  = "sim-east-1"
	cluster = "lab-7x2kq"
)

var testCtx = convert.Context{ClusterName: cluster, Platform: Platform{Region: region}, Namespaces: convert.OpenShiftNamespaces}

var suite = ct.Suite[*simv1.SimMachineProviderSpec, *simv1.SimMachineSpec]{
	Checker:            ct.Checker{Ctx: testCtx, DecodeProviderSpec: ct.DecodeJSON[simv1.SimMachineProviderSpec]},
	ProviderSpec:       genProviderSpec,
	RandomProviderSpec: randomProviderSpec,
	ProviderID:         genProviderID,
	InfraSpec:          genSpec,
	RandomCAPIMachine:  randomCAPIMachine,
	MinAcceptedPercent: 10,
	ProviderSpecSeeds: []string{
		`{"apiVersion":"infrastructure.machina.dev/v1alpha1","kind":"SimMachineProviderSpec","region":"sim-east-1","zone":"sim-east-1a","instanceType":"s1.large","image":"sim-rhcos-9","userDataSecret":{"name":"worker-user-data"}}`,
		`{"region":"sim-west-2","tags":{"a":"b"},"unknown":1}`,
		`null`,
		`{"zone":`,
		`[]`,
	},
}

// TestRoundTrip runs the shared round-trip properties (see converttest.Suite) on simulated
// cloud objects.
func TestRoundTrip(t *testing.T) { suite.Run(t) }

func FuzzRoundTrip(f *testing.F) { suite.FuzzRoundTrip(f) }

func FuzzProviderSpecBytes(f *testing.F) { suite.FuzzProviderSpecBytes(f) }

func BenchmarkConvert(b *testing.B) { suite.Benchmark(b) }

func genProviderID(g *ct.Gen) string {
	return ct.Pick(g, "", "sim://sim-east-1/sim-east-1a/"+g.Token())
}

func genProviderSpec(g *ct.Gen) *simv1.SimMachineProviderSpec {
	ps := &simv1.SimMachineProviderSpec{
		Region:         region,
		Zone:           ct.Pick(g, "", "sim-east-1a", "sim-east-1b", g.Token()),
		InstanceType:   ct.Pick(g, "s1.small", "s1.large", "g1.xlarge"),
		Image:          ct.Pick(g, "sim-rhcos-9", g.Token()),
		UserDataSecret: &corev1.LocalObjectReference{Name: ct.Pick(g, "worker-user-data", g.Token())},
		Tags:           g.Map(),
	}
	ps.APIVersion, ps.Kind = simv1.GroupVersion.String(), ProviderSpecKind
	return ps
}

func genSpec(g *ct.Gen) *simv1.SimMachineSpec {
	return &simv1.SimMachineSpec{InstanceSpec: simv1.InstanceSpec{
		InstanceType: ct.Pick(g, "s1.small", "s1.large"),
		Image:        ct.Pick(g, "sim-rhcos-9", g.Token()),
		Tags:         g.Map(),
	}}
}

// randomProviderSpec is an arbitrary providerSpec, nudged half of the time towards the
// values the converter accepts so both outcomes are exercised.
func randomProviderSpec(g *ct.Gen) *simv1.SimMachineProviderSpec {
	var ps simv1.SimMachineProviderSpec
	g.Fill.Fill(&ps)
	if g.Maybe() {
		ps.APIVersion, ps.Kind = simv1.GroupVersion.String(), ProviderSpecKind
		ps.Region = ct.Pick(g, "", region)
		if ps.UserDataSecret == nil {
			ps.UserDataSecret = &corev1.LocalObjectReference{Name: "u"}
		}
	}
	return &ps
}

// randomCAPIMachine is an arbitrary Cluster API Machine and SimMachine spec, nudged some of
// the time towards values the converter accepts.
func randomCAPIMachine(g *ct.Gen) (*clusterv1.Machine, *simv1.SimMachineSpec, string) {
	var m clusterv1.Machine
	var spec simv1.SimMachineSpec
	g.Fill.Fill(&m)
	g.Fill.Fill(&spec)
	if g.Intn(3) > 0 {
		m = *g.CAPIMachine(testCtx, genProviderID(g))
	}
	if g.Maybe() {
		ok := genSpec(g)
		ok.Zone = ct.Pick(g, "", spec.Zone, m.Spec.FailureDomain)
		spec = *ok
	}
	return &m, &spec, ct.Pick(g, m.Spec.ProviderID, spec.ProviderID)
}
