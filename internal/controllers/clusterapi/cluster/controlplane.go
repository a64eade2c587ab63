package cluster

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"

	"github.com/machina-dev/machina/internal/controllers/clusterapi/external"
	"github.com/machina-dev/machina/internal/controllers/clusterapi/internal/conds"
)

// reconcileControlPlaneStatus sets ControlPlaneInitialized, ControlPlaneAvailable and
// status.controlPlane. With spec.controlPlaneRef they come from the control plane object
// (its Available condition, status.initialization.controlPlaneInitialized and replica
// counters); without one, as upstream does, the control plane is the Cluster's
// control-plane Machines: initialized once one of them has a Node, counted like standalone
// Machines, and no ControlPlaneAvailable (see docs/clusterapi.md). It returns the control
// plane's conditions for the scaling and rollout aggregations (nil without one).
func (r *Reconciler) reconcileControlPlaneStatus(ctx context.Context, cl *clusterv1.Cluster, d *descendants) conds.Object {
	ref := cl.Spec.ControlPlaneRef
	if !ref.IsDefined() {
		setControlPlaneFromMachines(cl, d)
		if isInitialized(cl) {
			return nil
		}
		for _, m := range d.controlPlane {
			if m.Status.NodeRef.IsDefined() {
				markInitialized(cl)
				return nil
			}
		}
		setCondition(cl, clusterv1.ClusterControlPlaneInitializedCondition, metav1.ConditionFalse, clusterv1.ClusterControlPlaneNotInitializedReason,
			"Waiting for the first control plane machine to have status.nodeRef set")
		return nil
	}
	cp, err := r.Resolver.Get(ctx, r.Client, ref, cl.Namespace)
	switch {
	case apierrors.IsNotFound(err):
		cl.Status.ControlPlane = &clusterv1.ClusterControlPlaneStatus{}
		reason := clusterv1.ClusterControlPlaneDoesNotExistReason
		if isInitialized(cl) {
			reason = clusterv1.ClusterControlPlaneDeletedReason
		}
		setCondition(cl, clusterv1.ClusterControlPlaneAvailableCondition, metav1.ConditionFalse, reason, fmt.Sprintf("%s %s does not exist", ref.Kind, ref.Name))
		if !isInitialized(cl) {
			setCondition(cl, clusterv1.ClusterControlPlaneInitializedCondition, metav1.ConditionUnknown, clusterv1.ClusterControlPlaneDoesNotExistReason,
				fmt.Sprintf("%s %s does not exist", ref.Kind, ref.Name))
		}
		return nil
	case err != nil:
		setCondition(cl, clusterv1.ClusterControlPlaneAvailableCondition, metav1.ConditionUnknown, clusterv1.ClusterControlPlaneInternalErrorReason, err.Error())
		return nil
	}
	initialized := cp.Provisioned("controlPlaneInitialized")
	if cp.Contract == external.ContractV1Beta1 {
		initialized, _, _ = unstructured.NestedBool(cp.Object, "status", "initialized")
	}
	if initialized && !isInitialized(cl) {
		markInitialized(cl)
	} else if !isInitialized(cl) {
		setCondition(cl, clusterv1.ClusterControlPlaneInitializedCondition, metav1.ConditionFalse, clusterv1.ClusterControlPlaneNotInitializedReason,
			"Control plane not yet initialized")
	}
	mirrorControlPlaneAvailable(cl, cp)
	setControlPlaneCounters(cl, cp)
	src := &controlPlaneSource{Object: cp}
	for _, t := range []string{clusterv1.ScalingUpCondition, clusterv1.ScalingDownCondition, clusterv1.RollingOutCondition} {
		if c := cp.Condition(t); c != nil {
			src.reported = append(src.reported, *c)
		}
	}
	return src
}

// controlPlaneSource is the control plane object in the scaling and rollout aggregations:
// the library names it by the object's kind and name, and reads the conditions it reports.
type controlPlaneSource struct {
	*external.Object
	reported []metav1.Condition
}

// GetConditions implements conditions.Getter.
func (s *controlPlaneSource) GetConditions() []metav1.Condition { return s.reported }

func isInitialized(cl *clusterv1.Cluster) bool {
	return meta.IsStatusConditionTrue(cl.Status.Conditions, clusterv1.ClusterControlPlaneInitializedCondition)
}

func markInitialized(cl *clusterv1.Cluster) {
	cl.Status.Initialization.ControlPlaneInitialized = ptr.To(true)
	setCondition(cl, clusterv1.ClusterControlPlaneInitializedCondition, metav1.ConditionTrue, clusterv1.ClusterControlPlaneInitializedReason, "")
}

// mirrorControlPlaneAvailable copies the control plane's Available condition, falling back
// to whether it is initialized.
func mirrorControlPlaneAvailable(cl *clusterv1.Cluster, cp *external.Object) {
	fallback := conditions.FallbackCondition{Status: metav1.ConditionTrue, Reason: clusterv1.ClusterControlPlaneAvailableReason}
	if !isInitialized(cl) {
		fallback = conditions.FallbackCondition{Status: metav1.ConditionFalse, Reason: clusterv1.ClusterControlPlaneNotAvailableReason,
			Message: fmt.Sprintf("%s status.initialization.controlPlaneInitialized is false", cp.GetKind())}
	}
	conditions.Set(cl, conds.Mirror(cp.Condition(clusterv1.AvailableCondition), clusterv1.AvailableCondition,
		clusterv1.ClusterControlPlaneAvailableCondition, clusterv1.ClusterControlPlaneAvailableReason,
		clusterv1.ClusterControlPlaneNotAvailableReason, fallback))
}

// setControlPlaneCounters copies the control plane's replica counters (absent ones stay unset).
func setControlPlaneCounters(cl *clusterv1.Cluster, cp *external.Object) {
	get := func(path ...string) *int32 {
		if v, ok, err := unstructured.NestedInt64(cp.Object, path...); ok && err == nil {
			return ptr.To(int32(v))
		}
		return nil
	}
	cl.Status.ControlPlane = &clusterv1.ClusterControlPlaneStatus{
		DesiredReplicas:   get("spec", "replicas"),
		Replicas:          get("status", "replicas"),
		ReadyReplicas:     get("status", "readyReplicas"),
		AvailableReplicas: get("status", "availableReplicas"),
		UpToDateReplicas:  get("status", "upToDateReplicas"),
	}
}
