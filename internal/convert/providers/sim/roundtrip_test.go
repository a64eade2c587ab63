package sim

import (
	"encoding/json"
	"testing"

	mapiv1 "github.com/openshift/api/machine/v1beta1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	simv1 "github.com/machina-dev/machina/api/infrastructure/v1alpha1"
	"github.com/machina-dev/machina/internal/convert"
	ct "github.com/machina-dev/machina/internal/convert/converttest"
)

const (
	region  = "sim-east-1"
	cluster = "lab-7x2kq"
)

// cases per object type and direction in the normal test run.
var cases = ct.Cases(2000)

var (
	testCtx = convert.Context{ClusterName: cluster, Platform: Platform{Region: region}, Namespaces: convert.OpenShiftNamespaces}
	checker = ct.Checker{Ctx: testCtx, DecodeProviderSpec: func(v *runtime.RawExtension) (any, error) {
		var ps simv1.SimMachineProviderSpec
		err := json.Unmarshal(v.Raw, &ps)
		return &ps, err
	}}
)

func raw(v any) *runtime.RawExtension {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return &runtime.RawExtension{Raw: b}
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

func TestRoundTripMachineAPIMachine(t *testing.T) {
	for seed := int64(0); seed < cases && !t.Failed(); seed++ {
		g := ct.New(seed)
		checker.MAPIMachine(t, g.MAPIMachine(testCtx, raw(genProviderSpec(g))))
	}
}

func TestRoundTripMachineAPIMachineSet(t *testing.T) {
	for seed := int64(0); seed < cases && !t.Failed(); seed++ {
		g := ct.New(seed)
		checker.MAPIMachineSet(t, g.MAPIMachineSet(testCtx, raw(genProviderSpec(g))))
	}
}

func TestRoundTripClusterAPIMachine(t *testing.T) {
	p := testCtx.Platform
	for seed := int64(0); seed < cases && !t.Failed(); seed++ {
		g := ct.New(seed)
		pid := ct.Pick(g, "", "sim://sim-east-1/sim-east-1a/"+g.Token())
		m := g.CAPIMachine(testCtx, pid)
		infra := p.NewInfraMachine(genSpec(g), pid)
		infra.SetName(m.Name)
		infra.SetNamespace(m.Namespace)
		infra.SetLabels(map[string]string{convert.ClusterAPIClusterLabel: cluster})
		checker.CAPIMachine(t, m, infra)
	}
}

func TestRoundTripClusterAPIMachineSet(t *testing.T) {
	p := testCtx.Platform
	for seed := int64(0); seed < cases && !t.Failed(); seed++ {
		g := ct.New(seed)
		ms := g.CAPIMachineSet(testCtx, "")
		spec := genSpec(g)
		name, err := convert.TemplateName(ms.Name, spec)
		if err != nil {
			t.Fatal(err)
		}
		ms.Spec.Template.Spec.InfrastructureRef.Name = name
		tmpl := p.NewInfraMachineTemplate(spec)
		tmpl.SetName(name)
		tmpl.SetNamespace(ms.Namespace)
		tmpl.SetLabels(map[string]string{convert.ClusterAPIClusterLabel: cluster})
		checker.CAPIMachineSet(t, ms, tmpl)
	}
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

// TestStableArbitraryInputs feeds arbitrary objects: nothing may panic, and whatever is
// accepted must convert back and reach a fixed point.
func TestStableArbitraryInputs(t *testing.T) {
	accepted := int64(0)
	for seed := int64(0); seed < cases && !t.Failed(); seed++ {
		g := ct.New(seed)
		var m mapiv1.Machine
		g.Fill.Fill(&m)
		if g.Intn(3) > 0 {
			m = *g.MAPIMachine(testCtx, nil)
		}
		m.Spec.ProviderSpec.Value = raw(randomProviderSpec(g))
		if checker.StableMAPIMachine(t, &m) {
			accepted++
		}
		var ms mapiv1.MachineSet
		g.Fill.Fill(&ms)
		if g.Intn(3) > 0 {
			ms = *g.MAPIMachineSet(testCtx, nil)
		}
		ms.Spec.Template.Spec.ProviderSpec.Value = raw(randomProviderSpec(g))
		if checker.StableMAPIMachineSet(t, &ms) {
			accepted++
		}
	}
	t.Logf("%d of %d arbitrary objects accepted", accepted, 2*cases)
	if accepted < cases/10 {
		t.Errorf("only %d arbitrary objects accepted; the generator no longer exercises conversion", accepted)
	}
}

func FuzzRoundTripMachine(f *testing.F) {
	for seed := int64(0); seed < 20; seed++ {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, seed int64) {
		g := ct.New(seed)
		checker.MAPIMachine(t, g.MAPIMachine(testCtx, raw(genProviderSpec(g))))
		checker.MAPIMachineSet(t, g.MAPIMachineSet(testCtx, raw(genProviderSpec(g))))
	})
}

// FuzzProviderSpecBytes feeds arbitrary bytes as the providerSpec value.
func FuzzProviderSpecBytes(f *testing.F) {
	f.Add([]byte(`{"apiVersion":"infrastructure.machina.dev/v1alpha1","kind":"SimMachineProviderSpec","region":"sim-east-1","zone":"sim-east-1a","instanceType":"s1.large","image":"sim-rhcos-9","userDataSecret":{"name":"worker-user-data"}}`))
	f.Add([]byte(`{"region":"sim-west-2","tags":{"a":"b"},"unknown":1}`))
	f.Add([]byte(`null`))
	f.Add([]byte(`{"zone":`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, b []byte) {
		g := ct.New(int64(len(b)))
		m := g.MAPIMachine(testCtx, &runtime.RawExtension{Raw: b})
		checker.StableMAPIMachine(t, m)
	})
}

// TestStableArbitraryClusterAPIInputs is TestStableArbitraryInputs for Cluster API input.
func TestStableArbitraryClusterAPIInputs(t *testing.T) {
	p := testCtx.Platform
	accepted := int64(0)
	for seed := int64(0); seed < cases && !t.Failed(); seed++ {
		g := ct.New(seed)
		var m clusterv1.Machine
		var spec simv1.SimMachineSpec
		g.Fill.Fill(&m)
		g.Fill.Fill(&spec)
		if g.Intn(3) > 0 {
			m = *g.CAPIMachine(testCtx, ct.Pick(g, "", "sim://sim-east-1/sim-east-1a/"+g.Token()))
		}
		if g.Maybe() {
			ok := genSpec(g)
			ok.Zone = ct.Pick(g, "", spec.Zone, m.Spec.FailureDomain)
			spec = *ok
		}
		infra := p.NewInfraMachine(&spec, ct.Pick(g, m.Spec.ProviderID, spec.ProviderID))
		infra.SetName(m.Spec.InfrastructureRef.Name)
		if checker.StableCAPIMachine(t, &m, infra) {
			accepted++
		}
	}
	t.Logf("%d of %d arbitrary objects accepted", accepted, cases)
	if accepted < cases/10 {
		t.Errorf("only %d arbitrary objects accepted; the generator no longer exercises conversion", accepted)
	}
}
