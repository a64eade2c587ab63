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
	"k8s.io/apimachinery/pkg/types"
	kerrors "k8s.io/apimachinery/pkg/util/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/machina-dev/machina/internal/events"
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
		events.Eventf(r.Recorder, mhc, corev1.EventTypeWarning, "MachineNotRemediable",
			"Machine %s is unhealthy (%s) but has no owner that would replace it; not deleting it", m.Name, t.reason)
		return nil
	}
	if err := r.Client.Delete(ctx, m); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting unhealthy Machine %s: %w", m.Name, err)
	}
	events.Eventf(r.Recorder, mhc, corev1.EventTypeNormal, "MachineDeleted", "Deleted unhealthy Machine %s: %s", m.Name, t.reason)
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
	events.Eventf(r.Recorder, mhc, corev1.EventTypeNormal, "ExternalRemediationRequested",
		"Created %s %s for unhealthy Machine %s: %s", req.GetKind(), req.GetName(), m.Name, reason)
	return nil
}

// forgetRemediations removes the external remediation requests of targets that are no
// longer unhealthy (a Machine being deleted keeps its request, which goes with it). It lists the requests in the namespace once and deletes only those that
// exist and belong to such a Machine, rather than sending a DELETE for every healthy Machine.
func (r *Reconciler) forgetRemediations(ctx context.Context, mhc *machinev1beta1.MachineHealthCheck, targets []target) error {
	ref := mhc.Spec.RemediationTemplate
	if ref == nil {
		return nil
	}
	kind := strings.TrimSuffix(ref.Kind, "Template")
	list := &unstructured.UnstructuredList{}
	list.SetAPIVersion(ref.APIVersion)
	list.SetKind(kind + "List")
	if err := r.Client.List(ctx, list, client.InNamespace(mhc.Namespace)); err != nil {
		return fmt.Errorf("listing %s requests: %w", kind, err)
	}
	recovered := map[types.UID]*machinev1beta1.Machine{}
	for _, t := range targets {
		if !t.unhealthy && !t.deleting() {
			recovered[t.machine.UID] = t.machine
		}
	}
	var errs []error
	for i := range list.Items {
		req := &list.Items[i]
		owner := metav1.GetControllerOf(req)
		if owner == nil || owner.Kind != "Machine" || recovered[owner.UID] == nil || !req.GetDeletionTimestamp().IsZero() {
			continue
		}
		if err := r.Client.Delete(ctx, req); err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("removing %s of healthy Machine %s: %w", kind, owner.Name, err))
			continue
		}
		events.Eventf(r.Recorder, mhc, corev1.EventTypeNormal, "ExternalRemediationRemoved", "Machine %s is healthy again; removed %s %s",
			owner.Name, kind, req.GetName())
	}
	return kerrors.NewAggregate(errs)
}

func cut(key string) (string, string, bool) {
	ns, name, ok := strings.Cut(key, "/")
	return ns, name, ok && ns != "" && name != ""
}
