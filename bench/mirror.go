package main

import (
	"context"
	"fmt"
	"os"
	"time"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// mirrorScale measures the first mirroring, as when machina's sync is installed on a cluster
// that already runs n Machine API Machines: a manager without the sync and migration groups
// brings n Machines (MachineSets of 50) to Running, then a manager with every group takes
// its place, and the figures run from its start until every Machine is mirrored
// (Synchronized True at its generation). Writes are the second manager's.
func mirrorScale(n int) (result, error) {
	p, err := migratePlatformFor("sim")
	if err != nil {
		return result{}, err
	}
	before := p.env
	before.groups = "*,-sync,-migration"
	e, err := startEnvWith(before)
	if err != nil {
		return result{}, err
	}
	defer e.stop()
	if _, err := createWorkload(e, p, n); err != nil {
		return result{}, err
	}
	ctx := context.Background()
	if err := waitFor(fmt.Sprintf("%d Machines Running", n), scaleLimit(n), func() (int, error) {
		return machinesLeft(ctx, e.watched, n, func(m *machinev1beta1.Machine) bool {
			return ptr.Deref(m.Status.Phase, "") == machinev1beta1.PhaseRunning && m.Status.NodeRef != nil
		})
	}); err != nil {
		return result{}, err
	}
	e.stopManager()
	fmt.Fprintf(os.Stderr, "bench: %d Machines Running; starting the sync\n", n)
	logStart, ph := logSize(e), e.startPhase()
	k0 := e.kubeletWrite.Load()
	start := time.Now()
	if err := e.startManager(p.env); err != nil {
		return result{}, err
	}
	started := time.Since(start)
	if err := waitFor(fmt.Sprintf("%d Machines mirrored", n), scaleLimit(n), func() (int, error) {
		return machinesLeft(ctx, e.watched, n, func(m *machinev1beta1.Machine) bool {
			return synchronized(m.Status.Conditions) && m.Status.SynchronizedGeneration == m.Generation
		})
	}); err != nil {
		return result{}, err
	}
	elapsed, cpu := time.Since(start), ph.report(n)
	time.Sleep(2 * time.Second) // writes that follow the last mirror count too
	w, err := e.managerWrites()
	if err != nil {
		return result{}, err
	}
	return result{N: n, Seconds: elapsed.Seconds(), ManagerWrites: w, KubeletWrites: e.kubeletWrite.Load() - k0, ManagerPeakRSSMiB: e.managerPeakRSS(),
		Extra: fmt.Sprintf("(writes are per mirrored pair; the manager took %.1fs to start)", started.Seconds()) +
			writeBreakdown(e, logStart, n), Lines: cpu}, nil
}

// machinesLeft counts how many of the n Machine API Machines expected are missing or not
// done yet.
func machinesLeft(ctx context.Context, c client.Reader, n int, done func(*machinev1beta1.Machine) bool) (int, error) {
	var list machinev1beta1.MachineList
	if err := c.List(ctx, &list, client.InNamespace(mapiNS)); err != nil {
		return 0, err
	}
	left := n
	for i := range list.Items {
		if done(&list.Items[i]) {
			left--
		}
	}
	return left, nil
}
