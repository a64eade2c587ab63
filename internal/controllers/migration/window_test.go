package migration_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"path"
	"testing"
	"time"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/machina-dev/machina/internal/demo"
	"github.com/machina-dev/machina/internal/mapicond"
	"github.com/machina-dev/machina/internal/testenv"
)

// testLaunchInUnpausedWindow covers an instance the Cluster API side launches during a
// handover from the Machine API of a Machine that has none yet: its InfraMachine is unpaused
// (step 3) while the Cluster API Machine's unpause is held, and its provider launches. The
// handover then goes back to the Machine API — by a deletion that settles there, or by a
// rollback — and the Machine API copy, which never had an instance, must be given that one:
// the provider's finalizer may leave the InfraMachine only once the side that takes over names
// the instance. Deleted, the instance is terminated; rolled back, it is kept and adopted, and
// nothing else is launched. (The soak leaked such an instance once, seed 77123.)
func testLaunchInUnpausedWindow(t *testing.T, e *testenv.Env, pc platformCase) {
	for _, deleted := range []bool{true, false} {
		name := pc.name("window-rollback")
		if deleted {
			name = pc.name("window-delete")
		}
		t.Run(map[bool]string{true: "Deleted", false: "RolledBack"}[deleted], func(t *testing.T) {
			launchInWindow(t, e.For(t), pc, name, deleted)
		})
	}
}

func launchInWindow(t *testing.T, e *testenv.Env, pc platformCase, name string, deleted bool) {
	ctx := context.Background()
	secret := "late-" + name
	m := pc.machine(name, 0)
	// User data that does not exist yet: the Machine API controller stores its finalizer and
	// cannot launch, nor can the Cluster API side until the data appears.
	m.Spec.ProviderSpec.Value = withUserDataSecret(t, m.Spec.ProviderSpec.Value.Raw, secret)
	if err := e.Client.Create(ctx, m); err != nil {
		t.Fatal(err)
	}
	created := instancesCreated(t, e)
	e.Eventually(60*time.Second, "the Machine API copy holds the Machine without an instance, synchronised", func(ctx context.Context) (bool, string, error) {
		m, c, err := getBoth(ctx, e, name)
		if err != nil {
			return false, err.Error(), nil
		}
		ok := m.Status.AuthoritativeAPI == machinev1beta1.MachineAuthorityMachineAPI && m.Spec.ProviderID == nil &&
			len(m.Finalizers) > 0 && m.Status.SynchronizedGeneration == m.Generation && mapicond.IsTrue(m.Status.Conditions, "Synchronized")
		return ok, fmt.Sprintf("%s; Synchronized %s at %d/%d", describeMachine(m, c), cond(m, "Synchronized"), m.Status.SynchronizedGeneration, m.Generation), nil
	})
	c := &clusterv1.Machine{}
	if err := e.Client.Get(ctx, client.ObjectKey{Namespace: "openshift-cluster-api", Name: name}, c); err != nil {
		t.Fatal(err)
	}
	steps := infraCrashSteps(e, pc.provider, name, c.Spec.InfrastructureRef.Name, machinev1beta1.MachineAuthorityClusterAPI)
	lift := steps[2].hold.apply(e) // the Cluster API Machine stays paused; its InfraMachine is not
	defer lift()
	request(t, e, name, machinev1beta1.MachineAuthorityClusterAPI)
	e.Eventually(120*time.Second, "the InfraMachine unpaused, the Cluster API Machine held", func(ctx context.Context) (bool, string, error) {
		m, c, in, err := getAll(ctx, e, pc.provider, name)
		if err != nil {
			return false, err.Error(), nil
		}
		return infraStep(machinev1beta1.MachineAuthorityClusterAPI, m, c, in) >= 3, describeMachine(m, c) + "; " + in.String(), nil
	})
	copyUserData(t, e, pc, secret)
	var providerID string
	e.Eventually(120*time.Second, "the provider launched and recorded an instance", func(ctx context.Context) (bool, string, error) {
		_, c, in, err := getAll(ctx, e, pc.provider, name)
		if err != nil {
			return false, err.Error(), nil
		}
		providerID = in.providerID
		return providerID != "", describeMachine(&machinev1beta1.Machine{}, c) + "; " + in.String(), nil
	})
	t.Logf("the Cluster API side launched %s while the handover was held", providerID)
	if deleted {
		if err := e.Client.Delete(ctx, &machinev1beta1.Machine{ObjectMeta: metav1.ObjectMeta{Namespace: "openshift-machine-api", Name: name}}); err != nil {
			t.Fatal(err)
		}
	} else {
		request(t, e, name, machinev1beta1.MachineAuthorityMachineAPI)
	}
	lift()
	if deleted {
		e.Eventually(120*time.Second, "both copies gone and the instance terminated", func(ctx context.Context) (bool, string, error) {
			errM := e.Client.Get(ctx, client.ObjectKey{Namespace: "openshift-machine-api", Name: name}, &machinev1beta1.Machine{})
			errC := e.Client.Get(ctx, client.ObjectKey{Namespace: "openshift-cluster-api", Name: name}, &clusterv1.Machine{})
			alive := instanceAlive(ctx, e, providerID)
			return apierrors.IsNotFound(errM) && apierrors.IsNotFound(errC) && !alive,
				fmt.Sprintf("Machine API copy: %v; Cluster API copy: %v; instance %s alive %v", errM, errC, providerID, alive), nil
		})
		return
	}
	e.Eventually(120*time.Second, "rolled back, the Machine API copy naming the instance", func(ctx context.Context) (bool, string, error) {
		m, c, err := getBoth(ctx, e, name)
		if err != nil {
			return false, err.Error(), nil
		}
		ok := m.Status.AuthoritativeAPI == machinev1beta1.MachineAuthorityMachineAPI && ptr.Deref(m.Spec.ProviderID, "") == providerID &&
			instanceAlive(ctx, e, providerID)
		return ok, describeMachine(m, c), nil
	})
	time.Sleep(3 * time.Second) // a few passes of the Machine API controller: it adopts, launches nothing
	if n := instancesCreated(t, e); n != created+1 {
		t.Fatalf("one Machine, %d instances launched", n-created)
	}
	if err := e.Client.Delete(ctx, &machinev1beta1.Machine{ObjectMeta: metav1.ObjectMeta{Namespace: "openshift-machine-api", Name: name}}); err != nil {
		t.Fatal(err)
	}
	e.Eventually(120*time.Second, "deleted, the instance terminated", func(ctx context.Context) (bool, string, error) {
		alive := instanceAlive(ctx, e, providerID)
		return !alive, fmt.Sprintf("instance %s alive %v", providerID, alive), nil
	})
}

// withUserDataSecret returns the providerSpec raw with its userDataSecret named name (the
// field has that name on every platform's providerSpec).
func withUserDataSecret(t *testing.T, raw []byte, name string) *runtime.RawExtension {
	t.Helper()
	var spec map[string]any
	if err := json.Unmarshal(raw, &spec); err != nil {
		t.Fatal(err)
	}
	spec["userDataSecret"] = map[string]any{"name": name}
	out, err := json.Marshal(spec)
	if err != nil {
		t.Fatal(err)
	}
	return &runtime.RawExtension{Raw: out}
}

// copyUserData creates the user data Secret name in the Machine API namespace, a copy of the
// demo's, and the bootstrap data Secret the sync makes of it in the Cluster API namespace.
func copyUserData(t *testing.T, e *testenv.Env, pc platformCase, name string) {
	t.Helper()
	ctx := context.Background()
	src := &corev1.Secret{}
	if err := e.Client.Get(ctx, client.ObjectKey{Namespace: "openshift-machine-api", Name: demo.UserDataSecret}, src); err != nil {
		t.Fatal(err)
	}
	data := map[string][]byte{"value": src.Data["userData"]}
	if bytes.Contains(src.Data["userData"], []byte(`"ignition"`)) {
		data["format"] = []byte("ignition")
	}
	for _, s := range []*corev1.Secret{
		{ObjectMeta: metav1.ObjectMeta{Namespace: "openshift-machine-api", Name: name}, Data: src.Data},
		{ObjectMeta: metav1.ObjectMeta{Namespace: "openshift-cluster-api", Name: name,
			Labels: map[string]string{"cluster.x-k8s.io/cluster-name": pc.cluster}}, Data: data},
	} {
		// The sync may have copied the Machine API one to the Cluster API namespace already
		// (the bootstrap Secret CAPA reads on AWS): the same data.
		err := e.Client.Create(ctx, s)
		if synced := apierrors.IsAlreadyExists(err) && s.Namespace == "openshift-cluster-api"; err != nil && !synced {
			t.Fatal(err)
		}
	}
}

// instanceAlive reports whether the instance of providerID is pending or running.
func instanceAlive(ctx context.Context, e *testenv.Env, providerID string) bool {
	inst, err := e.Cloud.GetInstance(ctx, path.Base(providerID))
	return err == nil && inst.State.Alive()
}
