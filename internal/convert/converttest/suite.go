package converttest

import (
	"encoding/json"
	"testing"

	mapiv1 "github.com/openshift/api/machine/v1beta1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	"github.com/machina-dev/machina/internal/convert"
)

// Suite drives the round-trip properties for one platform. The platform's tests supply the
// generators for its own parts: the providerSpec type P and the InfraMachine spec type S.
type Suite[P, S any] struct {
	Checker
	// ProviderSpec returns a providerSpec the converter accepts without warnings.
	ProviderSpec func(*Gen) P
	// RandomProviderSpec returns an arbitrary providerSpec, often one the converter rejects.
	RandomProviderSpec func(*Gen) P
	// ProviderID returns a provider ID (or "") for a Cluster API Machine.
	ProviderID func(*Gen) string
	// InfraSpec returns an InfraMachine spec the converter accepts without warnings.
	InfraSpec func(*Gen) S
	// RandomCAPIMachine returns an arbitrary Cluster API Machine and the spec and provider ID
	// of its InfraMachine.
	RandomCAPIMachine func(*Gen) (m *clusterv1.Machine, spec S, providerID string)
	// MachineLabels, when set, returns further labels for a generated Cluster API Machine
	// (for example the control-plane label on a platform that converts it).
	MachineLabels func(*Gen) map[string]string
	// FailureDomain, when set, returns the failure domain of generated Cluster API Machines
	// and MachineSets, for platforms whose Machines need a zone (the default is none or an
	// arbitrary token).
	FailureDomain func(*Gen) string
	// MinAcceptedPercent is the share of arbitrary inputs, in percent of the cases, that must
	// be accepted; fewer means the generators no longer exercise conversion.
	MinAcceptedPercent int64
	// ProviderSpecSeeds are the first inputs of FuzzProviderSpecBytes.
	ProviderSpecSeeds []string
}

// cases is the number of random objects per kind and direction in the normal test run.
var cases = Cases(2000)

// DecodeJSON decodes a providerSpec value into a new T; it suits Checker.DecodeProviderSpec.
func DecodeJSON[T any](v *runtime.RawExtension) (any, error) {
	var out T
	err := json.Unmarshal(v.Raw, &out)
	return &out, err
}

func raw(v any) *runtime.RawExtension {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return &runtime.RawExtension{Raw: b}
}

// Run runs every round-trip property as a subtest, each on cases random objects (2,000
// unless $CONVERT_CASES says otherwise).
func (s Suite[P, S]) Run(t *testing.T) {
	t.Run("MachineAPIMachine", s.each(func(t *testing.T, g *Gen) {
		s.MAPIMachine(t, g.MAPIMachine(s.Ctx, raw(s.ProviderSpec(g))))
	}))
	t.Run("MachineAPIMachineSet", s.each(func(t *testing.T, g *Gen) {
		s.MAPIMachineSet(t, g.MAPIMachineSet(s.Ctx, raw(s.ProviderSpec(g))))
	}))
	t.Run("ClusterAPIMachine", s.each(s.capiMachine))
	t.Run("ClusterAPIMachineSet", s.each(s.capiMachineSet))
	t.Run("StableArbitraryInputs", s.stableMAPI)
	t.Run("StableArbitraryClusterAPIInputs", s.stableCAPI)
}

// each returns a test that runs f on the generator of each seed until the test fails.
func (s Suite[P, S]) each(f func(*testing.T, *Gen)) func(*testing.T) {
	return func(t *testing.T) {
		for seed := int64(0); seed < cases && !t.Failed(); seed++ {
			f(t, New(seed))
		}
	}
}

func (s Suite[P, S]) capiLabels() map[string]string {
	return map[string]string{convert.ClusterAPIClusterLabel: s.Ctx.ClusterName}
}

func (s Suite[P, S]) capiMachine(t *testing.T, g *Gen) {
	pid := s.ProviderID(g)
	m := g.CAPIMachine(s.Ctx, pid)
	if s.MachineLabels != nil {
		for k, v := range s.MachineLabels(g) {
			m.Labels[k] = v
		}
	}
	if s.FailureDomain != nil {
		m.Spec.FailureDomain = s.FailureDomain(g)
	}
	infra := s.Ctx.Platform.NewInfraMachine(s.InfraSpec(g), pid)
	infra.SetName(m.Name)
	infra.SetNamespace(m.Namespace)
	infra.SetLabels(s.capiLabels())
	s.CAPIMachine(t, m, infra)
}

func (s Suite[P, S]) capiMachineSet(t *testing.T, g *Gen) {
	ms := g.CAPIMachineSet(s.Ctx, "")
	if s.FailureDomain != nil {
		ms.Spec.Template.Spec.FailureDomain = s.FailureDomain(g)
	}
	spec := s.InfraSpec(g)
	name, err := convert.TemplateName(ms.Name, spec)
	if err != nil {
		t.Fatal(err)
	}
	ms.Spec.Template.Spec.InfrastructureRef.Name = name
	tmpl := s.Ctx.Platform.NewInfraMachineTemplate(spec)
	tmpl.SetName(name)
	tmpl.SetNamespace(ms.Namespace)
	tmpl.SetLabels(s.capiLabels())
	s.CAPIMachineSet(t, ms, tmpl)
}

// checkAccepted fails t when fewer than MinAcceptedPercent of cases of the total arbitrary
// inputs were accepted.
func (s Suite[P, S]) checkAccepted(t *testing.T, accepted, total int64) {
	t.Helper()
	t.Logf("%d of %d arbitrary objects accepted", accepted, total)
	if accepted < cases*s.MinAcceptedPercent/100 {
		t.Errorf("only %d arbitrary objects accepted; the generator no longer exercises conversion", accepted)
	}
}

// stableMAPI feeds arbitrary Machines and MachineSets: nothing may panic, and whatever is
// accepted must convert back and reach a fixed point.
func (s Suite[P, S]) stableMAPI(t *testing.T) {
	accepted := int64(0)
	s.each(func(t *testing.T, g *Gen) {
		var m mapiv1.Machine
		g.Fill.Fill(&m)
		if g.Intn(3) > 0 {
			m = *g.MAPIMachine(s.Ctx, nil)
		}
		m.Spec.ProviderSpec.Value = raw(s.RandomProviderSpec(g))
		if s.StableMAPIMachine(t, &m) {
			accepted++
		}
		var ms mapiv1.MachineSet
		g.Fill.Fill(&ms)
		if g.Intn(3) > 0 {
			ms = *g.MAPIMachineSet(s.Ctx, nil)
		}
		ms.Spec.Template.Spec.ProviderSpec.Value = raw(s.RandomProviderSpec(g))
		if s.StableMAPIMachineSet(t, &ms) {
			accepted++
		}
	})(t)
	s.checkAccepted(t, accepted, 2*cases)
}

// stableCAPI is stableMAPI for Cluster API Machines.
func (s Suite[P, S]) stableCAPI(t *testing.T) {
	accepted := int64(0)
	s.each(func(t *testing.T, g *Gen) {
		m, spec, pid := s.RandomCAPIMachine(g)
		infra := s.Ctx.Platform.NewInfraMachine(spec, pid)
		infra.SetName(m.Spec.InfrastructureRef.Name)
		if s.StableCAPIMachine(t, m, infra) {
			accepted++
		}
	})(t)
	s.checkAccepted(t, accepted, cases)
}

// FuzzRoundTrip round-trips the Machine and the MachineSet generated from each seed.
func (s Suite[P, S]) FuzzRoundTrip(f *testing.F) {
	for seed := int64(0); seed < 20; seed++ {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, seed int64) {
		g := New(seed)
		s.MAPIMachine(t, g.MAPIMachine(s.Ctx, raw(s.ProviderSpec(g))))
		s.MAPIMachineSet(t, g.MAPIMachineSet(s.Ctx, raw(s.ProviderSpec(g))))
	})
}

// FuzzProviderSpecBytes feeds arbitrary bytes, starting from ProviderSpecSeeds, as the
// providerSpec value of a Machine: nothing may panic, and whatever is accepted must reach a
// fixed point.
func (s Suite[P, S]) FuzzProviderSpecBytes(f *testing.F) {
	for _, b := range s.ProviderSpecSeeds {
		f.Add([]byte(b))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		g := New(int64(len(b)))
		s.StableMAPIMachine(t, g.MAPIMachine(s.Ctx, &runtime.RawExtension{Raw: b}))
	})
}

// Benchmark measures each conversion direction on a sample of 64 varied, convertible
// objects, so it does not measure one lucky shape.
func (s Suite[P, S]) Benchmark(b *testing.B) {
	var sets []*mapiv1.MachineSet
	var machines []*mapiv1.Machine
	var capiSets []*convert.ClusterAPIMachineSet
	var capiMachines []*convert.ClusterAPIMachine
	for seed := int64(0); seed < 64; seed++ {
		g := New(seed)
		ms := g.MAPIMachineSet(s.Ctx, raw(s.ProviderSpec(g)))
		m := g.MAPIMachine(s.Ctx, raw(s.ProviderSpec(g)))
		cms, _, errs := convert.ToClusterAPIMachineSet(ms, s.Ctx)
		if len(errs) > 0 {
			b.Fatal(errs)
		}
		cm, errs := s.machineToCAPI(m)
		if len(errs) > 0 {
			b.Fatal(errs)
		}
		sets, machines = append(sets, ms), append(machines, m)
		capiSets, capiMachines = append(capiSets, cms), append(capiMachines, cm)
	}
	bench(b, "MachineSetToClusterAPI", sets, func(ms *mapiv1.MachineSet) field.ErrorList {
		_, _, errs := convert.ToClusterAPIMachineSet(ms, s.Ctx)
		return errs
	})
	bench(b, "MachineSetToMachineAPI", capiSets, func(c *convert.ClusterAPIMachineSet) field.ErrorList {
		_, _, errs := convert.ToMachineAPIMachineSet(c.MachineSet, c.InfraMachineTemplate, s.Ctx)
		return errs
	})
	bench(b, "MachineToClusterAPI", machines, func(m *mapiv1.Machine) field.ErrorList {
		_, errs := s.machineToCAPI(m)
		return errs
	})
	bench(b, "MachineToMachineAPI", capiMachines, func(c *convert.ClusterAPIMachine) field.ErrorList {
		_, errs := s.machineToMAPI(c)
		return errs
	})
}

// bench runs convert over the inputs in turn as the sub-benchmark name.
func bench[T any](b *testing.B, name string, in []T, convert func(T) field.ErrorList) {
	b.Run(name, func(b *testing.B) {
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			if errs := convert(in[i%len(in)]); len(errs) > 0 {
				b.Fatal(errs)
			}
		}
	})
}
