package sim_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/machina-dev/machina/api/infrastructure/v1alpha1"
	"github.com/machina-dev/machina/internal/cloud/api"
	"github.com/machina-dev/machina/internal/controllers/sim/simactuator"
)

// What the simulated Machine API actuator records, beyond what every platform's Machine
// controller does (TestMachineAPI in internal/controllers/machineapi): the instance it launches
// carries the Machine's UID as its client token and the actuator's tags, and the Machine gets
// the instance in its providerStatus and the instance-type, region and zone labels.
func testActuatorRecordsInstance(t *testing.T) {
	e := env.For(t)
	ctx := context.Background()
	m := &machinev1beta1.Machine{
		ObjectMeta: metav1.ObjectMeta{Name: "actuator", Namespace: ns},
		Spec:       machinev1beta1.MachineSpec{ProviderSpec: machinev1beta1.ProviderSpec{Value: providerSpec("s1.large")}},
	}
	if err := e.Client.Create(ctx, m); err != nil {
		t.Fatal(err)
	}
	// NodeLink marks the Machine Running with its Node; the Machine controller's next pass
	// records the instance's running state in providerStatus.
	var st *infrav1.SimMachineProviderStatus
	e.Eventually(90*time.Second, "Machine Running, providerStatus instance running", func(ctx context.Context) (bool, string, error) {
		if err := e.Client.Get(ctx, client.ObjectKeyFromObject(m), m); err != nil {
			return false, err.Error(), nil
		}
		var err error
		if st, err = simactuator.ProviderStatus(m); err != nil {
			return false, err.Error(), nil
		}
		if st == nil {
			return false, fmt.Sprintf("phase %q, no providerStatus", ptr.Deref(m.Status.Phase, "")), nil
		}
		return ptr.Deref(m.Status.Phase, "") == machinev1beta1.PhaseRunning && st.InstanceState == string(api.StateRunning),
			fmt.Sprintf("phase %q, providerStatus instance %q state %q", ptr.Deref(m.Status.Phase, ""), st.InstanceID, st.InstanceState), nil
	})

	insts := e.InstancesTagged(simactuator.TagMachineUID, string(m.UID))
	if len(insts) != 1 {
		t.Fatalf("%d instances tagged with the Machine's UID, want 1: %+v", len(insts), insts)
	}
	inst := insts[0]
	if st.InstanceID != inst.InstanceID || m.Spec.ProviderID == nil || *m.Spec.ProviderID != inst.ProviderID {
		t.Errorf("providerStatus instance %q, providerID %v; the instance is %s (%s)", st.InstanceID, m.Spec.ProviderID, inst.InstanceID, inst.ProviderID)
	}
	if inst.ClientToken != string(m.UID) {
		t.Errorf("client token %q, want the Machine's UID %s", inst.ClientToken, m.UID)
	}
	if inst.Tags[simactuator.TagMachine] != ns+"/actuator" || inst.Tags[simactuator.TagAPI] != machinev1beta1.GroupName {
		t.Errorf("instance tags %v", inst.Tags)
	}
	for label, want := range map[string]string{
		simactuator.LabelInstanceType: "s1.large", simactuator.LabelRegion: "sim-east-1", simactuator.LabelZone: "sim-east-1a",
	} {
		if m.Labels[label] != want {
			t.Errorf("label %s = %q, want %q (labels %v)", label, m.Labels[label], want, m.Labels)
		}
	}

	if err := e.Client.Delete(ctx, m); err != nil {
		t.Fatal(err)
	}
	e.Eventually(60*time.Second, "Machine deleted", func(ctx context.Context) (bool, string, error) {
		err := e.Client.Get(ctx, client.ObjectKeyFromObject(m), &machinev1beta1.Machine{})
		return apierrors.IsNotFound(err), fmt.Sprint(err), nil
	})
}
