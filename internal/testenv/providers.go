package testenv

import (
	"context"
	"fmt"
	"reflect"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/machina-dev/machina/internal/lab"
	"github.com/machina-dev/machina/internal/provider"
)

// InstallProviderCRDs installs, from the Go module that holds each provider's API types (the
// one go.mod pins), the CRDs of its InfraMachine, InfraMachineTemplate and InfraCluster kinds
// as the provider's release labels them. It is for platforms whose CRDs the lab does not
// embed (config/crd/upstream has the Cluster API AWS provider's only).
func InstallProviderCRDs(t testing.TB, l *lab.Lab, ps ...provider.Provider) {
	t.Helper()
	for _, p := range ps {
		dir, err := providerModuleDir(p)
		if err != nil {
			t.Fatal(err)
		}
		var kinds []schema.GroupKind
		for _, gvk := range p.InfraKinds() {
			kinds = append(kinds, gvk.GroupKind())
		}
		if _, err := lab.InstallModuleCRDs(context.Background(), l.Config, dir, kinds...); err != nil {
			t.Fatalf("provider %s: %v", p.Name, err)
		}
	}
}

// providerModuleDir finds the module directory of p's InfraMachine Go type.
func providerModuleDir(p provider.Provider) (string, error) {
	if p.AddToScheme == nil {
		return "", fmt.Errorf("provider %s registers no Go types: cannot tell its module", p.Name)
	}
	s := runtime.NewScheme()
	if err := p.AddToScheme(s); err != nil {
		return "", fmt.Errorf("provider %s: %w", p.Name, err)
	}
	obj, err := s.New(p.InfraMachine)
	if err != nil {
		return "", fmt.Errorf("provider %s: %w", p.Name, err)
	}
	return lab.ModuleDir(reflect.TypeOf(obj).Elem().PkgPath())
}
