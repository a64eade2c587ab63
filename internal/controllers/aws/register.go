// Package aws registers the Amazon EC2 provider's controller group: the Machine API Machine
// controller with the EC2 actuator (awsactuator) for Machines whose providerSpec is an
// AWSMachineProviderConfig, and the scale-from-zero annotations of AWS MachineSets
// (awsmachineset). Both reach EC2 through aws-sdk-go-v2: the endpoints are the group's
// Options (--aws-endpoint and its ELB counterparts), or the SDK's standard resolution when
// empty; the credentials are a Machine's credentialsSecret, else Options.Credentials, else
// the SDK's default chain. The platform-neutral Machine API controllers (MachineSet,
// MachineHealthCheck, NodeLink) are the "machineapi" group's.
package aws

import (
	"os"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/spf13/pflag"
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

// Options are this group's own settings.
type Options struct {
	// Endpoint overrides the EC2 endpoint URL; empty leaves it to the AWS SDK's standard
	// resolution (AWS_ENDPOINT_URL_EC2, AWS_ENDPOINT_URL, the shared config file, the
	// region's public endpoint).
	Endpoint string
	// ELBEndpoint and ELBv2Endpoint likewise override the classic and v2 Elastic Load
	// Balancing endpoints the actuator registers control-plane Machines with.
	ELBEndpoint, ELBv2Endpoint string
	// Credentials sign the calls for Machines whose providerSpec names no credentialsSecret;
	// nil means the SDK's default chain (environment, shared files, web identity, instance
	// metadata). Set by tests; there is no flag.
	Credentials aws.CredentialsProvider
}

// AddFlags registers the group's flags, which set o.
func (o *Options) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.Endpoint, "aws-endpoint", o.Endpoint,
		`EC2 endpoint URL of the AWS provider's controllers (group "aws"), e.g. the simulated cloud's EC2 front; default: the AWS SDK's standard resolution (AWS_ENDPOINT_URL_EC2, AWS_ENDPOINT_URL, the shared config file, the region's public endpoint)`)
	fs.StringVar(&o.ELBEndpoint, "aws-elb-endpoint", o.ELBEndpoint,
		"classic Elastic Load Balancing endpoint URL the AWS actuator registers control-plane Machines with; default: the AWS SDK's standard resolution (AWS_ENDPOINT_URL_ELASTIC_LOAD_BALANCING, ...)")
	fs.StringVar(&o.ELBv2Endpoint, "aws-elbv2-endpoint", o.ELBv2Endpoint,
		"Elastic Load Balancing v2 (network load balancers) endpoint URL; default: the AWS SDK's standard resolution (AWS_ENDPOINT_URL_ELASTIC_LOAD_BALANCING_V2, ...)")
}

// Group is this controller group, for the list in internal/controllers; its Setup reads o.
func Group(o *Options) manager.Group {
	return manager.Group{
		Name:        GroupName,
		Description: "Amazon EC2 provider (aws-sdk-go-v2, --aws-endpoint): Machine API Machines with an AWSMachineProviderConfig, scale-from-zero on AWS MachineSets",
		Setup:       func(mgr ctrl.Manager, env manager.Env) error { return Setup(mgr, env, *o) },
		AddFlags:    o.AddFlags,
		// The Machine controller with the EC2 actuator.
		MachineAPIKinds: provider.AWS().ProviderSpecKinds,
	}
}

// +kubebuilder:rbac:groups=config.openshift.io,resources=infrastructures,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;list;watch

// Setup adds the AWS provider's controllers to mgr.
func Setup(mgr ctrl.Manager, env manager.Env, o Options) error {
	cfg := awsactuator.Config{
		EC2Endpoint: o.Endpoint, ELBEndpoint: o.ELBEndpoint, ELBv2Endpoint: o.ELBv2Endpoint,
		Credentials: o.Credentials,
	}
	if err := (&machine.Reconciler{
		Name:      MachineControllerName,
		Client:    mgr.GetClient(),
		APIReader: mgr.GetAPIReader(),
		Actuator:  &awsactuator.Actuator{Client: mgr.GetClient(), Config: cfg},
		// Machines of other platforms belong to their own actuators.
		ProviderSpecKinds:       provider.AWS().ProviderSpecKinds,
		Recorder:                events.For(mgr, MachineControllerName),
		Resync:                  env.Resync,
		NodeName:                os.Getenv(machine.NodeNameEnv),
		MaxConcurrentReconciles: env.MachineConcurrency,
	}).SetupWithManager(mgr); err != nil {
		return err
	}
	return (&awsmachineset.Reconciler{
		Client:   mgr.GetClient(),
		Recorder: events.For(mgr, "machineapi-awsmachineset"),
		Types: awsmachineset.NewInstanceTypes(awsmachineset.Config{
			EC2Endpoint: o.Endpoint, Credentials: o.Credentials,
		}),
	}).SetupWithManager(mgr)
}
