package sync_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/machina-dev/machina/internal/authority"
	"github.com/machina-dev/machina/internal/mapicond"
	"github.com/machina-dev/machina/internal/testenv"
)

// warningsSeen collects the warnings the apiserver sends a client (what kubectl prints).
type warningsSeen struct {
	mu   sync.Mutex
	list []string
}

func (w *warningsSeen) HandleWarningHeader(_ int, _ string, text string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.list = append(w.list, text)
}

func (w *warningsSeen) reset() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.list = nil
}

func (w *warningsSeen) all() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.list...)
}

// testClusterAPIMachineSetDeletedMachinesKept: a MachineSet handed to the Cluster API while its
// Machines stay with the Machine API (a mixed MachineSet: the Machines were never migrated).
// Deleting its Machine API copy removes only Machine API copies, as the admission warning says:
// the Machines the Machine API runs are let go and keep running, their instances untouched, and
// the Cluster API MachineSet keeps its Machines. A foreground deletion, which would have the
// garbage collector delete those Machines first, is refused.
func testClusterAPIMachineSetDeletedMachinesKept(t *testing.T, p platform) {
	e := env.For(t)
	ctx := context.Background()
	name := p.name("mixed")
	if err := e.Client.Create(ctx, p.machineSet(name, 2)); err != nil {
		t.Fatal(err)
	}
	machines := waitRunningMachines(t, e, name, 2)
	handMachineSetToClusterAPI(t, e, name)
	before, err := e.Cloud.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}

	ms, capiMS, err := getMS(ctx, e, name)
	if err != nil {
		t.Fatal(err)
	}
	w := &warningsSeen{}
	cfg, err := e.Lab.UserConfig("mixed-admin", "system:masters")
	if err != nil {
		t.Fatal(err)
	}
	cfg = rest.CopyConfig(cfg)
	cfg.WarningHandler = w
	admin, err := client.New(cfg, client.Options{Scheme: e.Client.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	err = admin.Delete(ctx, ms, client.PropagationPolicy(metav1.DeletePropagationForeground))
	if err == nil || !strings.Contains(err.Error(), "propagationPolicy: Forbidden: MachineSet "+name+" is a mirror of an authoritative Cluster API MachineSet") {
		t.Fatalf("a foreground deletion must be refused: %v", err)
	}
	w.reset() // the refused request was warned about too
	if err := admin.Delete(ctx, ms); err != nil {
		t.Fatal(err)
	}
	want := "deleting it removes only Machine API copies; the cluster.x-k8s.io MachineSet and its Machines keep running, " +
		"and its Machines the Machine API still runs stay as Machine API Machines without a MachineSet"
	if ws := w.all(); len(ws) != 1 || !strings.Contains(ws[0], want) {
		t.Errorf("warnings %q, want one saying %q", ws, want)
	}

	// The MachineSet goes only once its Machines no longer name it as their owner, so the
	// garbage collector has nothing of it to delete.
	e.Eventually(60*time.Second, "Machine API MachineSet gone, its Machines let go", func(ctx context.Context) (bool, string, error) {
		errMS := e.Client.Get(ctx, client.ObjectKey{Namespace: mapiNS, Name: name}, &machinev1beta1.MachineSet{})
		desc := fmt.Sprintf("MachineSet: %v", errMS)
		kept := 0
		for _, uid := range machines {
			m := &machinev1beta1.Machine{}
			if err := e.Client.Get(ctx, client.ObjectKey{Namespace: mapiNS, Name: uid.name}, m); err != nil {
				desc += fmt.Sprintf("; %s: %v", uid.name, err)
				continue
			}
			desc += fmt.Sprintf("; %s deleting %v owner %v", m.Name, !m.DeletionTimestamp.IsZero(), metav1.GetControllerOf(m))
			if m.UID == uid.uid && m.DeletionTimestamp.IsZero() && metav1.GetControllerOf(m) == nil {
				kept++
			}
		}
		return apierrors.IsNotFound(errMS) && kept == len(machines), desc, nil
	})

	// The Cluster API side is untouched: the MachineSet keeps running with both Machines.
	c := &clusterv1.MachineSet{}
	if err := e.Client.Get(ctx, client.ObjectKeyFromObject(capiMS), c); err != nil || !c.DeletionTimestamp.IsZero() || c.UID != capiMS.UID {
		t.Fatalf("the Cluster API MachineSet must keep running: %v %+v", err, c.ObjectMeta)
	}
	if controllerutil.ContainsFinalizer(c, authority.SyncFinalizer) {
		t.Errorf("sync finalizer left on the Cluster API MachineSet: %v", c.Finalizers)
	}
	for _, m := range machines {
		cm, err := getCAPI(ctx, e, m.name)
		if err != nil || !cm.DeletionTimestamp.IsZero() {
			t.Errorf("Cluster API Machine %s must stay: %v", m.name, err)
			continue
		}
		if ref := metav1.GetControllerOf(cm); ref == nil || ref.UID != capiMS.UID {
			t.Errorf("Cluster API Machine %s left the Cluster API MachineSet: %v", m.name, cm.OwnerReferences)
		}
		mm, err := getMAPI(ctx, e, m.name)
		if err != nil || mm.Status.Phase == nil || *mm.Status.Phase != "Running" {
			t.Errorf("Machine API Machine %s must keep running: %v %+v", m.name, err, mm)
		}
	}
	after, err := e.Cloud.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if after.InstancesCreated != before.InstancesCreated || after.Operations["TerminateInstances"].Calls != before.Operations["TerminateInstances"].Calls {
		t.Errorf("instances launched %d, terminate calls %d while the Machine API MachineSet was deleted",
			after.InstancesCreated-before.InstancesCreated, after.Operations["TerminateInstances"].Calls-before.Operations["TerminateInstances"].Calls)
	}
}

type machineID struct {
	name string
	uid  types.UID
}

// waitRunningMachines waits until the MachineSet has n Running Machine API Machines, each with
// a Cluster API copy, and returns them.
func waitRunningMachines(t *testing.T, e *testenv.Env, set string, n int) []machineID {
	t.Helper()
	var out []machineID
	e.Eventually(120*time.Second, fmt.Sprintf("%d running mirrored Machines", n), func(ctx context.Context) (bool, string, error) {
		m, c, desc := countBoth(ctx, e, set)
		var list machinev1beta1.MachineList
		if err := e.Client.List(ctx, &list, client.InNamespace(mapiNS), client.MatchingLabels{"machine.openshift.io/cluster-api-machineset": set}); err != nil {
			return false, err.Error(), nil
		}
		out = out[:0]
		for _, x := range list.Items {
			if x.Status.Phase != nil && *x.Status.Phase == "Running" {
				out = append(out, machineID{x.Name, x.UID})
			}
		}
		return m == n && c == n && len(out) == n, fmt.Sprintf("%s, %d running", desc, len(out)), nil
	})
	return out
}

// handMachineSetToClusterAPI moves the MachineSet alone (not its Machines) to the Cluster API,
// ending where the migration controller ends a handover: the request in spec, the authority in
// status (written as machina, which alone may), and the Cluster API copy unpaused by the sync.
// The migration controller itself does not run in this suite.
func handMachineSetToClusterAPI(t *testing.T, e *testenv.Env, name string) {
	t.Helper()
	ctx := context.Background()
	ms, _, err := getMS(ctx, e, name)
	if err != nil {
		t.Fatal(err)
	}
	base := ms.DeepCopy()
	ms.Spec.AuthoritativeAPI = machinev1beta1.MachineAuthorityClusterAPI
	if err := e.Client.Patch(ctx, ms, client.MergeFrom(base)); err != nil {
		t.Fatal(err)
	}
	// Through Migrating, as the API requires.
	for _, a := range []machinev1beta1.MachineAuthority{machinev1beta1.MachineAuthorityMigrating, machinev1beta1.MachineAuthorityClusterAPI} {
		base = ms.DeepCopy()
		ms.Status.AuthoritativeAPI = a
		ms.Status.SynchronizedAPI = map[bool]machinev1beta1.SynchronizedAPI{true: machinev1beta1.ClusterAPISynchronized,
			false: machinev1beta1.MachineAPISynchronized}[a == machinev1beta1.MachineAuthorityClusterAPI]
		if err := e.ManagerClient().Status().Patch(ctx, ms, client.MergeFrom(base)); err != nil {
			t.Fatal(err)
		}
	}
	// The migration controller (not running here) ends a handover by unpausing the new side.
	_, c, err := getMS(ctx, e, name)
	if err != nil {
		t.Fatal(err)
	}
	cbase := c.DeepCopy()
	delete(c.Annotations, clusterv1.PausedAnnotation)
	if err := e.ManagerClient().Patch(ctx, c, client.MergeFrom(cbase)); err != nil {
		t.Fatal(err)
	}
	e.Eventually(60*time.Second, "Cluster API MachineSet stays unpaused, Machine API copy synchronised from it", func(ctx context.Context) (bool, string, error) {
		m, c, err := getMS(ctx, e, name)
		if err != nil {
			return false, err.Error(), nil
		}
		_, paused := c.Annotations[clusterv1.PausedAnnotation]
		return !paused && mapicond.IsTrue(m.Status.Conditions, authority.SynchronizedCondition), fmt.Sprint(c.Annotations, " ", mapiCond(m.Status.Conditions)), nil
	})
}
