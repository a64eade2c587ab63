package sync_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/machina-dev/machina/internal/authority"
	"github.com/machina-dev/machina/internal/gate"
	"github.com/machina-dev/machina/internal/mapicond"
)

func mapiMHC(name string) *machinev1beta1.MachineHealthCheck {
	return &machinev1beta1.MachineHealthCheck{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: mapiNS},
		Spec: machinev1beta1.MachineHealthCheckSpec{
			Selector: metav1.LabelSelector{MatchLabels: map[string]string{"machine.openshift.io/cluster-api-machineset": name}},
			UnhealthyConditions: []machinev1beta1.UnhealthyCondition{
				{Type: corev1.NodeReady, Status: corev1.ConditionFalse, Timeout: metav1.Duration{Duration: 5 * time.Minute}}},
			MaxUnhealthy:       ptr.To(intstr.FromString("40%")),
			NodeStartupTimeout: &metav1.Duration{Duration: 10 * time.Minute},
		}}
}

func testMHCMirror(t *testing.T) {
	e := env.For(t)
	ctx := context.Background()
	if err := e.Client.Create(ctx, mapiMHC("health")); err != nil {
		t.Fatal(err)
	}
	e.Eventually(60*time.Second, "paused Cluster API MachineHealthCheck", func(ctx context.Context) (bool, string, error) {
		m, c := &machinev1beta1.MachineHealthCheck{}, &clusterv1.MachineHealthCheck{}
		if err := e.Client.Get(ctx, client.ObjectKey{Namespace: mapiNS, Name: "health"}, m); err != nil {
			return false, err.Error(), nil
		}
		if err := e.Client.Get(ctx, client.ObjectKey{Namespace: capiNS, Name: "health"}, c); err != nil {
			return false, err.Error(), nil
		}
		_, paused := c.Annotations[clusterv1.PausedAnnotation]
		ok := paused && mapicond.IsTrue(m.Status.Conditions, authority.SynchronizedCondition) &&
			m.Annotations[authority.MHCStatusAuthoritativeAPIAnnotation] == "MachineAPI" &&
			c.Spec.ClusterName == cluster && ptr.Deref(c.Spec.Checks.NodeStartupTimeoutSeconds, 0) == 600 &&
			len(c.Spec.Checks.UnhealthyNodeConditions) == 1
		return ok, fmt.Sprintf("paused %v spec %+v", paused, c.Spec), nil
	})
}

// A Cluster API-owned check using a feature the Machine API has no field for: its Machine API
// copy mirrors the rest (not left stale) and a ConversionWarning event names what is left out.
func testMHCClusterAPIOnlyFeatureReported(t *testing.T) {
	e := env.For(t)
	ctx := context.Background()
	capi := &clusterv1.MachineHealthCheck{ObjectMeta: metav1.ObjectMeta{Name: "ranged", Namespace: capiNS},
		Spec: clusterv1.MachineHealthCheckSpec{ClusterName: cluster,
			Selector: metav1.LabelSelector{MatchLabels: map[string]string{"pool": "x"}},
			Remediation: clusterv1.MachineHealthCheckRemediation{TriggerIf: clusterv1.MachineHealthCheckRemediationTriggerIf{
				UnhealthyInRange: "[1-3]"}}}}
	if err := e.Client.Create(ctx, capi); err != nil {
		t.Fatal(err)
	}
	m := mapiMHC("ranged")
	m.Annotations = map[string]string{authority.MHCAuthoritativeAPIAnnotation: "ClusterAPI"}
	if err := e.Client.Create(ctx, m); err != nil {
		t.Fatal(err)
	}
	e.Eventually(60*time.Second, "the rest mirrored, the range left out", func(ctx context.Context) (bool, string, error) {
		if err := e.Client.Get(ctx, client.ObjectKeyFromObject(m), m); err != nil {
			return false, err.Error(), nil
		}
		ok := mapicond.IsTrue(m.Status.Conditions, authority.SynchronizedCondition) &&
			m.Spec.Selector.MatchLabels["pool"] == "x" && len(m.Spec.UnhealthyConditions) == 0 &&
			(m.Spec.MaxUnhealthy == nil || m.Spec.MaxUnhealthy.String() != "40%") // the Cluster API copy's, not the one created
		return ok, fmt.Sprintf("%+v %+v", mapicond.Get(m.Status.Conditions, authority.SynchronizedCondition), m.Spec), nil
	})
	e.Eventually(30*time.Second, "a ConversionWarning naming the range", func(ctx context.Context) (bool, string, error) {
		var events corev1.EventList
		if err := e.Client.List(ctx, &events, client.InNamespace(mapiNS), client.MatchingFields{"involvedObject.name": "ranged"}); err != nil {
			return false, err.Error(), nil
		}
		for _, ev := range events.Items {
			if ev.Reason == "ConversionWarning" && strings.Contains(ev.Message, "spec.remediation.triggerIf.unhealthyInRange") {
				return true, "", nil
			}
		}
		return false, fmt.Sprintf("%d events", len(events.Items)), nil
	})
}

// A paused Cluster API MachineHealthCheck left over from an earlier check of the same name
// does not make a new Machine API check the Cluster API's: the new one is MachineAPI-owned
// and the leftover becomes its mirror.
func testMHCLeftoverPausedMirror(t *testing.T) {
	e := env.For(t)
	ctx := context.Background()
	leftover := &clusterv1.MachineHealthCheck{ObjectMeta: metav1.ObjectMeta{Name: "leftover", Namespace: capiNS,
		Annotations: map[string]string{clusterv1.PausedAnnotation: ""}},
		Spec: clusterv1.MachineHealthCheckSpec{ClusterName: cluster,
			Selector: metav1.LabelSelector{MatchLabels: map[string]string{"pool": "old"}}}}
	if err := e.Client.Create(ctx, leftover); err != nil {
		t.Fatal(err)
	}
	if err := e.Client.Create(ctx, mapiMHC("leftover")); err != nil {
		t.Fatal(err)
	}
	e.Eventually(60*time.Second, "MachineAPI-owned, the leftover its paused mirror", func(ctx context.Context) (bool, string, error) {
		m, c := &machinev1beta1.MachineHealthCheck{}, &clusterv1.MachineHealthCheck{}
		if err := e.Client.Get(ctx, client.ObjectKey{Namespace: mapiNS, Name: "leftover"}, m); err != nil {
			return false, err.Error(), nil
		}
		if err := e.Client.Get(ctx, client.ObjectKeyFromObject(leftover), c); err != nil {
			return false, err.Error(), nil
		}
		ok := m.Annotations[authority.MHCStatusAuthoritativeAPIAnnotation] == "MachineAPI" && gate.HasPausedAnnotation(c) &&
			c.Spec.Selector.MatchLabels["machine.openshift.io/cluster-api-machineset"] == "leftover"
		return ok, fmt.Sprintf("authority %q capi selector %v", m.Annotations[authority.MHCStatusAuthoritativeAPIAnnotation], c.Spec.Selector.MatchLabels), nil
	})
}

// A check requested for the Cluster API: its Cluster API copy is active and held by the sync
// finalizer. Deleting it deletes the Machine API copy too, and neither stays Terminating (the
// sync kept converting the deleting check onto its copy and never let it go).
func testMHCClusterAPIAuthoritativeDeleted(t *testing.T) {
	e := env.For(t)
	ctx := context.Background()
	m := mapiMHC("capi-owned")
	m.Annotations = map[string]string{authority.MHCAuthoritativeAPIAnnotation: "ClusterAPI"}
	if err := e.Client.Create(ctx, m); err != nil {
		t.Fatal(err)
	}
	c := &clusterv1.MachineHealthCheck{}
	e.Eventually(60*time.Second, "an active Cluster API check the sync holds", func(ctx context.Context) (bool, string, error) {
		if err := e.Client.Get(ctx, client.ObjectKey{Namespace: capiNS, Name: "capi-owned"}, c); err != nil {
			return false, err.Error(), nil
		}
		return !gate.HasPausedAnnotation(c) && slices.Contains(c.Finalizers, authority.SyncFinalizer),
			fmt.Sprintf("annotations %v finalizers %v", c.Annotations, c.Finalizers), nil
	})
	if err := e.Client.Delete(ctx, c); err != nil {
		t.Fatal(err)
	}
	e.Eventually(60*time.Second, "both copies gone", func(ctx context.Context) (bool, string, error) {
		errM := e.Client.Get(ctx, client.ObjectKeyFromObject(m), &machinev1beta1.MachineHealthCheck{})
		errC := e.Client.Get(ctx, client.ObjectKeyFromObject(c), &clusterv1.MachineHealthCheck{})
		return apierrors.IsNotFound(errM) && apierrors.IsNotFound(errC), fmt.Sprintf("machine API: %v; cluster API: %v", errM, errC), nil
	})
}
