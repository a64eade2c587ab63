package machinehealthcheck

import (
	"context"
	"fmt"
	"strings"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/machina-dev/machina/internal/mapicond"
)

// remediate acts on one unhealthy Machine: an external remediation request when the check
// names a remediation template, else deletion when the Machine has an owner to replace it.
func (r *Reconciler) remediate(ctx context.Context, mhc *machinev1beta1.MachineHealthCheck, t target) error {
	m := t.machine
	if mhc.Spec.RemediationTemplate != nil {
		return r.requestExternal(ctx, mhc, m, t.reason)
	}
	if metav1.GetControllerOf(m) == nil {
		r.event(mhc, corev1.EventTypeWarning, "MachineNotRemediable",
			"Machine %s is unhealthy (%s) but has no owner that would replace it; not deleting it", m.Name, t.reason)
		return nil
	}
	if err := r.Client.Delete(ctx, m); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting unhealthy Machine %s: %w", m.Name, err)
	}
	r.event(mhc, corev1.EventTypeNormal, "MachineDeleted", "Deleted unhealthy Machine %s: %s", m.Name, t.reason)
	return nil
}

// requestExternal creates <Kind without Template> named after the Machine from the
// template's spec.template, owned by the Machine, unless it exists.
func (r *Reconciler) requestExternal(ctx context.Context, mhc *machinev1beta1.MachineHealthCheck, m *machinev1beta1.Machine, reason string) error {
	ref := mhc.Spec.RemediationTemplate
	tmpl := &unstructured.Unstructured{}
	tmpl.SetGroupVersionKind(schema.FromAPIVersionAndKind(ref.APIVersion, ref.Kind))
	ns := ref.Namespace
	if ns == "" {
		ns = mhc.Namespace
	}
	if err := r.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: ref.Name}, tmpl); err != nil {
		msg := fmt.Sprintf("spec.remediationTemplate: cannot read %s %s/%s: %v", ref.Kind, ns, ref.Name, err)
		mapicond.Set(&mhc.Status.Conditions, machinev1beta1.Condition{Type: machinev1beta1.ExternalRemediationTemplateAvailable,
			Status: corev1.ConditionFalse, Reason: "ExternalRemediationTemplateNotFound", Message: msg})
		return nil
	}
	mapicond.Set(&mhc.Status.Conditions, machinev1beta1.Condition{Type: machinev1beta1.ExternalRemediationTemplateAvailable,
		Status: corev1.ConditionTrue})
	spec, _, _ := unstructured.NestedMap(tmpl.Object, "spec", "template", "spec")
	req := &unstructured.Unstructured{Object: map[string]any{"spec": spec}}
	req.SetAPIVersion(ref.APIVersion)
	req.SetKind(strings.TrimSuffix(ref.Kind, "Template"))
	req.SetNamespace(m.Namespace)
	req.SetName(m.Name)
	req.SetAnnotations(map[string]string{"machine.openshift.io/remediation-reason": reason})
	req.SetOwnerReferences([]metav1.OwnerReference{*metav1.NewControllerRef(m, machinev1beta1.GroupVersion.WithKind("Machine"))})
	err := r.Client.Create(ctx, req)
	switch {
	case apierrors.IsAlreadyExists(err):
		return nil
	case err != nil:
		return fmt.Errorf("creating %s for Machine %s: %w", req.GetKind(), m.Name, err)
	}
	r.event(mhc, corev1.EventTypeNormal, "ExternalRemediationRequested",
		"Created %s %s for unhealthy Machine %s: %s", req.GetKind(), req.GetName(), m.Name, reason)
	return nil
}

// forgetRemediation removes the external remediation request of a Machine that is healthy.
func (r *Reconciler) forgetRemediation(ctx context.Context, mhc *machinev1beta1.MachineHealthCheck, m *machinev1beta1.Machine) error {
	ref := mhc.Spec.RemediationTemplate
	if ref == nil {
		return nil
	}
	req := &unstructured.Unstructured{}
	req.SetAPIVersion(ref.APIVersion)
	req.SetKind(strings.TrimSuffix(ref.Kind, "Template"))
	req.SetNamespace(m.Namespace)
	req.SetName(m.Name)
	if err := r.Client.Delete(ctx, req); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("removing %s of healthy Machine %s: %w", req.GetKind(), m.Name, err)
	}
	r.event(mhc, corev1.EventTypeNormal, "ExternalRemediationRemoved", "Machine %s is healthy again; removed %s %s", m.Name, req.GetKind(), m.Name)
	return nil
}

func cut(key string) (string, string, bool) {
	ns, name, ok := strings.Cut(key, "/")
	return ns, name, ok && ns != "" && name != ""
}
