// Package awsmachineset is the Machine API MachineSet controller of the AWS provider, the
// counterpart of OpenShift's AWS MachineSet controller: it tells the cluster autoscaler what a
// Node of a MachineSet would offer, so the autoscaler can scale the MachineSet from (and to)
// zero.
//
// For every MachineSet whose template carries an AWSMachineProviderConfig it describes the
// instance type through EC2 DescribeInstanceTypes (aws-sdk-go-v2; answers cached per region);
// internal/controllers/scalefromzero sets the annotations and the CapacityAnnotated condition,
// as for every platform. The region is the providerSpec's placement.region, else the
// Infrastructure's; calls are signed with the providerSpec's credentialsSecret, else the
// configured default credentials.
package awsmachineset

import (
	"context"
	"fmt"
	"time"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	"k8s.io/client-go/tools/record"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/machina-dev/machina/internal/cloud/api"
	"github.com/machina-dev/machina/internal/controllers/scalefromzero"
)

// Reconciler reconciles the scale-from-zero annotations of AWS MachineSets.
type Reconciler struct {
	Client   client.Client
	Recorder record.EventRecorder
	// Types describes instance types; NewInstanceTypes(Config{}) (the SDK's standard
	// endpoint and credentials) when nil.
	Types *InstanceTypes
	// Resync is how often a MachineSet is reconciled without an event
	// (scalefromzero.DefaultResync when 0).
	Resync time.Duration
}

// +kubebuilder:rbac:groups=machine.openshift.io,resources=machinesets;machinesets/status,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=config.openshift.io,resources=infrastructures,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=events,verbs=create;patch

// SetupWithManager registers the controller.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.Types == nil {
		r.Types = NewInstanceTypes(Config{})
	}
	return (&scalefromzero.Reconciler{Client: r.Client, Recorder: r.Recorder, Name: "machineapi-awsmachineset",
		Describer: describer{r.Client, r.Types}, Resync: r.Resync}).SetupWithManager(mgr)
}

// describer asks EC2 about instance types.
type describer struct {
	client client.Reader
	types  *InstanceTypes
}

// Describe implements scalefromzero.Describer.
func (d describer) Describe(ctx context.Context, ms *machinev1beta1.MachineSet) (api.InstanceType, bool, error) {
	ps, claimed, err := providerSpec(ms)
	switch {
	case !claimed:
		return api.InstanceType{}, false, nil
	case err != nil:
		return api.InstanceType{}, true, scalefromzero.Invalid(scalefromzero.InvalidProviderSpecReason, "%v", err)
	case ps.InstanceType == "":
		return api.InstanceType{}, true, scalefromzero.Invalid(scalefromzero.InvalidInstanceTypeReason,
			"%s: Required value: the autoscaler needs an instance type to scale from zero", instanceTypePath)
	}
	region, err := regionOf(ctx, d.client, ps)
	if err != nil {
		return api.InstanceType{}, true, err
	}
	if region == "" {
		return api.InstanceType{}, true, scalefromzero.Invalid(scalefromzero.InvalidProviderSpecReason,
			"%s: Required value: no region: neither the providerSpec nor Infrastructure cluster (status.platformStatus.aws.region) names one", regionPath)
	}
	creds, err := credentialsOf(ctx, d.client, ms.Namespace, ps)
	if err != nil {
		return api.InstanceType{}, true, err
	}
	t, err := d.types.Describe(ctx, region, ps.InstanceType, creds)
	switch {
	case IsInvalidInstanceType(err):
		return api.InstanceType{}, true, scalefromzero.Invalid(scalefromzero.InvalidInstanceTypeReason,
			"%s: Invalid value: %q: EC2 in %s does not offer this instance type (%v); the scale-from-zero annotations are removed",
			instanceTypePath, ps.InstanceType, region, err)
	case err != nil:
		return api.InstanceType{}, true, fmt.Errorf("describing instance type %q in %s: %w", ps.InstanceType, region, err)
	}
	return t, true, nil
}
