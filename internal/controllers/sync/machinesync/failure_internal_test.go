package machinesync

import (
	"testing"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	capierrors "sigs.k8s.io/cluster-api/api/deprecated/errors"
)

// A Machine API Machine's terminal failure reaches its Cluster API mirror where the Cluster
// API records one, and goes with it; a Cluster API Machine's failure reaches its Machine API
// mirror's errorReason and errorMessage.
func TestFailureCarriedBothWays(t *testing.T) {
	mapi := &machinev1beta1.Machine{}
	mapi.Status.ErrorReason = ptr.To(machinev1beta1.InvalidConfigurationMachineError)
	mapi.Status.ErrorMessage = ptr.To("no such instance type")
	capi := &clusterv1.Machine{}
	failureToCAPI(mapi, capi)
	d := capi.Status.Deprecated
	if d == nil || d.V1Beta1 == nil || ptr.Deref(d.V1Beta1.FailureReason, "") != capierrors.InvalidConfigurationMachineError ||
		ptr.Deref(d.V1Beta1.FailureMessage, "") != "no such instance type" {
		t.Fatalf("failure not carried: %+v", d)
	}
	*mapi.Status.ErrorMessage = "changed"
	if *d.V1Beta1.FailureMessage != "no such instance type" {
		t.Error("the mirror shares the Machine API copy's message")
	}
	mapi.Status.ErrorReason, mapi.Status.ErrorMessage = nil, nil
	failureToCAPI(mapi, capi)
	if capi.Status.Deprecated.V1Beta1.FailureReason != nil || capi.Status.Deprecated.V1Beta1.FailureMessage != nil {
		t.Errorf("failure kept after it cleared: %+v", capi.Status.Deprecated.V1Beta1)
	}
	untouched := &clusterv1.Machine{}
	failureToCAPI(mapi, untouched)
	if untouched.Status.Deprecated != nil {
		t.Error("a healthy Machine's mirror got a deprecated status")
	}

	failed := &clusterv1.Machine{Status: clusterv1.MachineStatus{Deprecated: &clusterv1.MachineDeprecatedStatus{
		V1Beta1: &clusterv1.MachineV1Beta1DeprecatedStatus{FailureReason: ptr.To(capierrors.CreateMachineError), FailureMessage: ptr.To("quota")}}}}
	statusToMAPI(mapi, failed)
	if ptr.Deref(mapi.Status.ErrorReason, "") != machinev1beta1.CreateMachineError || ptr.Deref(mapi.Status.ErrorMessage, "") != "quota" {
		t.Fatalf("Machine API mirror errorReason %v errorMessage %v", mapi.Status.ErrorReason, mapi.Status.ErrorMessage)
	}
	statusToMAPI(mapi, &clusterv1.Machine{})
	if mapi.Status.ErrorReason != nil || mapi.Status.ErrorMessage != nil {
		t.Error("the Machine API mirror kept a failure the Cluster API no longer records")
	}
}
