package sync_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/machina-dev/machina/internal/authority"
	"github.com/machina-dev/machina/internal/gate"
	"github.com/machina-dev/machina/internal/mapicond"
	"github.com/machina-dev/machina/internal/testenv"
)

// testGateDecidesWhileSyncHeld: machina's Machine API controllers decide an empty
// status.authoritativeAPI from the spec themselves, as machine-api-operator's do, in the
// namespace the sync mirrors too and with the sync running in the same process: they never
// wait for the sync. The sync's own decision is held (the apiserver refuses, for this
// Machine, any status write carrying status.synchronizedAPI, which only the sync's decision
// writes), and the Machine is still decided and provisioned.
func testGateDecidesWhileSyncHeld(t *testing.T, p platform) {
	e := env.For(t)
	ctx := context.Background()
	name := p.name("gate-decides")
	lift := testenv.Hold{What: "the sync's authority decision for " + name, Group: "machine.openshift.io", Resource: "machines/status",
		Deny: fmt.Sprintf("object.metadata.name == %q && has(object.status) && has(object.status.synchronizedAPI)", name)}.Apply(e)
	defer lift()
	if err := e.Client.Create(ctx, p.mapiMachine(name, "")); err != nil {
		t.Fatal(err)
	}
	e.Eventually(90*time.Second, name+" decided by the Machine API controller and Running", func(ctx context.Context) (bool, string, error) {
		m, err := getMAPI(ctx, e, name)
		if err != nil {
			return false, err.Error(), nil
		}
		paused := mapicond.Get(m.Status.Conditions, gate.PausedCondition)
		desc := fmt.Sprintf("authority %q synchronizedAPI %q phase %v Paused %+v", m.Status.AuthoritativeAPI, m.Status.SynchronizedAPI, m.Status.Phase, paused)
		return m.Status.AuthoritativeAPI == machinev1beta1.MachineAuthorityMachineAPI && m.Status.SynchronizedAPI == "" &&
			paused != nil && paused.Status == corev1.ConditionFalse && m.Status.Phase != nil && *m.Status.Phase == machinev1beta1.PhaseRunning, desc, nil
	})
}

// testActiveCAPIMachineNotMirror: an active Cluster API Machine the sync did not make (not
// paused, no sync finalizer) is never taken over by a Machine API Machine of its name that
// the Machine API owns. Nothing is written to it or its InfraMachine; the Machine API copy
// reports the conflict (Synchronized=False and an event) until the Cluster API Machine is
// gone, and is then mirrored as usual.
func testActiveCAPIMachineNotMirror(t *testing.T, p platform) {
	e := env.For(t)
	ctx := context.Background()
	name := p.name("not-mirror")
	p.handMadeCAPIMachine(t, e, name, false, nil)
	p.waitInfraSeen(t, e, name)
	before, err := getCAPI(ctx, e, name)
	if err != nil {
		t.Fatal(err)
	}
	infraBefore, err := p.infraMachine(ctx, e, name)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Client.Create(ctx, p.mapiMachine(name, machinev1beta1.MachineAuthorityMachineAPI)); err != nil {
		t.Fatal(err)
	}
	waitNotMirror(t, e, name, authority.ClusterAPIMachineNotMirrorReason, func(ctx context.Context) ([]machinev1beta1.Condition, machinev1beta1.MachineAuthority, error) {
		m, err := getMAPI(ctx, e, name)
		if err != nil {
			return nil, "", err
		}
		return m.Status.Conditions, m.Status.AuthoritativeAPI, nil
	})
	after, err := getCAPI(ctx, e, name)
	if err != nil {
		t.Fatal(err)
	}
	if after.ResourceVersion != before.ResourceVersion || pausedAnnotated(after) || len(after.Finalizers) != 0 {
		t.Errorf("the active Cluster API Machine was written: resourceVersion %s → %s, annotations %v, finalizers %v",
			before.ResourceVersion, after.ResourceVersion, after.Annotations, after.Finalizers)
	}
	if im, err := p.infraMachine(ctx, e, name); err != nil || im.GetResourceVersion() != infraBefore.GetResourceVersion() {
		t.Errorf("its %s was written or lost: %v", p.provider.InfraMachine.Kind, err)
	}
	waitEvent(t, e, "Machine", name, authority.ClusterAPIMachineNotMirrorReason)

	// The user resolves the conflict by deleting the Cluster API Machine (and its InfraMachine):
	// the sync then makes its own paused mirror.
	for _, o := range []client.Object{after, infraBefore} {
		if err := e.Client.Delete(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	m := waitSynchronized(t, e, name)
	if m.Status.AuthoritativeAPI != machinev1beta1.MachineAuthorityMachineAPI {
		t.Errorf("authority %q, want MachineAPI", m.Status.AuthoritativeAPI)
	}
	e.Eventually(30*time.Second, "a paused mirror with the sync finalizer", func(ctx context.Context) (bool, string, error) {
		c, err := getCAPI(ctx, e, name)
		if err != nil {
			return false, err.Error(), nil
		}
		return c.UID != before.UID && pausedAnnotated(c) && controllerutil.ContainsFinalizer(c, authority.SyncFinalizer),
			fmt.Sprintf("uid %s annotations %v finalizers %v", c.UID, c.Annotations, c.Finalizers), nil
	})
}

// testActiveCAPIMachineSetNotMirror is the same for a MachineSet: the Cluster API MachineSet
// is left alone, and so are the Machines the Machine API MachineSet creates meanwhile, which
// report the conflict too; once it is deleted, the sync mirrors the MachineSet and its
// Machines, which its mirror controls.
func testActiveCAPIMachineSetNotMirror(t *testing.T, p platform) {
	e := env.For(t)
	ctx := context.Background()
	name := p.name("set-not-mirror")
	cms := p.handMadeCAPIMachineSet(t, e, name, false)
	before := &clusterv1.MachineSet{}
	if err := e.Client.Get(ctx, client.ObjectKeyFromObject(cms), before); err != nil {
		t.Fatal(err)
	}
	ms := p.machineSet(name, 1)
	ms.Spec.AuthoritativeAPI = machinev1beta1.MachineAuthorityMachineAPI
	if err := e.Client.Create(ctx, ms); err != nil {
		t.Fatal(err)
	}
	waitNotMirror(t, e, name, authority.ClusterAPIMachineSetNotMirrorReason, func(ctx context.Context) ([]machinev1beta1.Condition, machinev1beta1.MachineAuthority, error) {
		m := &machinev1beta1.MachineSet{}
		if err := e.Client.Get(ctx, client.ObjectKey{Namespace: mapiNS, Name: name}, m); err != nil {
			return nil, "", err
		}
		return m.Status.Conditions, m.Status.AuthoritativeAPI, nil
	})
	// The MachineSet's Machine is not mirrored either: the Cluster API MachineSet would adopt
	// a copy its selector matches and count, scale and delete it as one of its own.
	var machine string
	e.Eventually(90*time.Second, "the MachineSet's Machine reports the conflict", func(ctx context.Context) (bool, string, error) {
		var list machinev1beta1.MachineList
		if err := e.Client.List(ctx, &list, client.InNamespace(mapiNS), client.MatchingLabels{"machine.openshift.io/cluster-api-machineset": name}); err != nil {
			return false, "", err
		}
		if len(list.Items) != 1 {
			return false, fmt.Sprintf("%d Machines", len(list.Items)), nil
		}
		m := &list.Items[0]
		machine = m.Name
		c := mapicond.Get(m.Status.Conditions, authority.SynchronizedCondition)
		return c != nil && c.Reason == authority.ClusterAPIMachineSetNotMirrorReason && strings.Contains(c.Message, capiNS+"/"+name),
			mapiCond(m.Status.Conditions), nil
	})
	if _, err := getCAPI(ctx, e, machine); !apierrors.IsNotFound(err) {
		t.Errorf("%s was mirrored while its MachineSet's Cluster API namesake is not a mirror (err %v)", machine, err)
	}
	after := &clusterv1.MachineSet{}
	if err := e.Client.Get(ctx, client.ObjectKeyFromObject(cms), after); err != nil {
		t.Fatal(err)
	}
	if after.ResourceVersion != before.ResourceVersion || pausedAnnotated(after) || len(after.Finalizers) != 0 {
		t.Errorf("the active Cluster API MachineSet was written: resourceVersion %s → %s, annotations %v, finalizers %v",
			before.ResourceVersion, after.ResourceVersion, after.Annotations, after.Finalizers)
	}
	waitEvent(t, e, "MachineSet", name, authority.ClusterAPIMachineSetNotMirrorReason)

	if err := e.Client.Delete(ctx, after); err != nil {
		t.Fatal(err)
	}
	e.Eventually(60*time.Second, "the sync's own paused mirror, controlling "+machine, func(ctx context.Context) (bool, string, error) {
		m, c, err := getMS(ctx, e, name)
		if err != nil {
			return false, err.Error(), nil
		}
		cm, err := getCAPI(ctx, e, machine)
		if err != nil {
			return false, err.Error(), nil
		}
		ref := metav1.GetControllerOf(cm)
		return c.UID != before.UID && pausedAnnotated(c) && controllerutil.ContainsFinalizer(c, authority.SyncFinalizer) &&
				mapicond.IsTrue(m.Status.Conditions, authority.SynchronizedCondition) && ref != nil && ref.UID == c.UID,
			fmt.Sprintf("annotations %v finalizers %v %s machine controller %v", c.Annotations, c.Finalizers, mapiCond(m.Status.Conditions), ref), nil
	})
	if err := e.Client.Delete(ctx, ms); err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
}

// waitNotMirror waits until the Machine API copy read by get is MachineAPI-authoritative and
// reports Synchronized=False with reason, naming the Cluster API copy.
func waitNotMirror(t *testing.T, e *testenv.Env, name, reason string,
	get func(context.Context) ([]machinev1beta1.Condition, machinev1beta1.MachineAuthority, error)) {
	t.Helper()
	e.Eventually(60*time.Second, name+" reports "+reason, func(ctx context.Context) (bool, string, error) {
		conds, current, err := get(ctx)
		if err != nil {
			return false, err.Error(), nil
		}
		c := mapicond.Get(conds, authority.SynchronizedCondition)
		return current == machinev1beta1.MachineAuthorityMachineAPI && c != nil && c.Status == corev1.ConditionFalse &&
				c.Reason == reason && strings.Contains(c.Message, capiNS+"/"+name),
			fmt.Sprintf("authority %q %s", current, mapiCond(conds)), nil
	})
}

// waitEvent waits for an event with reason about the Machine API object kind/name.
func waitEvent(t *testing.T, e *testenv.Env, kind, name, reason string) {
	t.Helper()
	e.Eventually(30*time.Second, "event "+reason+" on "+name, func(ctx context.Context) (bool, string, error) {
		var events corev1.EventList
		if err := e.Client.List(ctx, &events, client.InNamespace(mapiNS),
			client.MatchingFields{"involvedObject.name": name, "involvedObject.kind": kind, "reason": reason}); err != nil {
			return false, "", err
		}
		return len(events.Items) > 0, fmt.Sprintf("%d events", len(events.Items)), nil
	})
}

// testDeletedBesideNotMirror: deleting the Machine API copy never takes along a same-named
// active Cluster API resource the sync did not make. For a Machine that was mirrored before:
// while the manager was down, its mirror was removed and someone created an active Cluster
// API Machine of the name, then the Machine API Machine was deleted. For a MachineSet in
// conflict, deleted in the foreground (so its deletion waits for its Machine and the sync
// sees it).
func testDeletedBesideNotMirror(t *testing.T, p platform) {
	ctx := context.Background()
	t.Run("Machine", func(t *testing.T) {
		e := env.For(t)
		name := p.name("del-not-mirror")
		m, _ := runningMirrored(t, e, p, name)
		e.StopManager()
		mirror, err := getCAPI(ctx, e, name)
		if err != nil {
			t.Fatal(err)
		}
		stripFinalizers(t, e, mirror, authority.SyncFinalizer, clusterv1.MachineFinalizer)
		infra := p.emptyInfraMachine()
		infra.SetNamespace(capiNS)
		infra.SetName(name)
		for _, o := range []client.Object{mirror, infra} {
			if err := client.IgnoreNotFound(e.Client.Delete(ctx, o)); err != nil {
				t.Fatal(err)
			}
		}
		e.Eventually(30*time.Second, "the mirror and its InfraMachine gone", func(ctx context.Context) (bool, string, error) {
			_, errM := getCAPI(ctx, e, name)
			_, errI := p.infraMachine(ctx, e, name)
			return apierrors.IsNotFound(errM) && apierrors.IsNotFound(errI), fmt.Sprintf("%v; %v", errM, errI), nil
		})
		p.handMadeCAPIMachine(t, e, name, false, nil)
		before, err := getCAPI(ctx, e, name)
		if err != nil {
			t.Fatal(err)
		}
		if err := e.Client.Delete(ctx, m); err != nil {
			t.Fatal(err)
		}
		e.StartManager()
		waitMAPIGone(t, e, name)
		c, err := getCAPI(ctx, e, name)
		if err != nil || !c.DeletionTimestamp.IsZero() || c.ResourceVersion != before.ResourceVersion {
			t.Errorf("the active Cluster API Machine was deleted or written: %v", err)
		}
	})
	t.Run("MachineSet", func(t *testing.T) {
		e := env.For(t)
		name := p.name("set-del-not-mirror")
		cms := p.handMadeCAPIMachineSet(t, e, name, false)
		before := &clusterv1.MachineSet{}
		if err := e.Client.Get(ctx, client.ObjectKeyFromObject(cms), before); err != nil {
			t.Fatal(err)
		}
		ms := p.machineSet(name, 1)
		if err := e.Client.Create(ctx, ms); err != nil {
			t.Fatal(err)
		}
		waitNotMirror(t, e, name, authority.ClusterAPIMachineSetNotMirrorReason, func(ctx context.Context) ([]machinev1beta1.Condition, machinev1beta1.MachineAuthority, error) {
			m := &machinev1beta1.MachineSet{}
			if err := e.Client.Get(ctx, client.ObjectKeyFromObject(ms), m); err != nil {
				return nil, "", err
			}
			return m.Status.Conditions, m.Status.AuthoritativeAPI, nil
		})
		// Its Machine, with the Machine controller's finalizer, holds the foreground deletion.
		e.Eventually(60*time.Second, "the MachineSet's Machine", func(ctx context.Context) (bool, string, error) {
			var list machinev1beta1.MachineList
			err := e.Client.List(ctx, &list, client.InNamespace(mapiNS), client.MatchingLabels{"machine.openshift.io/cluster-api-machineset": name})
			return err == nil && len(list.Items) == 1 && len(list.Items[0].Finalizers) > 0, fmt.Sprintf("%d Machines %v", len(list.Items), err), nil
		})
		if err := e.Client.Delete(ctx, ms, client.PropagationPolicy(metav1.DeletePropagationForeground)); err != nil {
			t.Fatal(err)
		}
		e.Eventually(120*time.Second, "the Machine API MachineSet gone", func(ctx context.Context) (bool, string, error) {
			err := e.Client.Get(ctx, client.ObjectKeyFromObject(ms), &machinev1beta1.MachineSet{})
			return apierrors.IsNotFound(err), fmt.Sprint(err), nil
		})
		c := &clusterv1.MachineSet{}
		if err := e.Client.Get(ctx, client.ObjectKeyFromObject(cms), c); err != nil || !c.DeletionTimestamp.IsZero() || c.ResourceVersion != before.ResourceVersion {
			t.Errorf("the active Cluster API MachineSet was deleted or written: %v", err)
		}
	})
}
