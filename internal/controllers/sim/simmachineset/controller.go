// Package simmachineset is the simulated provider's MachineSet controller of the Machine API,
// the counterpart of the provider-specific MachineSet controllers OpenShift runs for each
// cloud: it tells the cluster autoscaler what a Node of a MachineSet would offer, so the
// autoscaler can scale the MachineSet from (and to) zero.
//
// For every MachineSet whose template carries a SimMachineProviderSpec it looks the instance
// type up in the simulated cloud's catalogue; internal/controllers/scalefromzero sets the
// annotations and the CapacityAnnotated condition.
package simmachineset

import (
	"context"
	"fmt"
	"time"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	"k8s.io/client-go/tools/record"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/machina-dev/machina/api/infrastructure/v1alpha1"
	"github.com/machina-dev/machina/internal/cloud/api"
	cloudclient "github.com/machina-dev/machina/internal/cloud/client"
	"github.com/machina-dev/machina/internal/controllers/scalefromzero"
)

// specType is the providerSpec this controller claims; one naming no kind is taken for the
// simulated provider's, as the simulated actuator does.
var specType = scalefromzero.SpecType{Kind: "SimMachineProviderSpec", Groups: []string{infrav1.GroupVersion.Group}, ClaimUnkinded: true}

// Reconciler reconciles the scale-from-zero annotations of simulated-provider MachineSets.
type Reconciler struct {
	Client   client.Client
	Cloud    *cloudclient.Client
	Recorder record.EventRecorder
	// Resync is how often a MachineSet is reconciled without an event
	// (scalefromzero.DefaultResync when 0).
	Resync time.Duration
}

// +kubebuilder:rbac:groups=machine.openshift.io,resources=machinesets;machinesets/status,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups="",resources=events,verbs=create;patch

// SetupWithManager registers the controller.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	return (&scalefromzero.Reconciler{Client: r.Client, Recorder: r.Recorder, Name: "machineapi-simmachineset",
		Describer: describer{r.Cloud}, Resync: r.Resync}).SetupWithManager(mgr)
}

// describer looks instance types up in the simulated cloud's catalogue.
type describer struct{ cloud *cloudclient.Client }

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
			"%s: Required value: the autoscaler needs an instance type to scale from zero", scalefromzero.InstanceTypePath)
	}
	types, err := d.cloud.DescribeInstanceTypes(ctx, ps.InstanceType)
	switch {
	case err == nil && len(types) == 1:
		return types[0], true, nil
	case cloudclient.HasCode(err, api.CodeInvalidInstanceType) || err == nil:
		return api.InstanceType{}, true, scalefromzero.Invalid(scalefromzero.InvalidInstanceTypeReason,
			"%s: Invalid value: %q: not in the simulated cloud's catalogue of instance types; the scale-from-zero annotations are removed",
			scalefromzero.InstanceTypePath, ps.InstanceType)
	}
	return api.InstanceType{}, true, fmt.Errorf("reading instance type %q from the simulated cloud: %w", ps.InstanceType, err)
}

// providerSpec decodes the SimMachineProviderSpec of a MachineSet's template
// (scalefromzero.DecodeProviderSpec).
func providerSpec(ms *machinev1beta1.MachineSet) (*infrav1.SimMachineProviderSpec, bool, error) {
	ps := &infrav1.SimMachineProviderSpec{}
	claimed, err := scalefromzero.DecodeProviderSpec(ms, specType, ps)
	return ps, claimed, err
}
