// Package aws registers the Amazon EC2 provider's controller group: the Machine API Machine
// controller with the EC2 actuator (awsactuator) for Machines whose providerSpec is an
// AWSMachineProviderConfig, and the scale-from-zero annotations of AWS MachineSets
// (awsmachineset). Both reach EC2 through aws-sdk-go-v2: the endpoints are manager.Env's
// AWSEndpoint (--aws-endpoint) and its ELB counterparts, or the SDK's standard resolution
// when empty; the credentials are a Machine's credentialsSecret, else Env.AWSCredentials,
// else the SDK's default chain. The platform-neutral Machine API controllers (MachineSet,
// MachineHealthCheck, NodeLink) are the "machineapi" group's.
package aws

import (
	"os"

	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/machina-dev/machina/internal/controllers/aws/awsactuator"
	"github.com/machina-dev/machina/internal/controllers/aws/awsmachineset"
	"github.com/machina-dev/machina/internal/controllers/machineapi/machine"
	"github.com/machina-dev/machina/internal/events"
	"github.com/machina-dev/machina/internal/manager"
	"github.com/machina-dev/machina/internal/provider"
)

// GroupName is the --controllers name of this group.
const GroupName = "aws"

// MachineControllerName is the name of this group's Machine controller (and of its events'
// reporter), distinct from the simulated provider's.
const MachineControllerName = "aws-machine"

// Group is this controller group, for the list in internal/controllers.
func Group() manager.Group {
	return manager.Group{
		Name:        GroupName,
		Description: "Amazon EC2 provider (aws-sdk-go-v2, --aws-endpoint): Machine API Machines with an AWSMachineProviderConfig, scale-from-zero on AWS MachineSets",
		Setup:       Setup,
		// The Machine controller with the EC2 actuator.
		MachineAPIKinds: provider.AWS().ProviderSpecKinds,
	}
}

// +kubebuilder:rbac:groups=config.openshift.io,resources=infrastructures,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;list;watch

// Setup adds the AWS provider's controllers to mgr.
func Setup(mgr ctrl.Manager, env manager.Env) error {
	cfg := awsactuator.Config{
		EC2Endpoint: env.AWSEndpoint, ELBEndpoint: env.AWSELBEndpoint, ELBv2Endpoint: env.AWSELBv2Endpoint,
		Credentials: env.AWSCredentials,
	}
	if err := (&machine.Reconciler{
		Name:      MachineControllerName,
		Client:    mgr.GetClient(),
		APIReader: mgr.GetAPIReader(),
		Actuator:  &awsactuator.Actuator{Client: mgr.GetClient(), Config: cfg},
		// Machines of other platforms belong to their own actuators.
		ProviderSpecKinds: provider.AWS().ProviderSpecKinds,
		Recorder:          events.For(mgr, MachineControllerName),
		Resync:            env.Resync,
		NodeName:          os.Getenv(machine.NodeNameEnv),
	}).SetupWithManager(mgr); err != nil {
		return err
	}
	return (&awsmachineset.Reconciler{
		Client:   mgr.GetClient(),
		Recorder: events.For(mgr, "machineapi-awsmachineset"),
		Types: awsmachineset.NewInstanceTypes(awsmachineset.Config{
			EC2Endpoint: env.AWSEndpoint, Credentials: env.AWSCredentials,
		}),
	}).SetupWithManager(mgr)
}
