package migration_test

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	"k8s.io/apimachinery/pkg/api/meta"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/machina-dev/machina/internal/authority"
	"github.com/machina-dev/machina/internal/cloud/api"
	"github.com/machina-dev/machina/internal/controllers/migration"
	"github.com/machina-dev/machina/internal/gate"
	"github.com/machina-dev/machina/internal/mapicond"
	"github.com/machina-dev/machina/internal/provider"
	"github.com/machina-dev/machina/internal/scheme"
	"github.com/machina-dev/machina/internal/testenv"
)

// crashStep is one step of a Machine's handover as the objects show it, and the hold that
// keeps the handover from going past it.
type crashStep struct {
	name string
	hold hold
}

// machineStep tells how far a Machine's handover towards `to` has got, from the objects
// alone: 0 not started, then the index (1-based) of the last step in steps done, and
// len(steps)+1 when the authority has moved.
type machineStep func(m *machinev1beta1.Machine, c *clusterv1.Machine) int

// stepToClusterAPI: 1 Migrating, 2 the Machine API copy reports Paused=True, 3 the Cluster
// API copy is unpaused with its finalizer (its InfraMachine before it: see infraStep), 4 the
// Machine API finalizer is off, 5 done.
func stepToClusterAPI(m *machinev1beta1.Machine, c *clusterv1.Machine) int {
	switch m.Status.AuthoritativeAPI {
	case machinev1beta1.MachineAuthorityClusterAPI:
		return 5
	case machinev1beta1.MachineAuthorityMigrating:
	default:
		return 0
	}
	switch {
	case !controllerutil.ContainsFinalizer(m, machinev1beta1.MachineFinalizer):
		return 4
	case !gate.HasPausedAnnotation(c) && controllerutil.ContainsFinalizer(c, clusterv1.MachineFinalizer):
		return 3
	case mapicond.IsTrue(m.Status.Conditions, gate.PausedCondition):
		return 2
	}
	return 1
}

// stepToMachineAPI: 1 Migrating, 2 the Cluster API copy reports Paused=True at its
// generation, 3 the Machine API finalizer is on, 4 the Cluster API finalizer is off, 5 done
// (the Machine API side is unpaused by its status saying MachineAPI).
func stepToMachineAPI(m *machinev1beta1.Machine, c *clusterv1.Machine) int {
	switch m.Status.AuthoritativeAPI {
	case machinev1beta1.MachineAuthorityMachineAPI:
		return 5
	case machinev1beta1.MachineAuthorityMigrating:
	default:
		return 0
	}
	pc := meta.FindStatusCondition(c.Status.Conditions, clusterv1.PausedCondition)
	switch {
	case !controllerutil.ContainsFinalizer(c, clusterv1.MachineFinalizer):
		return 4
	case controllerutil.ContainsFinalizer(m, machinev1beta1.MachineFinalizer):
		return 3
	case pc != nil && pc.Status == "True" && pc.ObservedGeneration >= c.Generation:
		return 2
	}
	return 1
}

func crashSteps(name string, to machinev1beta1.MachineAuthority) []crashStep {
	n := celNamed(name)
	mapiF, capiF := machinev1beta1.MachineFinalizer, clusterv1.MachineFinalizer
	const mapiGroup, capiGroup = "machine.openshift.io", "cluster.x-k8s.io"
	if to == machinev1beta1.MachineAuthorityClusterAPI {
		return []crashStep{
			{"Migrating", hold{"the Machine API copy's Paused=True", mapiGroup, "machines/status",
				n + " && " + celHasCondition("object", "Paused", "True") + " && !" + celHasCondition("oldObject", "Paused", "True")}},
			{"old side Paused=True", hold{"unpausing the Cluster API copy (its finalizer with it)", capiGroup, "machines",
				n + " && " + celHasAnnotation("oldObject", clusterv1.PausedAnnotation) + " && !" + celHasAnnotation("object", clusterv1.PausedAnnotation)}},
			{"new side unpaused", hold{"removing the Machine API finalizer", mapiGroup, "machines",
				n + " && " + celHasFinalizer("oldObject", mapiF) + " && !" + celHasFinalizer("object", mapiF)}},
			{"old-side finalizer removed", hold{"status.authoritativeAPI: ClusterAPI", mapiGroup, "machines/status",
				n + " && object.status.?authoritativeAPI.orValue('') == 'ClusterAPI' && oldObject.status.?authoritativeAPI.orValue('') == 'Migrating'"}},
		}
	}
	return []crashStep{
		{"Migrating", hold{"the Cluster API copy's Paused=True", capiGroup, "machines/status",
			n + " && " + celHasCondition("object", "Paused", "True") + " && !" + celHasCondition("oldObject", "Paused", "True")}},
		{"old side Paused=True", hold{"adding the Machine API finalizer", mapiGroup, "machines",
			n + " && " + celHasFinalizer("object", mapiF) + " && !" + celHasFinalizer("oldObject", mapiF)}},
		{"new-side finalizer added", hold{"removing the Cluster API finalizer", capiGroup, "machines",
			n + " && " + celHasFinalizer("oldObject", capiF) + " && !" + celHasFinalizer("object", capiF)}},
		{"old-side finalizer removed", hold{"status.authoritativeAPI: MachineAPI (which unpauses the Machine API side)", mapiGroup, "machines/status",
			n + " && object.status.?authoritativeAPI.orValue('') == 'MachineAPI' && oldObject.status.?authoritativeAPI.orValue('') == 'Migrating'"}},
	}
}

// infraCrashSteps are crashSteps with the InfraMachine's own writes made stopping points
// too. To the Cluster API the InfraMachine is unpaused (with its provider's finalizer) before
// the Cluster API Machine, so a step "InfraMachine unpaused" comes between "old side
// Paused=True" (now held before the InfraMachine's unpause) and "new side unpaused" (held, as
// the Machine's unpause was, before it). Back to the Machine API the provider's finalizer
// leaves the paused InfraMachine after the Cluster API Machine's finalizer, so "old-side
// finalizer removed" is held before that removal and a step "provider finalizer removed"
// follows; "old side Paused=True" there also waits for the provider's own Paused=True. The
// InfraMachine's kind, group and finalizers come from the provider registry.
func infraCrashSteps(e *testenv.Env, p provider.Provider, name, infraName string, to machinev1beta1.MachineAuthority) []crashStep {
	steps := crashSteps(name, to)
	kind, group := p.InfraMachine.Kind, p.InfraMachine.Group
	mapping, err := e.Client.RESTMapper().RESTMapping(p.InfraMachine.GroupKind(), p.InfraMachine.Version)
	if err != nil {
		e.T.Fatal(err)
	}
	n, resource := celNamed(infraName), mapping.Resource.Resource
	if to == machinev1beta1.MachineAuthorityClusterAPI {
		paused := crashStep{steps[1].name, hold{"unpausing the " + kind + " (its provider's finalizer with it)", group, resource,
			n + " && " + celHasAnnotation("oldObject", clusterv1.PausedAnnotation) + " && !" + celHasAnnotation("object", clusterv1.PausedAnnotation)}}
		unpaused := crashStep{kind + " unpaused", steps[1].hold}
		return []crashStep{steps[0], paused, unpaused, steps[2], steps[3]}
	}
	var removals []string
	for _, f := range p.InfraMachineFinalizers {
		removals = append(removals, "("+celHasFinalizer("oldObject", f)+" && !"+celHasFinalizer("object", f)+")")
	}
	steps[1].name = "old side Paused=True (the Machine and its " + kind + ")"
	removed := crashStep{"old-side finalizer removed", hold{"removing the " + p.Name + " provider's finalizer from the " + kind, group, resource,
		n + " && (" + strings.Join(removals, " || ") + ")"}}
	last := steps[3]
	last.name = "provider finalizer removed from the " + kind
	return []crashStep{steps[0], steps[1], steps[2], removed, last}
}

// infraStep is stepToClusterAPI or stepToMachineAPI refined by the InfraMachine (see
// infraCrashSteps): to the Cluster API 1-2 as there, 3 the InfraMachine unpaused, 4 the
// Cluster API Machine unpaused, 5 the Machine API finalizer off, 6 done; back, 1 Migrating, 2
// the Cluster API Machine at its generation and the InfraMachine's provider report
// Paused=True, 3 the Machine API finalizer is on, 4 the Cluster API Machine's finalizer is
// off, 5 the provider's finalizer is off the InfraMachine, 6 done.
func infraStep(to machinev1beta1.MachineAuthority, m *machinev1beta1.Machine, c *clusterv1.Machine, in *infraView) int {
	if to == machinev1beta1.MachineAuthorityClusterAPI {
		switch s := stepToClusterAPI(m, c); {
		case s >= 3:
			return s + 1
		case s == 2 && !in.paused:
			return 3
		default:
			return s
		}
	}
	switch s := stepToMachineAPI(m, c); {
	case s == 5:
		return 6
	case s == 4 && !in.providerFinalizer:
		return 5
	case s == 2 && !in.pausedAck:
		return 1
	default:
		return s
	}
}

// testCrashAtEachStep stops the manager right after each step of a Machine's handover, both
// ways, and restarts it: the handover completes from the objects alone, with the finalizers
// never lost nor doubled, never both sides active, and no cloud instance launched or lost.
//
// Each step is made observable by a hold on the write that would take the handover past
// it: the test waits until the objects show the step, stops the manager (the crash),
// checks the stopped state, moves the hold one write further and restarts.
//
// It runs once per platform, in that platform's own lab (TestOwnLab):
//   - sim: every controller, the simulated InfraMachine controller included, is in machina's
//     manager, so each crash stops the provider too;
//   - aws: the Machine API AWS actuator launches the instance through the EC2 front and the
//     upstream CAPA controller is the Cluster API side's provider: it must adopt the instance
//     (its finalizer on the unpaused AWSMachine, status ready with the same providerID, all
//     written by CAPA) and acknowledge the pause going back. Only machina's manager is
//     crashed: CAPA is a separate process that keeps running through every crash, as it
//     would while machina's pod restarts, and sees each stopped state.

// TestOwnLab gives each platform a lab of its own (platformCase.ownLab) for the crash tests and
// the scenarios that need the Cluster API side to launch instances: on aws the upstream CAPA
// controller is that side's provider.
//
// The platforms' labs run side by side (each subtest waits on conditions, not on time), and
// beside the package's other tests with labs of their own (TestMigration,
// TestMachineHealthCheckMigration, TestMixedClusterHealthCheck, TestPlatformsWithoutController),
// as many at a time as TestMain allows. The upstream lab, the package's longest test by far,
// asks for its turn first. (TestOwnLab was serial once: the other tests then waited for its
// last lab, and the package took 435 s where its tests add up to 856 s of labs, three at a
// time.)
func TestOwnLab(t *testing.T) {
	t.Parallel()
	for _, pc := range append([]platformCase{upstreamCase()}, platformCases()...) {
		t.Run(pc.label(), func(t *testing.T) { testOwnLab(t, pc) })
	}
}

// testOwnLab runs TestOwnLab's scenarios in pc's own lab.
func testOwnLab(t *testing.T, pc platformCase) {
	t.Parallel()
	started := time.Now()
	var e *testenv.Env
	e, pc.cluster = pc.ownLab(t)
	t.Logf("%s lab up in %s", pc.label(), time.Since(started).Round(100*time.Millisecond))
	// The scenarios marked notOnAWS go through machina's own controllers on sim and the AWS
	// platform's real parts (the EC2 front, CAPA) in the upstream lab, so the aws lab (machina's
	// Machine API and Cluster API controllers with CAPA) skips them, for the suite's time:
	// it runs what only it shows, machina's AWS actuator and core beside CAPA through crashes,
	// scaling, launches in flight and the unpaused window.
	for _, c := range []struct {
		name     string
		f        func(*testing.T, *testenv.Env, platformCase)
		notOnAWS bool
		// notUpstream: the scenario needs something the upstream controllers do not allow
		// (said at the test).
		notUpstream bool
	}{
		{"CrashAtEachStep", testCrashAtEachStep, false, false},
		{"CrashAtEachStep_MachineSet", testCrashMachineSet, false, false},
		{"MachineSetScaledInClusterAPI", testMachineSetScaledInClusterAPI, false, false},
		{"ScaledWhileMigrating_HandoverCompletes", testScaledWhileMigrating, false, false},
		{"LaunchInFlight_OneInstance", testLaunchInFlight, false, false},
		{"DeleteWhileMigrating", testDeleteWhileMigrating, true, false},
		{"LaunchInUnpausedWindow_NoLeak", testLaunchInUnpausedWindow, false, false},
		{"InfraMachineDeletedMidHandover_Reported", testInfraDeletedMidHandover, true, false},
		{"RollbackFromEveryStep", testRollbackFromEveryStep, true, false},
		{"ControlPlaneMachineSetReplaces_InstanceTerminated", testControlPlaneReplaced, true, false},
		{"LeftoverPausedPair_UnpausedInstanceTakenUp", testLeftoverPausedPair, false, true},
	} {
		if c.notOnAWS && pc.lab == "" && pc.provider.Name == provider.AWS().Name || c.notUpstream && e.Upstream != nil {
			continue
		}
		t.Run(c.name, func(t *testing.T) {
			start := time.Now()
			c.f(t, e.For(t), pc)
			t.Logf("%s: %s", c.name, time.Since(start).Round(100*time.Millisecond))
		})
	}
	if e.Upstream != nil {
		// The other labs' checks are machina's, tested in TestMachineHealthCheckMigration.
		t.Run("MachineHealthCheckHandover", func(t *testing.T) { testMHCHandoverOn(t, e.For(t), pc) })
		t.Run("MixedClusterRemediation", func(t *testing.T) { testMixedRemediationOn(t, e.For(t), pc) })
		// Last: machina is gone afterwards.
		t.Run("Uninstall_MachineAPIOperatorTakesOver", func(t *testing.T) { testUninstall(t, e.For(t), pc) })
	}
}

func testCrashAtEachStep(t *testing.T, e *testenv.Env, pc platformCase) {
	started := time.Now()
	ctx := context.Background()
	rec := watchInfraMachines(t, e, pc.provider)
	const name = "crashy"
	if err := e.Client.Create(ctx, pc.machine(name, 0)); err != nil {
		t.Fatal(err)
	}
	var providerID, infraName string
	e.Eventually(120*time.Second, "Running under the Machine API and synchronised", func(ctx context.Context) (bool, string, error) {
		m, c, err := getBoth(ctx, e, name)
		if err != nil {
			return false, err.Error(), nil
		}
		if m.Spec.ProviderID != nil {
			providerID = *m.Spec.ProviderID
		}
		in, err := getInfra(ctx, e, pc.provider, c)
		if err != nil {
			return false, err.Error(), nil
		}
		infraName = in.obj.GetName()
		return m.Status.Phase != nil && *m.Status.Phase == "Running" && c.Status.Phase == "Running" &&
				m.Status.SynchronizedGeneration == m.Generation && mapicond.IsTrue(m.Status.Conditions, authority.SynchronizedCondition) &&
				condStatus(m.Status.Conditions, gate.PausedCondition) == "False" && in.paused && !in.providerFinalizer,
			fmt.Sprintf("phase %v capi %q %s; %s", m.Status.Phase, c.Status.Phase, cond(m, authority.SynchronizedCondition), in), nil
	})
	before, err := e.Cloud.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("Machine %s runs on %s under the Machine API after %s", name, providerID, time.Since(started).Round(100*time.Millisecond))

	crashThrough(t, e, pc, name, infraName, machinev1beta1.MachineAuthorityClusterAPI, providerID, before)
	e.Eventually(3*time.Minute, "the Cluster API's provider runs the same instance", func(ctx context.Context) (bool, string, error) {
		_, c, in, err := getAll(ctx, e, pc.provider, name)
		if err != nil {
			return false, err.Error(), nil
		}
		writer := pc.infraWriter == "" || statusWrittenBy(in.obj, pc.infraWriter)
		// The Cluster API Machine controller has stored the end of its pause: a Paused=True
		// left from before would pass for the acknowledgement of the next handover's pause.
		resumed := meta.IsStatusConditionFalse(c.Status.Conditions, clusterv1.PausedCondition)
		return in.providerID == providerID && c.Spec.ProviderID == providerID && c.Status.Phase == "Running" && !in.paused &&
				in.providerFinalizer && in.provisioned && in.instanceState == string(api.StateRunning) && writer && resumed,
			fmt.Sprintf("capi phase %q providerID %q Paused=False %v; %s; status written by %q: %v", c.Status.Phase, c.Spec.ProviderID, resumed,
				in, pc.infraWriter, writer), nil
	})
	t.Logf("handed to the Cluster API after %s", time.Since(started).Round(100*time.Millisecond))
	crashThrough(t, e, pc, name, infraName, machinev1beta1.MachineAuthorityMachineAPI, providerID, before)
	e.Eventually(3*time.Minute, "Running under the Machine API again, the provider paused", func(ctx context.Context) (bool, string, error) {
		m, _, in, err := getAll(ctx, e, pc.provider, name)
		if err != nil {
			return false, err.Error(), nil
		}
		return m.Status.Phase != nil && *m.Status.Phase == "Running" && condStatus(m.Status.Conditions, gate.PausedCondition) == "False" &&
				in.paused && in.pausedAck && !in.providerFinalizer,
			fmt.Sprintf("phase %v %s; %s", m.Status.Phase, cond(m, gate.PausedCondition), in), nil
	})
	for _, p := range append(instancesChanged(e, before), instanceRunning(ctx, e, providerID)...) {
		t.Error(p)
	}
	// Between the crashes too, as a watch saw it: the provider's finalizer came with the
	// unpause and left only once the InfraMachine was paused again.
	if h := rec.history(infraName); !slices.Contains(h, infraState{paused: false, finalizer: true}) || h[len(h)-1] != (infraState{paused: true, finalizer: false}) {
		t.Errorf("%s %s went through %v", pc.provider.InfraMachine.Kind, infraName, h)
	}
	if bad := rec.unguardedRemovals(); len(bad) > 0 {
		t.Errorf("provider finalizer removed from an unpaused %s: %v", pc.provider.InfraMachine.Kind, bad)
	}
	t.Logf("Machine %s: both handovers with a crash at every step took %s", name, time.Since(started).Round(100*time.Millisecond))
}

// crashThrough requests the move to `to` and crashes the manager at every step of it.
func crashThrough(t *testing.T, e *testenv.Env, pc platformCase, name, infraName string, to machinev1beta1.MachineAuthority,
	providerID string, before *api.Stats) {
	t.Helper()
	p := pc.provider
	var dropped *finalizerWatch
	if e.Upstream != nil && to == machinev1beta1.MachineAuthorityMachineAPI {
		dropped = watchFinalizerDropped(t, e, name)
	}
	state := func(ctx context.Context) (int, string, []string, error) {
		m, c, in, err := getAll(ctx, e, p, name)
		if err != nil {
			return 0, "", nil, err
		}
		step := c
		if dropped.seen() {
			// The upstream core put its finalizer back on the paused copy after the
			// migration took it off: the step is judged by what the migration did.
			step = c.DeepCopy()
			controllerutil.RemoveFinalizer(step, clusterv1.MachineFinalizer)
		}
		return infraStep(to, m, step, in), describeMachine(m, c) + "; " + in.String(), machineProblems(ctx, e, m, c, in, providerID, before), nil
	}
	crashLoop(t, e, "Machine "+name+" to "+string(to), infraCrashSteps(e, p, name, infraName, to), func() { request(t, e, name, to) }, state)
	m, c, err := getBoth(context.Background(), e, name)
	if err != nil {
		t.Fatal(err)
	}
	if mc := mapicond.Get(m.Status.Conditions, migration.MigrationCondition); mc == nil || mc.Reason != migration.CompletedReason {
		t.Errorf("to %s: AuthorityMigration %s", to, cond(m, migration.MigrationCondition))
	}
	capiActive := to == machinev1beta1.MachineAuthorityClusterAPI
	if controllerutil.ContainsFinalizer(m, machinev1beta1.MachineFinalizer) == capiActive || !capiFinalizerAsActive(e, c, capiActive) ||
		gate.HasPausedAnnotation(c) == capiActive {
		t.Errorf("after the handover to %s: %s", to, describeMachine(m, c))
	}
}

// crashLoop holds the handover before each step's next write in turn: it waits until the
// objects show the step, stops the manager, checks the stopped state (state's problems must
// be empty and the step exactly the one held), lifts the hold, holds the next write and
// restarts. It then waits for the handover to complete and checks the final state too.
// Every step must have been a stopping point.
func crashLoop(t *testing.T, e *testenv.Env, what string, steps []crashStep, request func(),
	state func(ctx context.Context) (step int, desc string, problems []string, err error)) {
	t.Helper()
	done := len(steps) + 1
	lift := steps[0].hold.apply(e)
	request()
	var stoppedAt []int
	for k := 1; k <= len(steps); k++ {
		e.Eventually(120*time.Second, fmt.Sprintf("%s: step %d (%s)", what, k, steps[k-1].name), func(ctx context.Context) (bool, string, error) {
			got, desc, _, err := state(ctx)
			if err != nil {
				return false, err.Error(), nil
			}
			return got >= k, desc, nil
		})
		e.StopManager()
		// The state as the crash left it (read after the manager is gone).
		got, desc, problems, err := state(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		stoppedAt = append(stoppedAt, got)
		t.Logf("%s: crashed at step %d (%s): %s", what, got, steps[k-1].name, desc)
		if got != k {
			t.Errorf("%s: the manager stopped at step %d, want exactly step %d (%s)", what, got, k, steps[k-1].name)
		}
		for _, p := range problems {
			t.Errorf("%s, crashed at step %d: %s", what, got, p)
		}
		lift()
		if k < len(steps) {
			lift = steps[k].hold.apply(e)
		}
		e.StartManager()
	}
	want := make([]int, len(steps))
	for i := range want {
		want[i] = i + 1
	}
	if !reflect.DeepEqual(stoppedAt, want) {
		t.Errorf("%s: the crashes hit steps %v, want every step %v", what, stoppedAt, want)
	}
	e.Eventually(120*time.Second, what+": handover completed after the last restart", func(ctx context.Context) (bool, string, error) {
		got, desc, _, err := state(ctx)
		if err != nil {
			return false, err.Error(), nil
		}
		return got == done, desc, nil
	})
	_, _, problems, err := state(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("%s, after the handover: %s", what, p)
	}
}

// machineProblems: whatever step a crash stopped at, the copies keep a guard against losing
// the instance (a controller finalizer on at least one side, none twice, and the InfraMachine
// provider's whenever the Machine API's is off), both keep the sync
// finalizer, no more than one side is active (the Machine API's authority with the Cluster
// API Machine or its InfraMachine unpaused), the Machine and its InfraMachine keep the
// instance, which still runs, and the cloud has launched and terminated nothing.
func machineProblems(ctx context.Context, e *testenv.Env, m *machinev1beta1.Machine, c *clusterv1.Machine, in *infraView,
	providerID string, before *api.Stats) []string {
	p := append(copyProblems(m, c), infraProblems(in, providerID)...)
	if !controllerutil.ContainsFinalizer(m, machinev1beta1.MachineFinalizer) && !controllerutil.ContainsFinalizer(c, clusterv1.MachineFinalizer) {
		p = append(p, "neither side holds its controller finalizer: "+describeMachine(m, c))
	}
	if !controllerutil.ContainsFinalizer(m, machinev1beta1.MachineFinalizer) && !in.providerFinalizer {
		p = append(p, "the Machine API let go of the instance while the "+in.obj.GetKind()+" lacks its provider's finalizer "+
			"(deleting the Cluster API Machine now would leave the instance running): "+describeMachine(m, c)+"; "+in.String())
	}
	if m.Status.AuthoritativeAPI == machinev1beta1.MachineAuthorityMachineAPI && (!gate.HasPausedAnnotation(c) || !in.paused) {
		p = append(p, "both sides active: "+describeMachine(m, c)+"; "+in.String())
	}
	if m.Spec.ProviderID == nil || *m.Spec.ProviderID != providerID {
		p = append(p, fmt.Sprintf("providerID changed to %v, want %s", m.Spec.ProviderID, providerID))
	}
	p = append(p, instanceRunning(ctx, e, providerID)...)
	return append(p, instancesChanged(e, before)...)
}

// copyProblems: no finalizer twice on either copy, the sync finalizer on both, neither deleted.
func copyProblems(objs ...client.Object) []string {
	var p []string
	for _, o := range objs {
		seen := map[string]bool{}
		for _, f := range o.GetFinalizers() {
			if seen[f] {
				p = append(p, fmt.Sprintf("%T %s has finalizer %s twice: %v", o, o.GetName(), f, o.GetFinalizers()))
			}
			seen[f] = true
		}
		if !seen[authority.SyncFinalizer] {
			p = append(p, fmt.Sprintf("%T %s lost the sync finalizer: %v", o, o.GetName(), o.GetFinalizers()))
		}
		if !o.GetDeletionTimestamp().IsZero() {
			p = append(p, fmt.Sprintf("%T %s is being deleted", o, o.GetName()))
		}
	}
	return p
}

// newInstances reports RunInstances calls (through either of the cloud's fronts) or launched
// instances since before.
func newInstances(e *testenv.Env, before *api.Stats) []string {
	now, err := e.Cloud.Stats(context.Background())
	if err != nil {
		return []string{err.Error()}
	}
	if runs := now.Operations[api.OpRunInstances].Calls - before.Operations[api.OpRunInstances].Calls; runs != 0 || now.InstancesCreated != before.InstancesCreated {
		return []string{fmt.Sprintf("%d RunInstances call(s) and %d new instance(s) since the handovers began", runs, now.InstancesCreated-before.InstancesCreated)}
	}
	return nil
}

// instancesChanged is newInstances plus TerminateInstances calls or terminated instances:
// a handover neither launches nor loses an instance.
func instancesChanged(e *testenv.Env, before *api.Stats) []string {
	now, err := e.Cloud.Stats(context.Background())
	if err != nil {
		return []string{err.Error()}
	}
	p := newInstances(e, before)
	if terms := now.Operations[api.OpTerminateInstances].Calls - before.Operations[api.OpTerminateInstances].Calls; terms != 0 ||
		now.InstancesTerminated != before.InstancesTerminated {
		p = append(p, fmt.Sprintf("%d TerminateInstances call(s) and %d instance(s) terminated since the handovers began", terms, now.InstancesTerminated-before.InstancesTerminated))
	}
	return p
}

func checkNoNewInstance(t *testing.T, e *testenv.Env, before *api.Stats) {
	t.Helper()
	for _, p := range newInstances(e, before) {
		t.Error(p)
	}
}

func describeMachine(m *machinev1beta1.Machine, c *clusterv1.Machine) string {
	pc := meta.FindStatusCondition(c.Status.Conditions, clusterv1.PausedCondition)
	capiPaused := "<none>"
	if pc != nil {
		capiPaused = fmt.Sprintf("%s@%d/%d", pc.Status, pc.ObservedGeneration, c.Generation)
	}
	return fmt.Sprintf("status %q (spec %q) mapi finalizers %v Paused %s; capi finalizers %v paused-annotation %v Paused %s; %s",
		m.Status.AuthoritativeAPI, m.Spec.AuthoritativeAPI, m.Finalizers, condStatus(m.Status.Conditions, gate.PausedCondition), c.Finalizers,
		gate.HasPausedAnnotation(c), capiPaused, cond(m, migration.MigrationCondition))
}

// condStatus is the status of a Machine API condition, "" when it is missing.
func condStatus(conds []machinev1beta1.Condition, t machinev1beta1.ConditionType) string {
	if c := mapicond.Get(conds, t); c != nil {
		return string(c.Status)
	}
	return ""
}

// finalizerWatch records whether a version of a Cluster API Machine without the Cluster API
// Machine controller's finalizer was seen: beside the upstream core, which puts the finalizer
// back on paused Machines at once, that version is the only trace of the migration's taking
// it off on the way back to the Machine API.
type finalizerWatch struct{ dropped atomic.Bool }

func (w *finalizerWatch) seen() bool { return w != nil && w.dropped.Load() }

func watchFinalizerDropped(t *testing.T, e *testenv.Env, name string) *finalizerWatch {
	t.Helper()
	wc, err := client.NewWithWatch(e.Lab.Config, client.Options{Scheme: scheme.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	w, err := wc.Watch(context.Background(), &clusterv1.MachineList{}, client.InNamespace(capiNS), client.MatchingFields{"metadata.name": name})
	if err != nil {
		t.Fatal(err)
	}
	fw := &finalizerWatch{}
	done := make(chan struct{})
	t.Cleanup(func() { w.Stop(); <-done })
	go func() {
		defer close(done)
		for ev := range w.ResultChan() {
			if m, ok := ev.Object.(*clusterv1.Machine); ok && !controllerutil.ContainsFinalizer(m, clusterv1.MachineFinalizer) {
				fw.dropped.Store(true)
			}
		}
	}()
	return fw
}
