package sim

import (
	"testing"

	mapiv1 "github.com/openshift/api/machine/v1beta1"

	"github.com/machina-dev/machina/internal/convert"
	ct "github.com/machina-dev/machina/internal/convert/converttest"
)

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
	var in []*convert.ClusterAPIMachineSet
	for seed := int64(0); seed < 64; seed++ {
		g := ct.New(seed)
		c, _, errs := convert.ToClusterAPIMachineSet(g.MAPIMachineSet(testCtx, raw(genProviderSpec(g))), testCtx)
		if len(errs) > 0 {
			b.Fatal(errs)
		}
		in = append(in, c)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		c := in[i%len(in)]
		if _, _, errs := convert.ToMachineAPIMachineSet(c.MachineSet, c.InfraMachineTemplate, testCtx); len(errs) > 0 {
			b.Fatal(errs)
		}
	}
}
