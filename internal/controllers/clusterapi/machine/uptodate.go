package machine

import (
	"context"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/labels/format"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/machina-dev/machina/internal/controllers/clusterapi/internal/inplace"
	"github.com/machina-dev/machina/internal/controllers/clusterapi/machineset"
)

// setUpToDate sets the Machine's UpToDate condition. A Machine of a MachineDeployment is up
// to date when its MachineSet's template matches the MachineDeployment's (fields Cluster
// API changes in place aside) and spec.rollout.after, once passed, is not newer than the
// MachineSet, as upstream decides rollouts. A Machine of a MachineSet alone is up to date
// when it was created from the MachineSet's current template (Machines the MachineSet
// adopted carry no template hash and are). A Machine without a MachineSet is its own spec,
// so it is up to date. A MachineSet or MachineDeployment that cannot be read leaves the
// condition as it was.
func (r *Reconciler) setUpToDate(ctx context.Context, m *clusterv1.Machine) {
	ref := metav1.GetControllerOf(m)
	if ref == nil || ref.Kind != "MachineSet" {
		setCondition(m, clusterv1.MachineUpToDateCondition, metav1.ConditionTrue, clusterv1.MachineUpToDateReason, "")
		return
	}
	ms := &clusterv1.MachineSet{}
	if err := r.Client.Get(ctx, client.ObjectKey{Namespace: m.Namespace, Name: ref.Name}, ms); err != nil {
		return
	}
	var stale []string
	if mdRef := metav1.GetControllerOf(ms); mdRef != nil && mdRef.Kind == "MachineDeployment" {
		md := &clusterv1.MachineDeployment{}
		if err := r.Client.Get(ctx, client.ObjectKey{Namespace: m.Namespace, Name: mdRef.Name}, md); err != nil {
			return
		}
		if !equality.Semantic.DeepEqual(inplace.RolloutSpec(&ms.Spec.Template.Spec), inplace.RolloutSpec(&md.Spec.Template.Spec)) {
			stale = append(stale, fmt.Sprintf("* MachineSet %s has a template that differs from MachineDeployment %s", ms.Name, md.Name))
		}
		now := metav1.Now()
		if after := md.Spec.Rollout.After; !after.IsZero() && after.Before(&now) && ms.CreationTimestamp.Before(&after) {
			stale = append(stale, "* MachineDeployment spec.rollout.after expired")
		}
	} else if h, ok := m.Annotations[machineset.TemplateHashAnnotation]; ok && h != machineset.TemplateHash(ms) {
		stale = append(stale, fmt.Sprintf("* created from an older template of MachineSet %s", ms.Name))
	}
	if len(stale) > 0 {
		setCondition(m, clusterv1.MachineUpToDateCondition, metav1.ConditionFalse, clusterv1.MachineNotUpToDateReason, strings.Join(stale, "\n"))
		return
	}
	setCondition(m, clusterv1.MachineUpToDateCondition, metav1.ConditionTrue, clusterv1.MachineUpToDateReason, "")
}

// templateChanged lets through MachineSets and MachineDeployments whose template (or
// spec.rollout.after) changed, not their scaling or status updates, so a template change
// reaches the Machines' UpToDate without every write of a set fanning out to all its Machines.
var templateChanged = predicate.Funcs{
	CreateFunc:  func(event.CreateEvent) bool { return false },
	DeleteFunc:  func(event.DeleteEvent) bool { return false },
	GenericFunc: func(event.GenericEvent) bool { return false },
	UpdateFunc: func(e event.UpdateEvent) bool {
		switch old := e.ObjectOld.(type) {
		case *clusterv1.MachineSet:
			n, ok := e.ObjectNew.(*clusterv1.MachineSet)
			return !ok || !equality.Semantic.DeepEqual(old.Spec.Template, n.Spec.Template)
		case *clusterv1.MachineDeployment:
			n, ok := e.ObjectNew.(*clusterv1.MachineDeployment)
			return !ok || !equality.Semantic.DeepEqual(old.Spec.Template, n.Spec.Template) ||
				!old.Spec.Rollout.After.Equal(&n.Spec.Rollout.After)
		}
		return e.ObjectOld.GetGeneration() != e.ObjectNew.GetGeneration()
	},
}

// ownedMachines maps a MachineSet to the Machines it controls, and a MachineDeployment to
// the Machines of its MachineSets (by the deployment-name label).
func (r *Reconciler) ownedMachines(ctx context.Context, o client.Object) []reconcile.Request {
	var list clusterv1.MachineList
	opts := []client.ListOption{client.InNamespace(o.GetNamespace())}
	_, isMD := o.(*clusterv1.MachineDeployment)
	if isMD {
		opts = append(opts, client.MatchingLabels{clusterv1.MachineDeploymentNameLabel: format.MustFormatValue(o.GetName())})
	}
	if err := r.Client.List(ctx, &list, opts...); err != nil {
		return nil
	}
	var out []reconcile.Request
	for i := range list.Items {
		m := &list.Items[i]
		if ref := metav1.GetControllerOf(m); isMD || (ref != nil && ref.UID == o.GetUID()) {
			out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: m.Namespace, Name: m.Name}})
		}
	}
	return out
}
