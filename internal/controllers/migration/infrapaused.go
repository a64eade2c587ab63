package migration

import (
	"context"
	"fmt"
	"slices"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/machina-dev/machina/internal/authority"
	"github.com/machina-dev/machina/internal/patch"
)

// infraPaused reports whether the InfraMachine's provider has acknowledged the pause. The
// provider's controller is the one that launches instances, so a handover away from the
// Cluster API waits for it as well as for the Machine controller: otherwise a launch it has
// in flight could finish after the Machine API took over and leave a second instance.
//
// The Cluster API contract has providers report a Paused condition in status.conditions
// (with observedGeneration in the v1beta2 form, without it in the v1beta1 form CAPA v2
// writes). A provider that has never stored its finalizer has never launched anything, so
// an InfraMachine without the condition counts as paused only then.
func (s *machineSubject) infraPaused(ctx context.Context, c client.Reader) (bool, string, error) {
	if s.infra == nil {
		return true, "", nil
	}
	u, err := s.fullInfra(ctx, c)
	if err != nil {
		return false, "", client.IgnoreNotFound(err)
	}
	acted := false
	for _, f := range s.infraFinalizers {
		acted = acted || controllerutil.ContainsFinalizer(u, f)
	}
	if ok, why, err := pausedCondition(u, acted, s.infraPauseAck, s.infraOperatorAck); err != nil || !ok {
		return ok, why, err
	}
	// The instance the provider recorded (perhaps while acknowledging the pause) is the one
	// the Machine API copy is about to act on: handInstance gives it to a copy that names none;
	// a copy naming another one waits (two instances for one Machine are nobody's to pick).
	if pid := infraProviderID(u); pid != "" {
		if have := ptr.Deref(s.mapi.Spec.ProviderID, ""); have != "" && have != pid {
			return false, fmt.Sprintf("the Machine API copy names instance %s, but %s %s records %s", have, u.GetKind(), u.GetName(), pid), nil
		}
	}
	return true, "", nil
}

// fullInfra reads the whole InfraMachine, once per pass: the subject holds only its metadata,
// and its status and spec.providerID are wanted only while a handover waits on the provider
// (an uncached read). The pause check and the hand-over of the instance that follows it in
// the same pass share the read.
func (s *machineSubject) fullInfra(ctx context.Context, c client.Reader) (*unstructured.Unstructured, error) {
	if s.infraRead != nil {
		return s.infraRead, nil
	}
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(s.infraGVK)
	if err := c.Get(ctx, client.ObjectKeyFromObject(s.infra), u); err != nil {
		return nil, err
	}
	s.infraRead = u
	return u, nil
}

// infraProviderID is the instance an InfraMachine records (spec.providerID, the Cluster API
// InfraMachine contract's field).
func infraProviderID(u *unstructured.Unstructured) string {
	pid, _, _ := unstructured.NestedString(u.Object, "spec", "providerID")
	return pid
}

// handInstance gives the Machine API copy the instance the InfraMachine records, when the copy
// names none, before the provider's finalizer leaves the InfraMachine for the Machine API side:
// an instance the Cluster API side launched (while a handover from the Machine API had its
// InfraMachine unpaused) is then terminated or kept by the Machine API controller, instead
// of running on with no controller that knows it. It reports whether it wrote, and refuses
// (an error) when the copy names another instance. Callers have had the provider acknowledge
// its pause, so the InfraMachine records every instance it launched.
func (s *machineSubject) handInstance(ctx context.Context, c client.Client) (bool, error) {
	if s.infra == nil || !s.infraHeld() {
		return false, nil // its provider never acted on it: it launched nothing
	}
	u, err := s.fullInfra(ctx, c)
	if err != nil {
		return false, client.IgnoreNotFound(err)
	}
	pid := infraProviderID(u)
	switch have := ptr.Deref(s.mapi.Spec.ProviderID, ""); {
	case pid == "" || have == pid:
		return false, nil
	case have != "":
		return false, fmt.Errorf("the Machine API copy names instance %s, but %s %s records %s: keeping %s's finalizer",
			have, u.GetKind(), u.GetName(), pid, u.GetKind())
	}
	return patch.Locked(ctx, c, s.mapi, func() bool {
		s.mapi.Spec.ProviderID = ptr.To(pid)
		return true
	})
}

// infraHeld reports whether the InfraMachine carries one of its provider's finalizers.
func (s *machineSubject) infraHeld() bool {
	return slices.ContainsFunc(s.infraFinalizers, func(f string) bool { return controllerutil.ContainsFinalizer(s.infra, f) })
}

// pausedCondition reads the Paused condition of a Cluster API object in either condition
// form. acted says whether the object's controller has acted on it: then a missing
// condition is not an acknowledgement, unless the controller acknowledges by removing
// ackAnnotation (provider.Provider.PauseAckAnnotation) and has removed it, or, for a
// controller that acknowledges in no way (byOperator, provider.Provider.PauseAckByOperator),
// an operator has, with authority.ProviderPausedAnnotation.
func pausedCondition(u *unstructured.Unstructured, acted bool, ackAnnotation string, byOperator bool) (bool, string, error) {
	what := fmt.Sprintf("%s %s", u.GetKind(), u.GetName())
	conds, _, err := unstructured.NestedSlice(u.Object, "status", "conditions")
	if err != nil {
		return false, "", fmt.Errorf("%s: status.conditions: %w", what, err)
	}
	for _, c := range conds {
		m, ok := c.(map[string]any)
		if !ok || m["type"] != clusterv1.PausedCondition {
			continue
		}
		if m["status"] != "True" {
			return false, what + " does not report Paused=True yet", nil
		}
		if g, ok := m["observedGeneration"].(int64); ok && g < u.GetGeneration() {
			return false, fmt.Sprintf("%s reports Paused=True for generation %d, not %d", what, g, u.GetGeneration()), nil
		}
		return true, "", nil
	}
	_, operatorAck := u.GetAnnotations()[authority.ProviderPausedAnnotation]
	switch _, marked := u.GetAnnotations()[ackAnnotation]; {
	case !acted:
		return true, "", nil
	case byOperator && operatorAck:
		return true, "", nil
	case byOperator:
		return false, fmt.Sprintf("%s is paused, but its provider reports no Paused condition: annotate it %s "+
			"once its provider's controller no longer acts on it (docs/migration.md)", what, authority.ProviderPausedAnnotation), nil
	case ackAnnotation == "":
		return false, what + " has no Paused condition yet although its provider has acted on it", nil
	case marked:
		return false, fmt.Sprintf("%s still carries %s, which its provider removes once it has seen the pause", what, ackAnnotation), nil
	}
	return true, "", nil
}
