package migration_test

import (
	"context"
	"fmt"
	"path"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/machina-dev/machina/internal/authority"
	"github.com/machina-dev/machina/internal/cloud/api"
	"github.com/machina-dev/machina/internal/controllers/migration"
	"github.com/machina-dev/machina/internal/gate"
	"github.com/machina-dev/machina/internal/mapicond"
	"github.com/machina-dev/machina/internal/testenv"
)

const (
	mapiNS = "openshift-machine-api"
	capiNS = "openshift-cluster-api"
)

func TestMachineHealthCheckMigration(t *testing.T) {
	t.Parallel() // a lab of its own, beside the package's other labs (see TestOwnLab)
	e := testenv.Start(t, testenv.Options{Groups: "machineapi,sync,migration,clusterapi,sim"})
	e.SeedCluster("lab")
	t.Run("HandoverBothWaysKeepsRemediating", func(t *testing.T) { testMHCHandover(t, e.For(t)) })
	t.Run("RefusedWhenNotSynchronized", func(t *testing.T) { testMHCRefused(t, e.For(t)) })
	t.Run("RollbackMidMigration", func(t *testing.T) { testMHCRollback(t, e.For(t)) })
	t.Run("RollbackAfterCrashUnpausesClusterAPI", func(t *testing.T) { testMHCRollbackAfterCrash(t, e.For(t)) })
	t.Run("ClusterAPIOnlyFeatureKeepsCheckInClusterAPI", func(t *testing.T) { testMHCClusterAPIOnly(t, e.For(t)) })
}

// A Cluster API-owned check given a range trigger, which the Machine API has no field for:
// asked back to the Machine API, the migration refuses (NotConvertible, naming the field)
// and the check stays with the Cluster API, its Machine API copy mirroring the rest; without
// the range it moves.
func testMHCClusterAPIOnly(t *testing.T, e *testenv.Env) {
	ctx := context.Background()
	const name = "ranged"
	if err := e.Client.Create(ctx, healthCheck(name, map[string]string{"pool": name})); err != nil {
		t.Fatal(err)
	}
	waitCheckSettled(t, e, name, machinev1beta1.MachineAuthorityMachineAPI, "")
	requestCheck(t, e, name, machinev1beta1.MachineAuthorityClusterAPI)
	waitCheckSettled(t, e, name, machinev1beta1.MachineAuthorityClusterAPI, migration.CompletedReason)
	setRange := func(v string) {
		t.Helper()
		c := &clusterv1.MachineHealthCheck{}
		if err := e.Client.Get(ctx, client.ObjectKey{Namespace: capiNS, Name: name}, c); err != nil {
			t.Fatal(err)
		}
		base := c.DeepCopy()
		c.Spec.Remediation.TriggerIf.UnhealthyInRange = v
		if err := e.Client.Patch(ctx, c, client.MergeFrom(base)); err != nil {
			t.Fatal(err)
		}
	}
	setRange("[1-2]")
	waitCheckSettled(t, e, name, machinev1beta1.MachineAuthorityClusterAPI, "")
	requestCheck(t, e, name, machinev1beta1.MachineAuthorityMachineAPI)
	e.Eventually(60*time.Second, "refused, naming the range", func(ctx context.Context) (bool, string, error) {
		m, _, err := getChecks(ctx, e, name)
		if err != nil {
			return false, err.Error(), nil
		}
		c := mapicond.Get(m.Status.Conditions, migration.MigrationCondition)
		return c != nil && c.Reason == migration.NotConvertibleReason && strings.Contains(c.Message, "spec.remediation.triggerIf.unhealthyInRange") &&
			m.Annotations[authority.MHCStatusAuthoritativeAPIAnnotation] == "ClusterAPI", mhcCond(m, migration.MigrationCondition), nil
	})
	setRange("")
	waitCheckSettled(t, e, name, machinev1beta1.MachineAuthorityMachineAPI, migration.CompletedReason)
}

func healthCheck(name string, selector map[string]string) *machinev1beta1.MachineHealthCheck {
	return &machinev1beta1.MachineHealthCheck{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: mapiNS},
		Spec: machinev1beta1.MachineHealthCheckSpec{
			Selector: metav1.LabelSelector{MatchLabels: selector},
			UnhealthyConditions: []machinev1beta1.UnhealthyCondition{
				{Type: corev1.NodeReady, Status: corev1.ConditionFalse, Timeout: metav1.Duration{Duration: time.Second}},
				{Type: corev1.NodeReady, Status: corev1.ConditionUnknown, Timeout: metav1.Duration{Duration: time.Second}},
			}}}
}

func getChecks(ctx context.Context, e *testenv.Env, name string) (*machinev1beta1.MachineHealthCheck, *clusterv1.MachineHealthCheck, error) {
	m, c := &machinev1beta1.MachineHealthCheck{}, &clusterv1.MachineHealthCheck{}
	if err := e.Client.Get(ctx, client.ObjectKey{Namespace: mapiNS, Name: name}, m); err != nil {
		return nil, nil, err
	}
	if err := e.Client.Get(ctx, client.ObjectKey{Namespace: capiNS, Name: name}, c); err != nil {
		return m, nil, err
	}
	return m, c, nil
}

// patchCheck changes the Machine API MachineHealthCheck's annotations (nil value removes one).
func patchCheck(t *testing.T, e *testenv.Env, name string, annotations map[string]*string) {
	t.Helper()
	patchCheckAs(t, e.Client, name, annotations)
}

// patchCheckAs is patchCheck with the given client (machina's identity may write the
// annotations that play the part of status; admission refuses them to anyone else).
func patchCheckAs(t *testing.T, c client.Client, name string, annotations map[string]*string) {
	t.Helper()
	m := &machinev1beta1.MachineHealthCheck{}
	if err := c.Get(context.Background(), client.ObjectKey{Namespace: mapiNS, Name: name}, m); err != nil {
		t.Fatal(err)
	}
	base := m.DeepCopy()
	if m.Annotations == nil {
		m.Annotations = map[string]string{}
	}
	for k, v := range annotations {
		if v == nil {
			delete(m.Annotations, k)
		} else {
			m.Annotations[k] = *v
		}
	}
	if err := c.Patch(context.Background(), m, client.MergeFrom(base)); err != nil {
		t.Fatal(err)
	}
}

func requestCheck(t *testing.T, e *testenv.Env, name string, to machinev1beta1.MachineAuthority) {
	t.Helper()
	patchCheck(t, e, name, map[string]*string{authority.MHCAuthoritativeAPIAnnotation: ptr.To(string(to))})
}

func describeChecks(m *machinev1beta1.MachineHealthCheck, c *clusterv1.MachineHealthCheck) string {
	capiPaused := "<none>"
	if pc := meta.FindStatusCondition(c.Status.Conditions, clusterv1.PausedCondition); pc != nil {
		capiPaused = fmt.Sprintf("%s@%d/%d", pc.Status, pc.ObservedGeneration, c.Generation)
	}
	a := m.Annotations
	return fmt.Sprintf("request %q status %q synced-api %q synced-gen %q (mapi gen %d capi gen %d); mapi Paused %s, %s; capi paused-annotation %v Paused %s; %s",
		a[authority.MHCAuthoritativeAPIAnnotation], a[authority.MHCStatusAuthoritativeAPIAnnotation], a[authority.MHCSynchronizedAPIAnnotation],
		a[authority.MHCSynchronizedGenerationAnnotation], m.Generation, c.Generation,
		mhcCond(m, gate.PausedCondition), mhcCond(m, authority.SynchronizedCondition), gate.HasPausedAnnotation(c), capiPaused,
		mhcCond(m, migration.MigrationCondition))
}

func mhcCond(m *machinev1beta1.MachineHealthCheck, t machinev1beta1.ConditionType) string {
	c := mapicond.Get(m.Status.Conditions, t)
	if c == nil {
		return string(t) + " <none>"
	}
	return fmt.Sprintf("%s %s/%s: %s", t, c.Status, c.Reason, c.Message)
}

// waitCheckSettled waits until the MachineHealthCheck is `with`-authoritative, synchronised
// at the authoritative copy's generation, and each side's controller reports the pause
// that authority implies (the Machine API one through the gate, the Cluster API one for its
// paused annotation).
func waitCheckSettled(t *testing.T, e *testenv.Env, name string, with machinev1beta1.MachineAuthority, reason string) {
	t.Helper()
	e.Eventually(90*time.Second, fmt.Sprintf("MachineHealthCheck %s settled with %s", name, with), func(ctx context.Context) (bool, string, error) {
		m, c, err := getChecks(ctx, e, name)
		if err != nil {
			return false, fmt.Sprint(err), nil
		}
		gen := m.Generation
		if with == machinev1beta1.MachineAuthorityClusterAPI {
			gen = c.Generation
		}
		pc := meta.FindStatusCondition(c.Status.Conditions, clusterv1.PausedCondition)
		capiPaused := pc != nil && pc.Status == metav1.ConditionTrue && pc.ObservedGeneration == c.Generation
		capiActive := pc != nil && pc.Status == metav1.ConditionFalse && pc.ObservedGeneration == c.Generation
		mapiPaused := condStatus(m.Status.Conditions, gate.PausedCondition)
		if mapicond.Get(m.Status.Conditions, gate.PausedCondition) == nil && e.Upstream != nil {
			// machine-api-operator's check reports no Paused condition: it honours the
			// paused annotation.
			mapiPaused = map[bool]string{true: "True", false: "False"}[gate.HasPausedAnnotation(m)]
		}
		ok := m.Annotations[authority.MHCStatusAuthoritativeAPIAnnotation] == string(with) &&
			mapicond.IsTrue(m.Status.Conditions, authority.SynchronizedCondition) &&
			m.Annotations[authority.MHCSynchronizedGenerationAnnotation] == strconv.FormatInt(gen, 10)
		if with == machinev1beta1.MachineAuthorityClusterAPI {
			ok = ok && !gate.HasPausedAnnotation(c) && capiActive && mapiPaused == "True"
		} else {
			ok = ok && gate.HasPausedAnnotation(c) && capiPaused && mapiPaused == "False"
		}
		if reason != "" {
			mc := mapicond.Get(m.Status.Conditions, migration.MigrationCondition)
			ok = ok && mc != nil && mc.Reason == reason && m.Annotations[authority.MHCSynchronizedAPIAnnotation] == string(with)
		}
		return ok, describeChecks(m, c), nil
	})
}

// A pool — MachineSet, its Machine and the MachineHealthCheck watching it — moves to the
// Cluster API and back. After each move one Node is broken: the check that now has authority
// remediates (the Cluster API one asks the Cluster API MachineSet to replace the Machine, the
// Machine API one deletes the Machine for the Machine API MachineSet to replace), and the
// other check stays quiet.
func testMHCHandover(t *testing.T, e *testenv.Env) {
	mhcHandover(t, e, machineSet("healed", 1))
}

// testMHCHandoverOn is testMHCHandover for a platform's own lab: beside the upstream
// controllers (TestOwnLab/upstream) the checks are machine-api-operator's and the upstream
// core's.
func testMHCHandoverOn(t *testing.T, e *testenv.Env, pc platformCase) {
	mhcHandover(t, e, platformSet(pc, pc.name("healed"), 1, pc.small))
}

// mhcHandover moves the pool of MachineSet ms (created here) and a check over it.
func mhcHandover(t *testing.T, e *testenv.Env, ms *machinev1beta1.MachineSet) {
	ctx := context.Background()
	set := ms.Name
	if err := e.Client.Create(ctx, ms); err != nil {
		t.Fatal(err)
	}
	waitSet(t, e, set, 1)
	selector := map[string]string{"machine.openshift.io/cluster-api-machineset": set}
	if err := e.Client.Create(ctx, healthCheck(set, selector)); err != nil {
		t.Fatal(err)
	}
	waitCheckSettled(t, e, set, machinev1beta1.MachineAuthorityMachineAPI, "")
	created := instancesCreated(t, e)

	movePool(t, e, set, machinev1beta1.MachineAuthorityClusterAPI)
	if n := instancesCreated(t, e); n != created {
		t.Fatalf("moving the pool created %d instance(s)", n-created)
	}
	breakAndWaitRemediated(t, e, set, machinev1beta1.MachineAuthorityClusterAPI)

	movePool(t, e, set, machinev1beta1.MachineAuthorityMachineAPI)
	breakAndWaitRemediated(t, e, set, machinev1beta1.MachineAuthorityMachineAPI)
}

// movePool hands the MachineHealthCheck, the MachineSet and its Machines to `to` and waits
// until all of them have moved.
func movePool(t *testing.T, e *testenv.Env, set string, to machinev1beta1.MachineAuthority) {
	t.Helper()
	requestCheck(t, e, set, to)
	moveSet(t, e, set, to)
	waitCheckSettled(t, e, set, to, migration.CompletedReason)
}

// moveSet hands the MachineSet and its Machines to `to` and waits until all have moved.
func moveSet(t *testing.T, e *testenv.Env, set string, to machinev1beta1.MachineAuthority) {
	t.Helper()
	requestMachines(t, e, set, to)
	migrateSet(t, e, set, to)
	waitMachinesMoved(t, e, set, to)
}

// moveMachines hands the MachineSet's Machines, not the MachineSet, to `to` and waits until
// all have moved.
func moveMachines(t *testing.T, e *testenv.Env, set string, to machinev1beta1.MachineAuthority) {
	t.Helper()
	requestMachines(t, e, set, to)
	waitMachinesMoved(t, e, set, to)
}

func requestMachines(t *testing.T, e *testenv.Env, set string, to machinev1beta1.MachineAuthority) {
	t.Helper()
	var machines machinev1beta1.MachineList
	if err := e.Client.List(context.Background(), &machines, client.InNamespace(mapiNS),
		client.MatchingLabels{"machine.openshift.io/cluster-api-machineset": set}); err != nil {
		t.Fatal(err)
	}
	for _, m := range machines.Items {
		if m.DeletionTimestamp.IsZero() {
			request(t, e, m.Name, to)
		}
	}
}

func waitMachinesMoved(t *testing.T, e *testenv.Env, set string, to machinev1beta1.MachineAuthority) {
	t.Helper()
	e.Eventually(90*time.Second, "the pool's Machines moved to "+string(to), func(ctx context.Context) (bool, string, error) {
		var list machinev1beta1.MachineList
		if err := e.Client.List(ctx, &list, client.InNamespace(mapiNS), client.MatchingLabels{"machine.openshift.io/cluster-api-machineset": set}); err != nil {
			return false, err.Error(), nil
		}
		desc := ""
		for _, m := range list.Items {
			if m.Status.AuthoritativeAPI != to {
				desc += fmt.Sprintf(" %s is %s;", m.Name, m.Status.AuthoritativeAPI)
			}
		}
		return desc == "", desc, nil
	})
}

// waitSet waits until the MachineSet has n Machines in both APIs, all Running with a Node,
// and returns their names.
func waitSet(t *testing.T, e *testenv.Env, set string, n int) {
	t.Helper()
	e.Eventually(3*time.Minute, fmt.Sprintf("%s: %d Machine(s) running in both APIs", set, n), func(ctx context.Context) (bool, string, error) {
		m, c, r, desc := machinesOf(ctx, e, set)
		if m == n && c == n && r == n {
			return true, "", nil
		}
		var list clusterv1.MachineList
		_ = e.Client.List(ctx, &list, client.InNamespace(capiNS), client.MatchingLabels{"machine.openshift.io/cluster-api-machineset": set})
		for _, cm := range list.Items {
			for _, cd := range cm.Status.Conditions {
				if cd.Status != metav1.ConditionTrue {
					desc += fmt.Sprintf("; %s %s=%s %s", cm.Name, cd.Type, cd.Status, cd.Message)
				}
			}
		}
		return false, desc, nil
	})
}

// breakAndWaitRemediated makes the Node of the MachineSet's Machine NotReady and waits for
// the Machine to be replaced; the MachineHealthCheck of `by` must be the one that acted.
func breakAndWaitRemediated(t *testing.T, e *testenv.Env, set string, by machinev1beta1.MachineAuthority) {
	t.Helper()
	breakAndWaitRemediatedBy(t, e, set, set, by)
}

// breakAndWaitRemediatedBy is breakAndWaitRemediated for a check named `check`.
func breakAndWaitRemediatedBy(t *testing.T, e *testenv.Env, set, check string, by machinev1beta1.MachineAuthority) {
	t.Helper()
	ctx := context.Background()
	// One provisioned Cluster API Machine (one replaced before may still be on its way out).
	var live []clusterv1.Machine
	e.Eventually(2*time.Minute, "one provisioned Cluster API Machine in "+set, func(ctx context.Context) (bool, string, error) {
		var list clusterv1.MachineList
		if err := e.Client.List(ctx, &list, client.InNamespace(capiNS), client.MatchingLabels{"machine.openshift.io/cluster-api-machineset": set}); err != nil {
			return false, err.Error(), nil
		}
		live = slices.DeleteFunc(list.Items, func(m clusterv1.Machine) bool { return !m.DeletionTimestamp.IsZero() })
		return len(live) == 1 && live[0].Spec.ProviderID != "", fmt.Sprintf("%d live of %d", len(live), len(list.Items)), nil
	})
	victim := live[0].Name
	instance := path.Base(live[0].Spec.ProviderID) // the instance ID ends every platform's providerID
	f, err := e.Cloud.CreateFault(ctx, api.Fault{Kind: api.FaultNodeNotReady, InstanceIDs: []string{instance}})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _, _ = e.Cloud.DeleteFaults(ctx, f.FaultID) }()
	e.Logf("%s: Node of %s (%s) made NotReady", time.Now().Format(time.TimeOnly), victim, instance)
	e.Eventually(3*time.Minute, "unhealthy Machine "+victim+" replaced", func(ctx context.Context) (bool, string, error) {
		m, c, r, desc := machinesOf(ctx, e, set)
		if m == 1 && c == 1 && r == 1 && !strings.Contains(desc, " "+victim+" ") {
			return true, "", nil
		}
		return false, desc + "; " + remediationState(ctx, e, check, victim), nil
	})
	// Events are recorded asynchronously: wait for the acting check's, then look at both.
	ns, reason := capiNS, "MachineMarkedUnhealthy"
	if by == machinev1beta1.MachineAuthorityMachineAPI {
		ns, reason = mapiNS, "MachineDeleted"
	}
	e.Eventually(30*time.Second, "the "+string(by)+" check's "+reason+" event for "+victim, func(ctx context.Context) (bool, string, error) {
		return checkEvents(t, e, ns, check, reason, victim) > 0, "", nil
	})
	mapiActed := checkEvents(t, e, mapiNS, check, "MachineDeleted", victim)
	capiActed := checkEvents(t, e, capiNS, check, "MachineMarkedUnhealthy", victim)
	e.Logf("after the move to %s, Machine %s: Machine API check deleted it %d time(s), Cluster API check marked it %d time(s)",
		by, victim, mapiActed, capiActed)
	if by == machinev1beta1.MachineAuthorityClusterAPI && mapiActed != 0 || by == machinev1beta1.MachineAuthorityMachineAPI && capiActed != 0 {
		t.Errorf("Machine %s was also remediated by the check without authority: Machine API %d, Cluster API %d; %s has authority",
			victim, mapiActed, capiActed, by)
	}
}

// checkEvents counts the events with reason that a check recorded about the Machine: machina's
// checks record them on the MachineHealthCheck naming the Machine, machine-api-operator's and
// the upstream core's on the Machine itself.
func checkEvents(t *testing.T, e *testenv.Env, ns, check, reason, machineName string) int {
	t.Helper()
	n := 0
	for _, about := range []string{check, machineName} {
		var events corev1.EventList
		if err := e.Client.List(context.Background(), &events, client.InNamespace(ns), client.MatchingFields{"involvedObject.name": about}); err != nil {
			t.Fatal(err)
		}
		for _, ev := range events.Items {
			if ev.Reason != reason {
				continue
			}
			onCheck := ev.InvolvedObject.Kind == "MachineHealthCheck" && about == check &&
				(strings.Contains(ev.Message, "Machine "+machineName+" ") || strings.Contains(ev.Message, "Machine "+machineName+":"))
			if onCheck || ev.InvolvedObject.Kind == "Machine" && about == machineName {
				n++
			}
		}
	}
	return n
}

// A check whose remediation template lives in another namespace cannot be expressed in the
// Cluster API: it is not synchronised, and a request to move it is refused with the reason.
func testMHCRefused(t *testing.T, e *testenv.Env) {
	ctx := context.Background()
	const name = "unmovable"
	mhc := healthCheck(name, map[string]string{"pool": name})
	mhc.Spec.RemediationTemplate = &corev1.ObjectReference{APIVersion: "remediation.example.com/v1", Kind: "RebootTemplate",
		Name: "reboot", Namespace: "elsewhere"}
	if err := e.Client.Create(ctx, mhc); err != nil {
		t.Fatal(err)
	}
	e.Eventually(60*time.Second, "decided and not synchronised", func(ctx context.Context) (bool, string, error) {
		m := &machinev1beta1.MachineHealthCheck{}
		if err := e.Client.Get(ctx, client.ObjectKeyFromObject(mhc), m); err != nil {
			return false, err.Error(), nil
		}
		return m.Annotations[authority.MHCStatusAuthoritativeAPIAnnotation] == "MachineAPI" &&
			condStatus(m.Status.Conditions, authority.SynchronizedCondition) == "False", mhcCond(m, authority.SynchronizedCondition), nil
	})
	requestCheck(t, e, name, machinev1beta1.MachineAuthorityClusterAPI)
	e.Eventually(60*time.Second, "refused with the reason", func(ctx context.Context) (bool, string, error) {
		m := &machinev1beta1.MachineHealthCheck{}
		if err := e.Client.Get(ctx, client.ObjectKeyFromObject(mhc), m); err != nil {
			return false, err.Error(), nil
		}
		c := mapicond.Get(m.Status.Conditions, migration.MigrationCondition)
		return c != nil && c.Reason == migration.NotSynchronizedReason && strings.Contains(c.Message, "spec.remediationTemplate.namespace"),
			mhcCond(m, migration.MigrationCondition), nil
	})
	time.Sleep(2 * time.Second) // a few more passes: still refused, nothing moved
	m := &machinev1beta1.MachineHealthCheck{}
	if err := e.Client.Get(ctx, client.ObjectKeyFromObject(mhc), m); err != nil {
		t.Fatal(err)
	}
	if a := m.Annotations[authority.MHCStatusAuthoritativeAPIAnnotation]; a != "MachineAPI" || condStatus(m.Status.Conditions, gate.PausedCondition) == "True" {
		t.Fatalf("a refused migration changed authority to %q / paused the Machine API check: %s", a, mhcCond(m, gate.PausedCondition))
	}
}

// While the old side has not acknowledged the pause (its Paused=True write is held back by
// the kube-apiserver), the user changes their mind: the migration rolls back, the Machine
// API check stays in charge and the Cluster API copy stays paused.
func testMHCRollback(t *testing.T, e *testenv.Env) {
	ctx := context.Background()
	const name = "fickle"
	if err := e.Client.Create(ctx, healthCheck(name, map[string]string{"pool": name})); err != nil {
		t.Fatal(err)
	}
	waitCheckSettled(t, e, name, machinev1beta1.MachineAuthorityMachineAPI, "")
	lift := hold{"the Machine API check's Paused=True", "machine.openshift.io", "machinehealthchecks/status",
		celNamed(name) + " && " + celHasCondition("object", "Paused", "True") + " && !" + celHasCondition("oldObject", "Paused", "True")}.apply(e)
	defer lift()
	requestCheck(t, e, name, machinev1beta1.MachineAuthorityClusterAPI)
	e.Eventually(60*time.Second, "Migrating, waiting for the Machine API check to pause", func(ctx context.Context) (bool, string, error) {
		m, c, err := getChecks(ctx, e, name)
		if err != nil {
			return false, fmt.Sprint(err), nil
		}
		mc := mapicond.Get(m.Status.Conditions, migration.MigrationCondition)
		return m.Annotations[authority.MHCStatusAuthoritativeAPIAnnotation] == "Migrating" && mc != nil && mc.Reason == migration.WaitingForPausedReason,
			describeChecks(m, c), nil
	})
	requestCheck(t, e, name, machinev1beta1.MachineAuthorityMachineAPI)
	waitCheckSettled(t, e, name, machinev1beta1.MachineAuthorityMachineAPI, migration.RolledBackReason)
}

// The manager crashed after pausing the Cluster API copy of a Cluster API-authoritative
// check on its way to the Machine API, and the user then asked for the Cluster API again:
// the restarted controllers roll back from the objects and unpause the Cluster API copy.
func testMHCRollbackAfterCrash(t *testing.T, e *testenv.Env) {
	ctx := context.Background()
	const name = "undecided"
	mhc := healthCheck(name, map[string]string{"pool": name})
	mhc.Annotations = map[string]string{authority.MHCAuthoritativeAPIAnnotation: "ClusterAPI"}
	if err := e.Client.Create(ctx, mhc); err != nil {
		t.Fatal(err)
	}
	waitCheckSettled(t, e, name, machinev1beta1.MachineAuthorityClusterAPI, "")
	e.StopManager()
	// What the migration controller had written when it crashed: Migrating from ClusterAPI,
	// and the paused annotation on the Cluster API copy (written as machina, whose
	// annotations these are).
	patchCheckAs(t, e.ManagerClient(), name, map[string]*string{
		authority.MHCAuthoritativeAPIAnnotation:       ptr.To("MachineAPI"),
		authority.MHCStatusAuthoritativeAPIAnnotation: ptr.To("Migrating"),
		authority.MHCSynchronizedAPIAnnotation:        ptr.To("ClusterAPI"),
	})
	c := &clusterv1.MachineHealthCheck{}
	if err := e.Client.Get(ctx, client.ObjectKey{Namespace: capiNS, Name: name}, c); err != nil {
		t.Fatal(err)
	}
	base := c.DeepCopy()
	authority.SetPaused(c, true)
	if err := e.Client.Patch(ctx, c, client.MergeFrom(base)); err != nil {
		t.Fatal(err)
	}
	requestCheck(t, e, name, machinev1beta1.MachineAuthorityClusterAPI)
	e.StartManager()
	waitCheckSettled(t, e, name, machinev1beta1.MachineAuthorityClusterAPI, migration.RolledBackReason)
}

// remediationState describes what both checks and the victim Machine say, for failures.
func remediationState(ctx context.Context, e *testenv.Env, check, victim string) string {
	out := ""
	if m, c, err := getChecks(ctx, e, check); err == nil {
		out += describeChecks(m, c) + "; "
		out += fmt.Sprintf("mapi check expected %v healthy %v %s; capi check expected %v healthy %v conds %v",
			ptr.Deref(m.Status.ExpectedMachines, -1), ptr.Deref(m.Status.CurrentHealthy, -1),
			mhcCond(m, machinev1beta1.RemediationAllowedCondition), ptr.Deref(c.Status.ExpectedMachines, -1),
			ptr.Deref(c.Status.CurrentHealthy, -1), c.Status.Conditions)
	}
	cm := &clusterv1.Machine{}
	if err := e.Client.Get(ctx, client.ObjectKey{Namespace: capiNS, Name: victim}, cm); err == nil {
		for _, t := range []string{clusterv1.MachineHealthCheckSucceededCondition, clusterv1.MachineOwnerRemediatedCondition} {
			if cd := meta.FindStatusCondition(cm.Status.Conditions, t); cd != nil {
				out += fmt.Sprintf("; victim %s=%s %s", t, cd.Status, cd.Message)
			}
		}
		n := &corev1.Node{}
		if err := e.Client.Get(ctx, client.ObjectKey{Name: cm.Status.NodeRef.Name}, n); err == nil {
			out += fmt.Sprintf("; node annotations %v", n.Annotations)
			var evs corev1.EventList
			_ = e.Client.List(ctx, &evs, client.InNamespace(mapiNS), client.MatchingFields{"involvedObject.name": check})
			for _, ev := range evs.Items {
				out += fmt.Sprintf("; mapi event %s %s %s", ev.LastTimestamp.Format(time.TimeOnly), ev.Reason, ev.Message)
			}
			for _, nc := range n.Status.Conditions {
				if nc.Type == corev1.NodeReady {
					out += fmt.Sprintf("; node %s Ready=%s since %s", n.Name, nc.Status, nc.LastTransitionTime)
				}
			}
		}
	}
	return out
}
