package aws

import (
	"testing"

	mapiv1 "github.com/openshift/api/machine/v1beta1"

	"github.com/machina-dev/machina/internal/convert"
	ct "github.com/machina-dev/machina/internal/convert/converttest"
)

// benchmarkInputs returns a sample of varied, convertible objects so the benchmark does not
// measure one lucky shape.
func benchmarkInputs(n int) ([]*convert.ClusterAPIMachineSet, []*convert.ClusterAPIMachine) {
	var sets []*convert.ClusterAPIMachineSet
	var machines []*convert.ClusterAPIMachine
	for seed := int64(0); seed < int64(n); seed++ {
		g := ct.New(seed)
		ms, _, errs := convert.ToClusterAPIMachineSet(g.MAPIMachineSet(testCtx, raw(genProviderSpec(g))), testCtx)
		if len(errs) > 0 {
			panic(errs)
		}
		m, _, errs := convert.ToClusterAPIMachine(g.MAPIMachine(testCtx, raw(genProviderSpec(g))), testCtx)
		if len(errs) > 0 {
			panic(errs)
		}
		sets, machines = append(sets, ms), append(machines, m)
	}
	return sets, machines
}

func BenchmarkMachineSetToClusterAPI(b *testing.B) {
	var in []*mapiv1.MachineSet
	for seed := int64(0); seed < 64; seed++ {
		g := ct.New(seed)
		in = append(in, g.MAPIMachineSet(testCtx, raw(genProviderSpec(g))))
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, _, errs := convert.ToClusterAPIMachineSet(in[i%len(in)], testCtx); len(errs) > 0 {
			b.Fatal(errs)
		}
	}
}

func BenchmarkMachineSetToMachineAPI(b *testing.B) {
	sets, _ := benchmarkInputs(64)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		s := sets[i%len(sets)]
		if _, _, errs := convert.ToMachineAPIMachineSet(s.MachineSet, s.InfraMachineTemplate, testCtx); len(errs) > 0 {
			b.Fatal(errs)
		}
	}
}

func BenchmarkMachineToClusterAPI(b *testing.B) {
	var in []*mapiv1.Machine
	for seed := int64(0); seed < 64; seed++ {
		g := ct.New(seed)
		in = append(in, g.MAPIMachine(testCtx, raw(genProviderSpec(g))))
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, _, errs := convert.ToClusterAPIMachine(in[i%len(in)], testCtx); len(errs) > 0 {
			b.Fatal(errs)
		}
	}
}

func BenchmarkMachineToMachineAPI(b *testing.B) {
	_, machines := benchmarkInputs(64)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		m := machines[i%len(machines)]
		if _, _, errs := convert.ToMachineAPIMachine(m.Machine, m.InfraMachine, testCtx); len(errs) > 0 {
			b.Fatal(errs)
		}
	}
}
