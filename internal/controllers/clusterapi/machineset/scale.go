package machineset

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kerrors "k8s.io/apimachinery/pkg/util/errors"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/machina-dev/machina/internal/controllers/clusterapi/internal/setctl"
	"github.com/machina-dev/machina/internal/controllers/internal/provisioncap"
	"github.com/machina-dev/machina/internal/controllers/internal/scaledown"
	"github.com/machina-dev/machina/internal/events"
	"github.com/machina-dev/machina/internal/patch"
)

// scale creates or deletes Machines so that the Machines not being deleted number
// spec.replicas. Nothing happens while spec.replicas is unset.
func (r *Reconciler) scale(ctx context.Context, ms *clusterv1.MachineSet, machines []*clusterv1.Machine) error {
	if ms.Spec.Replicas == nil {
		return nil
	}
	var active []*clusterv1.Machine
	for _, m := range machines {
		if m.DeletionTimestamp.IsZero() {
			active = append(active, m)
		}
	}
	want := int(*ms.Spec.Replicas)
	key := client.ObjectKeyFromObject(ms)
	switch diff := want - len(active); {
	case diff > 0:
		if _, ok := ms.Annotations[clusterv1.DisableMachineCreateAnnotation]; ok {
			return nil // an old MachineSet of a MachineDeployment: the new one makes up for it
		}
		// A MachineDeployment's limit reaches its MachineSets with its other annotations.
		n := provisioncap.ForSet(r.Recorder, ms, active, func(m *clusterv1.Machine) bool { return !m.Status.NodeRef.IsDefined() && !failed(m) }, diff)
		if n == 0 {
			return nil
		}
		infra, boot, err := r.readTemplates(ctx, ms)
		if err != nil {
			return err
		}
		errs := parallel(n, func(int) error { return r.createMachine(ctx, ms, infra, boot) })
		if created := n - len(errs); created > 0 {
			events.Eventf(r.Recorder, ms, corev1.EventTypeNormal, "SuccessfulCreate", "Created %d Machine(s) from %s %s%s", created,
				infra.ref.Kind, infra.ref.Name, provisioncap.Waiting(diff-n, ms.Annotations))
		}
		if len(errs) > 0 {
			return fmt.Errorf("%d of %d Machine creations failed: %w", len(errs), n, kerrors.NewAggregate(errs))
		}
	case diff < 0:
		victims := chooseVictims(active, -diff, ms.Spec.Deletion.Order)
		errs := parallel(len(victims), func(i int) error {
			r.expect.expectDelete(key, victims[i].Name)
			err := r.Client.Delete(ctx, victims[i])
			if err != nil {
				r.expect.observeDelete(key, victims[i].Name)
			}
			if apierrors.IsNotFound(err) {
				return nil
			}
			return err
		})
		names := make([]string, len(victims))
		for i, v := range victims {
			names[i] = v.Name
		}
		events.Eventf(r.Recorder, ms, corev1.EventTypeNormal, "SuccessfulDelete", "Deleted Machine(s) %s", setctl.Summarise(names))
		if len(errs) > 0 {
			return fmt.Errorf("deleting Machines: %w", kerrors.NewAggregate(errs))
		}
	}
	return nil
}

// deletePriority ranks how strongly a Machine should go first on scale-down (lower goes
// first): marked with the delete-machine annotation; unhealthy (a failed health check, a
// terminal failure, an unhealthy Node); and, for the Random order only, not ready yet.
func deletePriority(m *clusterv1.Machine, order clusterv1.MachineSetDeletionOrder) int {
	if _, ok := m.Annotations[clusterv1.DeleteMachineAnnotation]; ok {
		return 0
	}
	if isFalse(m, clusterv1.MachineHealthCheckSucceededCondition) || isFalse(m, clusterv1.MachineNodeHealthyCondition) || failed(m) {
		return 1
	}
	if order != clusterv1.NewestMachineSetDeletionOrder && order != clusterv1.OldestMachineSetDeletionOrder &&
		(!m.Status.NodeRef.IsDefined() || !meta.IsStatusConditionTrue(m.Status.Conditions, clusterv1.MachineReadyCondition)) {
		return 2
	}
	return 3
}

// chooseVictims picks n Machines to delete: by priority, then by the deletion order
// (Random by default; Newest or Oldest by creation time, the name breaking ties).
func chooseVictims(machines []*clusterv1.Machine, n int, order clusterv1.MachineSetDeletionOrder) []*clusterv1.Machine {
	return scaledown.Choose(machines, n, scaledown.Order(order), func(m *clusterv1.Machine) int { return deletePriority(m, order) })
}

func isFalse(m *clusterv1.Machine, t string) bool {
	return meta.IsStatusConditionFalse(m.Status.Conditions, t)
}

// failed reports a terminal failure surfaced by the Machine controller.
func failed(m *clusterv1.Machine) bool {
	d := m.Status.Deprecated
	return d != nil && d.V1Beta1 != nil && (d.V1Beta1.FailureReason != nil || d.V1Beta1.FailureMessage != nil)
}

// remediate deletes the Machines a MachineHealthCheck handed to their owner
// (OwnerRemediated=False while HealthCheckSucceeded=False), first recording on each that the
// MachineSet is deleting it. The replacements come from the scale step.
func (r *Reconciler) remediate(ctx context.Context, ms *clusterv1.MachineSet, machines []*clusterv1.Machine) error {
	key := client.ObjectKeyFromObject(ms)
	var errs []error
	for i, m := range machines {
		c := meta.FindStatusCondition(m.Status.Conditions, clusterv1.MachineOwnerRemediatedCondition)
		if c == nil || c.Status != metav1.ConditionFalse || !m.DeletionTimestamp.IsZero() ||
			!isFalse(m, clusterv1.MachineHealthCheckSucceededCondition) {
			continue
		}
		// The listed Machines are shared with the cache: work on a copy.
		m = m.DeepCopy()
		machines[i] = m
		if c.Reason != clusterv1.MachineSetMachineRemediationMachineDeletingReason {
			if _, err := patch.LockedStatus(ctx, r.Client, m, func() bool {
				return meta.SetStatusCondition(&m.Status.Conditions, metav1.Condition{Type: clusterv1.MachineOwnerRemediatedCondition,
					Status: metav1.ConditionFalse, Reason: clusterv1.MachineSetMachineRemediationMachineDeletingReason,
					Message: "Machine deletionTimestamp set by MachineSet " + ms.Name + " to remediate it", ObservedGeneration: m.Generation})
			}); err != nil {
				if !apierrors.IsNotFound(err) {
					errs = append(errs, fmt.Errorf("marking Machine %s for remediation: %w", m.Name, err))
				}
				continue
			}
		}
		r.expect.expectDelete(key, m.Name)
		if err := r.Client.Delete(ctx, m); err != nil {
			r.expect.observeDelete(key, m.Name)
			if !apierrors.IsNotFound(err) {
				errs = append(errs, fmt.Errorf("deleting unhealthy Machine %s: %w", m.Name, err))
			}
			continue
		}
		// The scale step counts it as going.
		now := metav1.Now()
		m.DeletionTimestamp = &now
		events.Eventf(r.Recorder, ms, corev1.EventTypeNormal, "MachineRemediated", "Deleted unhealthy Machine %s to replace it", m.Name)
	}
	return kerrors.NewAggregate(errs)
}
