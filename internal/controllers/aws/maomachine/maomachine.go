// Package maomachine runs machine-api-operator's own Machine controller
// (github.com/openshift/machine-api-operator/pkg/controller/machine, used unchanged as a
// library) with machina's EC2 actuator behind it, wired the way machine-api-provider-aws
// wires its actuator into that controller: AddWithActuator with a MutableFeatureGate built
// from openshift/api's features as machine-api-operator's commands build theirs, with
// MachineAPIMigration on so the controller honours status.authoritativeAPI.
//
// It is the alternative to the "aws" group's aws-machine controller (machina's own Machine
// controller with the same actuator), not a companion: run one or the other for a namespace.
package maomachine

import (
	"fmt"
	"slices"

	configv1 "github.com/openshift/api/config/v1"
	apifeatures "github.com/openshift/api/features"
	maoctrl "github.com/openshift/machine-api-operator/pkg/controller/machine"
	"k8s.io/client-go/rest"
	"k8s.io/component-base/featuregate"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/machina-dev/machina/internal/controllers/aws/awsactuator"
	"github.com/machina-dev/machina/internal/patch"
	"github.com/machina-dev/machina/internal/provider"
)

// FeatureGates is the gate setting, as the --feature-gates value of machine-api-operator's
// commands would give it. MachineAPIMigration off, the controller would provision Machines
// whose authority is the Cluster API.
const FeatureGates = "MachineAPIMigration=true"

// openshiftMajor is the OpenShift release line whose default feature set the gates start
// from (openshift/api's feature sets are per major version).
const openshiftMajor = 4

// FeatureGate builds the controller's gate as machine-api-operator's commands do (library-go's
// InitializeFeatureGates, then the --feature-gates flag): the features the controller
// consults are registered at their default in OpenShift's self-managed Default feature set
// (GA if on there, Alpha and off otherwise), then set from FeatureGates. library-go itself
// is not used: the version machine-api-operator pins does not build against machina's
// openshift/api, whose feature sets are per OpenShift version. The gate is a fresh one,
// not k8s.io/apiserver's process-wide default, so nothing else in the process shares it.
func FeatureGate() (featuregate.MutableFeatureGate, error) {
	specs := map[featuregate.Feature]featuregate.FeatureSpec{}
	for _, name := range []configv1.FeatureGateName{apifeatures.FeatureGateMachineAPIMigration} {
		spec := featuregate.FeatureSpec{Default: false, PreRelease: featuregate.Alpha}
		if defaultOn(name) {
			spec = featuregate.FeatureSpec{Default: true, PreRelease: featuregate.GA}
		}
		specs[featuregate.Feature(name)] = spec
	}
	gate := featuregate.NewFeatureGate()
	if err := gate.Add(specs); err != nil {
		return nil, err
	}
	if err := gate.Set(FeatureGates); err != nil {
		return nil, fmt.Errorf("feature gates %q: %w", FeatureGates, err)
	}
	return gate, nil
}

// defaultOn reports whether OpenShift's self-managed Default feature set enables name.
func defaultOn(name configv1.FeatureGateName) bool {
	return slices.ContainsFunc(apifeatures.FeatureSets(openshiftMajor, apifeatures.SelfManaged, configv1.Default).Enabled,
		func(d apifeatures.FeatureGateDescription) bool { return d.FeatureGateAttributes.Name == name })
}

// Add registers machine-api-operator's machine-controller and machine-drain-controller on
// mgr, with machina's EC2 actuator configured by cfg. The actuator reads the Infrastructure
// and the Machines' Secrets through mgr's client, so mgr's cache should cover the Machine
// API namespace as machine-api-operator's --namespace does.
func Add(mgr ctrl.Manager, cfg awsactuator.Config) error {
	gate, err := FeatureGate()
	if err != nil {
		return err
	}
	act := &Actuator{Machina: &awsactuator.Actuator{Client: mgr.GetClient(), Config: cfg}, Client: mgr.GetClient()}
	return maoctrl.AddWithActuator(mgr, act, gate)
}

// NewManager returns a manager of its own for machine-api-operator's Machine controller (Add),
// as machine-api-provider-aws's machine-controller container runs it: with cfg's identity
// (machine-api-operator's ServiceAccount in a cluster, lab.MAOConfig in the lab), its cache
// limited to namespace (the Machine API namespace), no metrics or health endpoint, no leader
// election. Start it with Start.
func NewManager(cfg *rest.Config, namespace string, aws awsactuator.Config) (ctrl.Manager, error) {
	s, err := provider.Builtin().Scheme()
	if err != nil {
		return nil, err
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{Scheme: s, NewClient: patch.NewClientWithWriteRecord,
		Cache:   cache.Options{DefaultNamespaces: map[string]cache.Config{namespace: {}}},
		Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0"})
	if err != nil {
		return nil, fmt.Errorf("machine-api-operator's Machine controller: %w", err)
	}
	if err := Add(mgr, aws); err != nil {
		return nil, fmt.Errorf("machine-api-operator's Machine controller: %w", err)
	}
	return mgr, nil
}
