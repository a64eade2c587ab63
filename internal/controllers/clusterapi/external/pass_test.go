package external

import (
	"context"
	"testing"

	"github.com/machina-dev/machina/internal/controllers/clusterapi/external/externaltest"
)

// A Pass resolves each kind once, however many objects of it are read; a new Pass resolves
// again (a CRD's contract labels may have changed between passes).
func TestPassResolvesEachKindOnce(t *testing.T) {
	ctx := context.Background()
	kit := externaltest.New(t)
	crds := &externaltest.CountingReader{Reader: kit.Store(kit.CRD)}
	res := &Resolver{Reader: crds, Mapper: kit.Mapper}
	store := kit.Store(externaltest.Object("a"), externaltest.Object("b"), externaltest.Object("c"))

	for round := 1; round <= 2; round++ {
		pass := res.Pass()
		for _, name := range []string{"a", "b", "c", "a"} {
			o, err := pass.Get(ctx, store, externaltest.Ref(name), "ns")
			if err != nil || o.GetName() != name || o.Contract != ContractV1Beta2 || o.GroupVersionKind() != externaltest.GVK {
				t.Fatalf("pass %d, Get %s: %v, %v", round, name, o, err)
			}
		}
		if crds.Gets != round {
			t.Fatalf("after %d passes of 4 reads of one kind: %d CRD reads, want %d", round, crds.Gets, round)
		}
	}
}
