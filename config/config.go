// Package config holds machina's install manifests (kustomize directories, see
// docs/install.md) and embeds the ones the lab installs itself: the manager's RBAC (rbac/)
// and the providers' aggregated roles (sim/, aws/, openstack/, gcp/, azure/, powervs/,
// vsphere/). crd/ and admission/ embed their own files.
package config

import (
	"embed"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/machina-dev/machina/config/render"
)

//go:embed rbac/*.yaml sim/*.yaml aws/*.yaml openstack/*.yaml gcp/*.yaml azure/*.yaml powervs/*.yaml vsphere/*.yaml
var files embed.FS

// Namespace is where the manager runs; its ServiceAccount machina-manager there is the
// identity the admission policies recognise.
const Namespace = "machina-system"

// ServiceAccount is the manager's ServiceAccount name in Namespace.
const ServiceAccount = "machina-manager"

// AggregateToManagerLabel marks a provider's ClusterRole whose rules join the manager's
// role for provider kinds (machina-manager-infrastructure), per the Cluster API provider
// contract.
const AggregateToManagerLabel = "cluster.x-k8s.io/aggregate-to-manager"

// InfrastructureRole is the aggregated ClusterRole holding every provider's rules.
const InfrastructureRole = "machina-manager-infrastructure"

// RBAC returns the manager's ServiceAccount, roles and bindings (config/rbac) and the
// providers' aggregated ClusterRoles (config/sim, config/aws, config/openstack, config/gcp,
// config/azure, config/powervs, config/vsphere), as kubectl apply -k renders them.
func RBAC() ([]*unstructured.Unstructured, error) {
	var out []*unstructured.Unstructured
	for _, dir := range []string{"rbac", "sim", "aws", "openstack", "gcp", "azure", "powervs", "vsphere"} {
		objs, err := render.Render(files, dir)
		if err != nil {
			return nil, err
		}
		out = append(out, objs...)
	}
	return out, nil
}
