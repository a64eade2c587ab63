package machinehealthcheck

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/machina-dev/machina/internal/events"
	"github.com/machina-dev/machina/internal/patch"
)

// report records the verdict on the Machine (HealthCheckSucceeded) and, for an unhealthy
// Machine when remediation is allowed, asks for remediation:
// OwnerRemediated=False for its owner, or an external remediation request. A Machine that is
// healthy again loses a remediation request nobody has acted on yet. The Machine's status is
// written only when a condition changed, with optimistic locking.
func (r *Reconciler) report(ctx context.Context, mhc *clusterv1.MachineHealthCheck, t *target, allowed bool) error {
	m := t.machine
	h := patch.NewHelper(m, r.Client)
	external := mhc.Spec.Remediation.TemplateRef.IsDefined()
	if !t.unhealthy {
		setMachineCondition(m, clusterv1.MachineHealthCheckSucceededCondition, metav1.ConditionTrue, clusterv1.MachineHealthCheckSucceededReason, "")
		if c := meta.FindStatusCondition(m.Status.Conditions, clusterv1.MachineOwnerRemediatedCondition); c != nil &&
			c.Reason == clusterv1.MachineOwnerRemediatedWaitingForRemediationReason {
			meta.RemoveStatusCondition(&m.Status.Conditions, clusterv1.MachineOwnerRemediatedCondition)
		}
		if meta.FindStatusCondition(m.Status.Conditions, clusterv1.MachineExternallyRemediatedCondition) != nil {
			if err := r.forgetExternal(ctx, mhc, m); err != nil {
				return err
			}
			meta.RemoveStatusCondition(&m.Status.Conditions, clusterv1.MachineExternallyRemediatedCondition)
		}
	} else {
		setMachineCondition(m, clusterv1.MachineHealthCheckSucceededCondition, metav1.ConditionFalse, t.reason, t.message)
		switch {
		case !allowed:
			// Reported, not remediated.
		case external:
			r.requestExternal(ctx, mhc, m, t)
		case meta.FindStatusCondition(m.Status.Conditions, clusterv1.MachineOwnerRemediatedCondition) == nil:
			// The owner takes it from here (and may change the reason).
			setMachineCondition(m, clusterv1.MachineOwnerRemediatedCondition, metav1.ConditionFalse,
				clusterv1.MachineOwnerRemediatedWaitingForRemediationReason, "waiting for the owner of the Machine to remediate it")
			events.Eventf(r.Recorder, mhc, corev1.EventTypeNormal, "MachineMarkedUnhealthy", "Machine %s is unhealthy (%s): remediation by its owner requested",
				m.Name, t.message)
		}
	}
	err := h.Patch(ctx, m)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil && !apierrors.IsConflict(err) {
		return fmt.Errorf("reporting health on Machine %s: %w", m.Name, err)
	}
	return err
}

func setMachineCondition(m *clusterv1.Machine, t string, s metav1.ConditionStatus, reason, msg string) {
	meta.SetStatusCondition(&m.Status.Conditions, metav1.Condition{Type: t, Status: s, Reason: reason, Message: msg,
		ObservedGeneration: m.Generation})
}

// requestKind is the kind of the external remediation requests: the template's kind
// without the Template suffix.
func requestKind(mhc *clusterv1.MachineHealthCheck) string {
	return strings.TrimSuffix(mhc.Spec.Remediation.TemplateRef.Kind, clusterv1.TemplateSuffix)
}

// requestExternal creates the external remediation request for the Machine — named after
// it, in its namespace, owned by it, with the template's spec.template.spec — unless it
// exists, and records the outcome in the ExternallyRemediated condition.
func (r *Reconciler) requestExternal(ctx context.Context, mhc *clusterv1.MachineHealthCheck, m *clusterv1.Machine, t *target) {
	ref := mhc.Spec.Remediation.TemplateRef
	tmpl := &unstructured.Unstructured{}
	tmpl.SetAPIVersion(ref.APIVersion)
	tmpl.SetKind(ref.Kind)
	if err := r.Client.Get(ctx, client.ObjectKey{Namespace: mhc.Namespace, Name: ref.Name}, tmpl); err != nil {
		setMachineCondition(m, clusterv1.MachineExternallyRemediatedCondition, metav1.ConditionFalse,
			clusterv1.MachineExternallyRemediatedRemediationTemplateNotFoundReason,
			fmt.Sprintf("cannot read %s %s: %v", ref.Kind, ref.Name, err))
		return
	}
	spec, _, _ := unstructured.NestedMap(tmpl.Object, "spec", "template", "spec")
	if spec == nil {
		spec = map[string]any{}
	}
	req := &unstructured.Unstructured{Object: map[string]any{"spec": runtime.DeepCopyJSONValue(spec)}}
	req.SetAPIVersion(ref.APIVersion)
	req.SetKind(requestKind(mhc))
	req.SetNamespace(m.Namespace)
	req.SetName(m.Name)
	req.SetLabels(map[string]string{clusterv1.ClusterNameLabel: m.Spec.ClusterName})
	req.SetAnnotations(map[string]string{clusterv1.TemplateClonedFromNameAnnotation: ref.Name,
		clusterv1.TemplateClonedFromGroupKindAnnotation: tmpl.GroupVersionKind().GroupKind().String()})
	req.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: clusterv1.GroupVersion.String(), Kind: "Machine",
		Name: m.Name, UID: m.UID}})
	err := r.Client.Create(ctx, req)
	switch {
	case err == nil:
		events.Eventf(r.Recorder, mhc, corev1.EventTypeNormal, "ExternalRemediationRequested", "Created %s %s for unhealthy Machine %s: %s",
			req.GetKind(), req.GetName(), m.Name, t.message)
	case apierrors.IsAlreadyExists(err):
	default:
		setMachineCondition(m, clusterv1.MachineExternallyRemediatedCondition, metav1.ConditionFalse,
			clusterv1.MachineExternallyRemediatedRemediationRequestCreationFailedReason, err.Error())
		return
	}
	if c := meta.FindStatusCondition(m.Status.Conditions, clusterv1.MachineExternallyRemediatedCondition); c == nil ||
		c.Reason == clusterv1.MachineExternallyRemediatedRemediationTemplateNotFoundReason ||
		c.Reason == clusterv1.MachineExternallyRemediatedRemediationRequestCreationFailedReason {
		setMachineCondition(m, clusterv1.MachineExternallyRemediatedCondition, metav1.ConditionFalse,
			clusterv1.MachineExternallyRemediatedWaitingForRemediationReason,
			fmt.Sprintf("waiting for the external remediation controller to act on %s %s", req.GetKind(), req.GetName()))
	}
}

// forgetExternal deletes the external remediation request of a Machine that is healthy.
func (r *Reconciler) forgetExternal(ctx context.Context, mhc *clusterv1.MachineHealthCheck, m *clusterv1.Machine) error {
	if !mhc.Spec.Remediation.TemplateRef.IsDefined() {
		return nil
	}
	req := &unstructured.Unstructured{}
	req.SetAPIVersion(mhc.Spec.Remediation.TemplateRef.APIVersion)
	req.SetKind(requestKind(mhc))
	req.SetNamespace(m.Namespace)
	req.SetName(m.Name)
	if err := r.Client.Delete(ctx, req); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("removing %s of healthy Machine %s: %w", req.GetKind(), m.Name, err)
	}
	events.Eventf(r.Recorder, mhc, corev1.EventTypeNormal, "ExternalRemediationRemoved", "Machine %s is healthy again; removed %s %s", m.Name, req.GetKind(), m.Name)
	return nil
}
