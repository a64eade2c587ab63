package migration_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/machina-dev/machina/internal/authority"
	"github.com/machina-dev/machina/internal/testenv"
)

// testFailedMachineRemediatedAtOnce: a Machine API-owned Machine that fails for good (its
// instance type is one the cloud does not know: errorReason InvalidConfiguration, no instance,
// no Node) under a Cluster API-owned health check whose node startup timeout is half an hour.
// The failure reaches the Machine's paused Cluster API mirror
// (status.deprecated.v1beta1.failureReason), the check finds the Machine unhealthy at once,
// and the sync carries the remediation to the Machine API copy: the Machine is replaced long
// before the timeout would have let the check act.
func testFailedMachineRemediatedAtOnce(t *testing.T, e *testenv.Env) {
	ctx := context.Background()
	const set = "failing"
	selector := map[string]string{"machine.openshift.io/cluster-api-machineset": set}
	check := healthCheck(set, selector)
	check.Spec.NodeStartupTimeout = &metav1.Duration{Duration: 30 * time.Minute}
	check.Annotations = map[string]string{authority.MHCAuthoritativeAPIAnnotation: string(machinev1beta1.MachineAuthorityClusterAPI)}
	if err := e.Client.Create(ctx, check); err != nil {
		t.Fatal(err)
	}
	waitCheckSettled(t, e, set, machinev1beta1.MachineAuthorityClusterAPI, "")

	ms := machineSet(set, 1)
	var spec map[string]any
	if err := json.Unmarshal(ms.Spec.Template.Spec.ProviderSpec.Value.Raw, &spec); err != nil {
		t.Fatal(err)
	}
	spec["instanceType"] = "x9.huge" // valid to admission and the conversion; unknown to the cloud
	raw, err := json.Marshal(spec)
	if err != nil {
		t.Fatal(err)
	}
	ms.Spec.Template.Spec.ProviderSpec.Value = &runtime.RawExtension{Raw: raw}
	if err := e.Client.Create(ctx, ms); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = e.Client.Delete(context.Background(), ms)
		_ = e.Client.Delete(context.Background(), check)
	})

	var failed *machinev1beta1.Machine
	e.Eventually(90*time.Second, "a Machine of "+set+" Failed", func(ctx context.Context) (bool, string, error) {
		var list machinev1beta1.MachineList
		if err := e.Client.List(ctx, &list, client.InNamespace(mapiNS), client.MatchingLabels(selector)); err != nil {
			return false, err.Error(), nil
		}
		for i, m := range list.Items {
			if ptr.Deref(m.Status.Phase, "") == machinev1beta1.PhaseFailed {
				failed = &list.Items[i]
				return ptr.Deref(m.Status.ErrorReason, "") == machinev1beta1.InvalidConfigurationMachineError, fmt.Sprintf("%s errorReason %v", m.Name, ptr.Deref(m.Status.ErrorReason, "")), nil
			}
		}
		return false, fmt.Sprintf("%d Machines, none Failed", len(list.Items)), nil
	})
	e.Eventually(2*time.Minute, "failed Machine "+failed.Name+" remediated", func(ctx context.Context) (bool, string, error) {
		m := &machinev1beta1.Machine{}
		err := e.Client.Get(ctx, client.ObjectKeyFromObject(failed), m)
		if apierrors.IsNotFound(err) || err == nil && m.UID != failed.UID || err == nil && !m.DeletionTimestamp.IsZero() {
			return true, "", nil
		}
		return false, fmt.Sprintf("phase %v, err %v", ptr.Deref(m.Status.Phase, ""), err), nil
	})
	// The Cluster API check acted, not the paused Machine API one.
	e.Eventually(30*time.Second, "the Cluster API check's MachineMarkedUnhealthy event for "+failed.Name, func(ctx context.Context) (bool, string, error) {
		return checkEvents(t, e, capiNS, set, "MachineMarkedUnhealthy", failed.Name) > 0, "", nil
	})
	if n := checkEvents(t, e, mapiNS, set, "MachineDeleted", failed.Name); n != 0 {
		t.Errorf("the paused Machine API check deleted %s %d time(s)", failed.Name, n)
	}
}
