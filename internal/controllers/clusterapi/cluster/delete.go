package cluster

import (
	"context"
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/machina-dev/machina/internal/controllers/clusterapi/external"
	"github.com/machina-dev/machina/internal/events"
)

// reconcileDelete removes what belongs to the Cluster, in order, reporting each step in the
// Deleting condition: descendants (MachineDeployments, MachineSets, MachinePools, Machines)
// and wait until they are all gone; then the InfraCluster and wait; then the finalizer.
func (r *Reconciler) reconcileDelete(ctx context.Context, cl *clusterv1.Cluster) (ctrl.Result, error) {
	if !controllerutil.ContainsFinalizer(cl, clusterv1.ClusterFinalizer) {
		return ctrl.Result{}, nil
	}
	r.setPhase(cl, clusterv1.ClusterPhaseDeleting)

	left, err := r.deleteDescendants(ctx, cl)
	if err != nil {
		setCondition(cl, clusterv1.ClusterDeletingCondition, metav1.ConditionTrue, clusterv1.ClusterDeletingInternalErrorReason, err.Error())
		return ctrl.Result{}, err
	}
	if len(left) > 0 {
		setCondition(cl, clusterv1.ClusterDeletingCondition, metav1.ConditionTrue, WaitingForWorkersDeletionReason,
			"waiting for "+summarize(left)+" to be deleted")
		// Descendants are watched; the requeue covers ones without the cluster-name label.
		return ctrl.Result{RequeueAfter: WaitRequeue}, nil
	}

	if ref := cl.Spec.InfrastructureRef; ref.IsDefined() {
		gone, err := r.Resolver.Delete(ctx, r.Client, ref, cl.Namespace)
		if err != nil {
			setCondition(cl, clusterv1.ClusterDeletingCondition, metav1.ConditionTrue, clusterv1.ClusterDeletingInternalErrorReason, err.Error())
			return ctrl.Result{}, err
		}
		if !gone {
			setCondition(cl, clusterv1.ClusterDeletingCondition, metav1.ConditionTrue, WaitingForInfrastructureDeletionReason,
				fmt.Sprintf("waiting for %s %s to be deleted", ref.Kind, ref.Name))
			setCondition(cl, clusterv1.ClusterInfrastructureReadyCondition, metav1.ConditionFalse,
				clusterv1.ClusterInfrastructureDeletedReason, fmt.Sprintf("%s %s is being deleted", ref.Kind, ref.Name))
			return ctrl.Result{RequeueAfter: WaitRequeue}, nil
		}
		events.Eventf(r.Recorder, cl, corev1.EventTypeNormal, "InfrastructureDeleted", "%s %s is deleted", ref.Kind, ref.Name)
	}

	setCondition(cl, clusterv1.ClusterDeletingCondition, metav1.ConditionTrue, clusterv1.ClusterDeletingDeletionCompletedReason, "deletion completed")
	controllerutil.RemoveFinalizer(cl, clusterv1.ClusterFinalizer)
	events.Eventf(r.Recorder, cl, corev1.EventTypeNormal, "Deleted", "Cluster %s is deleted", cl.Name)
	return ctrl.Result{}, nil
}

// deleteDescendants deletes every MachineDeployment, MachineSet, MachinePool and Machine of
// the Cluster (by the cluster-name label or spec.clusterName) that is not being deleted yet,
// and returns those still present, as "Kind name".
func (r *Reconciler) deleteDescendants(ctx context.Context, cl *clusterv1.Cluster) ([]string, error) {
	lists := []struct {
		kind string
		list client.ObjectList
	}{
		{"MachineDeployment", &clusterv1.MachineDeploymentList{}},
		{"MachineSet", &clusterv1.MachineSetList{}},
		{"MachinePool", &clusterv1.MachinePoolList{}},
		{"Machine", &clusterv1.MachineList{}},
	}
	var left []string
	for _, l := range lists {
		if err := r.Client.List(ctx, l.list, client.InNamespace(cl.Namespace)); err != nil {
			return nil, fmt.Errorf("listing %ss: %w", l.kind, err)
		}
		items, err := itemsOf(l.list)
		if err != nil {
			return nil, err
		}
		for _, o := range items {
			if !belongsTo(o, cl.Name) {
				continue
			}
			left = append(left, l.kind+" "+o.GetName())
			if o.GetDeletionTimestamp() != nil {
				continue
			}
			if err := r.Client.Delete(ctx, o, client.PropagationPolicy(metav1.DeletePropagationBackground)); err != nil && !apierrors.IsNotFound(err) {
				return nil, fmt.Errorf("deleting %s %s: %w", l.kind, o.GetName(), err)
			}
		}
	}
	return left, nil
}

func itemsOf(list client.ObjectList) ([]client.Object, error) {
	var out []client.Object
	switch l := list.(type) {
	case *clusterv1.MachineDeploymentList:
		for i := range l.Items {
			out = append(out, &l.Items[i])
		}
	case *clusterv1.MachineSetList:
		for i := range l.Items {
			out = append(out, &l.Items[i])
		}
	case *clusterv1.MachinePoolList:
		for i := range l.Items {
			out = append(out, &l.Items[i])
		}
	case *clusterv1.MachineList:
		for i := range l.Items {
			out = append(out, &l.Items[i])
		}
	default:
		return nil, fmt.Errorf("unexpected list %T", list)
	}
	return out, nil
}

func belongsTo(o client.Object, cluster string) bool {
	if o.GetLabels()[clusterv1.ClusterNameLabel] == cluster {
		return true
	}
	switch x := o.(type) {
	case *clusterv1.Machine:
		return x.Spec.ClusterName == cluster
	case *clusterv1.MachineSet:
		return x.Spec.ClusterName == cluster
	case *clusterv1.MachineDeployment:
		return x.Spec.ClusterName == cluster
	case *clusterv1.MachinePool:
		return x.Spec.ClusterName == cluster
	}
	return false
}

func summarize(names []string) string {
	sort.Strings(names)
	if len(names) > 5 {
		return strings.Join(names[:5], ", ") + fmt.Sprintf(" and %d more", len(names)-5)
	}
	return strings.Join(names, ", ")
}

// failureDomains reads the InfraCluster's failure domains: a list of
// {name, controlPlane, attributes} under the v1beta2 contract, a map name → {controlPlane,
// attributes} under v1beta1. nil when it reports none.
func failureDomains(infra *external.Object) []clusterv1.FailureDomain {
	raw, found, _ := unstructured.NestedFieldNoCopy(infra.Object, "status", "failureDomains")
	if !found {
		return nil
	}
	var out []clusterv1.FailureDomain
	add := func(name string, m map[string]any) {
		fd := clusterv1.FailureDomain{Name: name}
		if cp, ok := m["controlPlane"].(bool); ok {
			fd.ControlPlane = ptr.To(cp)
		}
		if attrs, ok := m["attributes"].(map[string]any); ok {
			fd.Attributes = map[string]string{}
			for k, v := range attrs {
				if s, ok := v.(string); ok {
					fd.Attributes[k] = s
				}
			}
		}
		out = append(out, fd)
	}
	switch v := raw.(type) {
	case []any:
		for _, item := range v {
			if m, ok := item.(map[string]any); ok {
				if name, _ := m["name"].(string); name != "" {
					add(name, m)
				}
			}
		}
	case map[string]any:
		for name, item := range v {
			m, _ := item.(map[string]any)
			add(name, m)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

func nestedInt(o *external.Object, path ...string) (int64, bool, error) {
	return unstructured.NestedInt64(o.Object, path...)
}
