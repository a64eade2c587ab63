package provider

import (
	"github.com/machina-dev/machina/internal/convert/providers/aws"
	"github.com/machina-dev/machina/internal/convert/providers/azure"
	"github.com/machina-dev/machina/internal/convert/providers/gcp"
	"github.com/machina-dev/machina/internal/convert/providers/openstack"
	"github.com/machina-dev/machina/internal/convert/providers/powervs"
	"github.com/machina-dev/machina/internal/convert/providers/sim"
	"github.com/machina-dev/machina/internal/convert/providers/vsphere"
)

// Builtin returns the platforms built into machina: the simulated cloud, AWS, OpenStack, GCP,
// Azure, PowerVS and vSphere.
func Builtin() *Registry {
	r, err := NewRegistry(Sim(), AWS(), OpenStack(), GCP(), Azure(), PowerVS(), VSphere())
	if err != nil {
		panic(err) // a programming error in the platforms' descriptions, caught by this package's tests
	}
	return r
}

// The built-in platforms one by one, as their conversion packages describe them, for the
// controller groups and tests that name one.

// Sim is machina's simulated cloud (sim.Provider).
func Sim() Provider { return sim.Provider() }

// AWS is Amazon EC2 through CAPA (aws.Provider).
func AWS() Provider { return aws.Provider() }

// OpenStack is OpenStack through CAPO (openstack.Provider).
func OpenStack() Provider { return openstack.Provider() }

// GCP is Google Compute Engine through CAPG (gcp.Provider).
func GCP() Provider { return gcp.Provider() }

// Azure is Microsoft Azure through CAPZ (azure.Provider).
func Azure() Provider { return azure.Provider() }

// PowerVS is IBM Cloud Power Virtual Server through CAPIBM (powervs.Provider).
func PowerVS() Provider { return powervs.Provider() }

// VSphere is VMware vSphere through CAPV (vsphere.Provider).
func VSphere() Provider { return vsphere.Provider() }
