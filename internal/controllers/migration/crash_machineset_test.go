package migration_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	"k8s.io/apimachinery/pkg/api/meta"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/machina-dev/machina/internal/controllers/migration"
	"github.com/machina-dev/machina/internal/gate"
	"github.com/machina-dev/machina/internal/mapicond"
	"github.com/machina-dev/machina/internal/testenv"
)

// A MachineSet's handover has fewer steps (the Machine API MachineSet has no controller
// finalizer): to the Cluster API 1 Migrating, 2 the Machine API copy reports Paused=True,
// 3 the Cluster API copy is unpaused, 4 done; back, 1 Migrating, 2 the Cluster API copy
// reports Paused=True at its generation, 3 done. The manager is crashed at each, and the
// MachineSet must neither gain nor lose Machines, nor launch or terminate an instance.
//
// It runs on each platform's own lab (TestOwnLab). On aws the MachineSet's Machine
// is launched by the AWS actuator and stays with the Machine API (only the MachineSet moves),
// so its AWSMachine stays paused and CAPA, running throughout, has nothing to act on: the
// case costs a few manager restarts and shows that the Cluster API MachineSet, unpaused over
// an AWSMachineTemplate, creates and deletes no Machine.
func testCrashMachineSet(t *testing.T, e *testenv.Env, pc platformCase) {
	const name = "crashset"
	if err := e.Client.Create(context.Background(), platformSet(pc, name, 1, pc.small)); err != nil {
		t.Fatal(err)
	}
	waitSet(t, e, name, 1)
	e.Eventually(60*time.Second, "MachineSet synchronised", func(ctx context.Context) (bool, string, error) {
		m, _, err := getSets(ctx, e, name)
		if err != nil {
			return false, err.Error(), nil
		}
		return m.Status.SynchronizedGeneration == m.Generation && condStatus(m.Status.Conditions, gate.PausedCondition) == "False", "", nil
	})
	before, err := e.Cloud.Stats(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	n := celNamed(name)
	toCAPI := []crashStep{
		{"Migrating", hold{"the Machine API copy's Paused=True", "machine.openshift.io", "machinesets/status",
			n + " && " + celHasCondition("object", "Paused", "True") + " && !" + celHasCondition("oldObject", "Paused", "True")}},
		{"old side Paused=True", hold{"unpausing the Cluster API copy", "cluster.x-k8s.io", "machinesets",
			n + " && " + celHasAnnotation("oldObject", clusterv1.PausedAnnotation) + " && !" + celHasAnnotation("object", clusterv1.PausedAnnotation)}},
		{"new side unpaused", hold{"status.authoritativeAPI: ClusterAPI", "machine.openshift.io", "machinesets/status",
			n + " && object.status.?authoritativeAPI.orValue('') == 'ClusterAPI' && oldObject.status.?authoritativeAPI.orValue('') == 'Migrating'"}},
	}
	toMAPI := []crashStep{
		{"Migrating", hold{"the Cluster API copy's Paused=True", "cluster.x-k8s.io", "machinesets/status",
			n + " && " + celHasCondition("object", "Paused", "True") + " && !" + celHasCondition("oldObject", "Paused", "True")}},
		{"old side Paused=True", hold{"status.authoritativeAPI: MachineAPI", "machine.openshift.io", "machinesets/status",
			n + " && object.status.?authoritativeAPI.orValue('') == 'MachineAPI' && oldObject.status.?authoritativeAPI.orValue('') == 'Migrating'"}},
	}
	for _, tc := range []struct {
		to    machinev1beta1.MachineAuthority
		steps []crashStep
	}{{machinev1beta1.MachineAuthorityClusterAPI, toCAPI}, {machinev1beta1.MachineAuthorityMachineAPI, toMAPI}} {
		state := func(ctx context.Context) (int, string, []string, error) {
			m, c, err := getSets(ctx, e, name)
			if err != nil {
				return 0, "", nil, err
			}
			p := copyProblems(m, c)
			if m.Status.AuthoritativeAPI == machinev1beta1.MachineAuthorityMachineAPI && !gate.HasPausedAnnotation(c) {
				p = append(p, "both sides active")
			}
			if mm, cm, _, desc := machinesOf(ctx, e, name); mm != 1 || cm != 1 {
				p = append(p, "the MachineSet's Machines changed:"+desc)
			}
			p = append(p, instancesChanged(e, before)...)
			return setStep(tc.to, m, c), describeSets(m, c), p, nil
		}
		crashLoop(t, e, "MachineSet "+name+" to "+string(tc.to), tc.steps, func() { requestSet(t, e, name, tc.to) }, state)
		m, c, err := getSets(context.Background(), e, name)
		if err != nil {
			t.Fatal(err)
		}
		if mc := mapicond.Get(m.Status.Conditions, migration.MigrationCondition); mc == nil || mc.Reason != migration.CompletedReason ||
			gate.HasPausedAnnotation(c) != (tc.to == machinev1beta1.MachineAuthorityMachineAPI) {
			t.Errorf("after the handover to %s: %s", tc.to, describeSets(m, c))
		}
	}
}

func setStep(to machinev1beta1.MachineAuthority, m *machinev1beta1.MachineSet, c *clusterv1.MachineSet) int {
	switch {
	case m.Status.AuthoritativeAPI == to && to == machinev1beta1.MachineAuthorityClusterAPI:
		return 4
	case m.Status.AuthoritativeAPI == to:
		return 3
	case m.Status.AuthoritativeAPI != machinev1beta1.MachineAuthorityMigrating:
		return 0
	}
	if to == machinev1beta1.MachineAuthorityClusterAPI {
		switch {
		case !gate.HasPausedAnnotation(c):
			return 3
		case condStatus(m.Status.Conditions, gate.PausedCondition) == "True":
			return 2
		}
		return 1
	}
	if pc := meta.FindStatusCondition(c.Status.Conditions, clusterv1.PausedCondition); pc != nil && pc.Status == "True" && pc.ObservedGeneration >= c.Generation {
		return 2
	}
	return 1
}

func getSets(ctx context.Context, e *testenv.Env, name string) (*machinev1beta1.MachineSet, *clusterv1.MachineSet, error) {
	m, c := &machinev1beta1.MachineSet{}, &clusterv1.MachineSet{}
	if err := e.Client.Get(ctx, client.ObjectKey{Namespace: mapiNS, Name: name}, m); err != nil {
		return nil, nil, err
	}
	if err := e.Client.Get(ctx, client.ObjectKey{Namespace: capiNS, Name: name}, c); err != nil {
		return nil, nil, err
	}
	return m, c, nil
}

func requestSet(t *testing.T, e *testenv.Env, name string, to machinev1beta1.MachineAuthority) {
	t.Helper()
	m, _, err := getSets(context.Background(), e, name)
	if err != nil {
		t.Fatal(err)
	}
	base := m.DeepCopy()
	m.Spec.AuthoritativeAPI = to
	if err := e.Client.Patch(context.Background(), m, client.MergeFrom(base)); err != nil {
		t.Fatal(err)
	}
}

func describeSets(m *machinev1beta1.MachineSet, c *clusterv1.MachineSet) string {
	capiPaused := "<none>"
	if pc := meta.FindStatusCondition(c.Status.Conditions, clusterv1.PausedCondition); pc != nil {
		capiPaused = fmt.Sprintf("%s@%d/%d", pc.Status, pc.ObservedGeneration, c.Generation)
	}
	mc := mapicond.Get(m.Status.Conditions, migration.MigrationCondition)
	migr := "<none>"
	if mc != nil {
		migr = mc.Reason
	}
	return fmt.Sprintf("status %q (spec %q) mapi finalizers %v Paused %s; capi finalizers %v paused-annotation %v Paused %s; migration %s",
		m.Status.AuthoritativeAPI, m.Spec.AuthoritativeAPI, m.Finalizers, condStatus(m.Status.Conditions, gate.PausedCondition),
		c.Finalizers, gate.HasPausedAnnotation(c), capiPaused, migr)
}
