package main

import (
	"context"
	"fmt"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	infrav1 "github.com/machina-dev/machina/api/infrastructure/v1alpha1"
	"github.com/machina-dev/machina/internal/cloud/api"
)

// migrateFloor is migrate's floor: n mirrored pairs (mirror-floor's, written before the
// clock starts), then per Machine the request (spec.authoritativeAPI, sent by the
// benchmark's administrator client as machina migrate sends it, not counted) and the
// handover's 13 writes as docs/performance.md lists them: the sync recording the request's
// generation; Migrating; the Machine API controller's Paused=True; the SimMachine's
// provisioned flag; the SimMachine and the Cluster API Machine unpaused, each taking its
// controller's finalizer; the Machine API finalizer removed; the new authority; the
// MigrationStarted and Migrated events; the SimMachine's and the Cluster API Machine's
// status from their controllers' first passes; the sync's record of the labels it now copies
// onto the Machine API copy (the scenario adds its MachineSets' handovers, one per 50
// Machines, and conflicts).
func migrateFloor(n int) (result, error) {
	return floorRun(n, floorMix{setup: mirrorFloorSetup, before: migrateFloorBefore, machine: migrateFloorMachine,
		watch: []client.Object{&machinev1beta1.Machine{}, &machinev1beta1.MachineSet{}, &clusterv1.Machine{},
			&clusterv1.MachineSet{}, &infrav1.SimMachine{}}})
}

// migrateFloorBefore leaves Machine i Running and mirrored, its pair in f.state.
func migrateFloorBefore(ctx context.Context, f *floorEnv, i int) error {
	if err := mirrorFloorBefore(ctx, f, i); err != nil {
		return err
	}
	p, err := mirrorMachine(ctx, f, i)
	f.state[i] = p
	return err
}

// migrateFloorMachine requests Machine i's move to the Cluster API and sends its handover.
func migrateFloorMachine(ctx context.Context, f *floorEnv, i int) error {
	p := f.state[i].(*mirrorPair)
	m, cm, sm := p.mapi, p.capi, p.sim
	steps := []struct {
		what  string
		write func() error
	}{
		{"the request", func() error {
			return objPatch(ctx, f.client, m, false, func() { m.Spec.AuthoritativeAPI = machinev1beta1.MachineAuthorityClusterAPI })
		}},
		{"the synchronised generation", func() error {
			return objPatch(ctx, f.writer, m, true, func() { m.Status.SynchronizedGeneration = m.Generation })
		}},
		{"Migrating", func() error {
			return objPatch(ctx, f.writer, m, true, func() {
				m.Status.AuthoritativeAPI = machinev1beta1.MachineAuthorityMigrating
				setMAPICondition(m, "AuthorityMigration", corev1.ConditionFalse, "Started")
			})
		}},
		{"MigrationStarted", func() error {
			return f.event(ctx, m, "Machine", "MigrationStarted", "Moving authority from MachineAPI to ClusterAPI")
		}},
		{"Paused=True", func() error {
			return objPatch(ctx, f.writer, m, true, func() { setMAPICondition(m, "Paused", corev1.ConditionTrue, "AuthoritativeAPINotMachineAPI") })
		}},
		{"the SimMachine provisioned", func() error {
			return objPatch(ctx, f.writer, sm, true, func() { sm.Status.Initialization.Provisioned = ptr.To(true) })
		}},
		{"the SimMachine unpaused", func() error {
			return objPatch(ctx, f.writer, sm, false, func() {
				delete(sm.Annotations, clusterv1.PausedAnnotation)
				controllerutil.AddFinalizer(sm, infrav1.SimMachineFinalizer)
			})
		}},
		{"the Machine unpaused", func() error {
			return objPatch(ctx, f.writer, cm, false, func() {
				delete(cm.Annotations, clusterv1.PausedAnnotation)
				controllerutil.AddFinalizer(cm, clusterv1.MachineFinalizer)
			})
		}},
		{"the Machine API finalizer removed", func() error {
			return objPatch(ctx, f.writer, m, false, func() { controllerutil.RemoveFinalizer(m, machinev1beta1.MachineFinalizer) })
		}},
		{"the authority", func() error {
			return objPatch(ctx, f.writer, m, true, func() {
				m.Status.AuthoritativeAPI = machinev1beta1.MachineAuthorityClusterAPI
				m.Status.SynchronizedAPI = machinev1beta1.ClusterAPISynchronized
				setMAPICondition(m, "AuthorityMigration", corev1.ConditionTrue, "Completed")
			})
		}},
		{"Migrated", func() error {
			return f.event(ctx, m, "Machine", "Migrated", "Authority moved from MachineAPI to ClusterAPI")
		}},
		{"the SimMachine's first pass", func() error {
			return objPatch(ctx, f.writer, sm, true, func() {
				sm.Status = simMachineStatus(&api.Instance{InstanceID: "i-" + sm.Name, State: "running", Zone: "sim-east-1a",
					PrivateIP: addressOf(m), Hostname: m.Status.NodeRef.Name})
			})
		}},
		{"the Machine's first pass", func() error {
			return objPatch(ctx, f.writer, cm, true, func() {
				meta.SetStatusCondition(&cm.Status.Conditions, metav1.Condition{Type: clusterv1.PausedCondition, Status: metav1.ConditionFalse,
					Reason: clusterv1.NotPausedReason, ObservedGeneration: cm.Generation})
			})
		}},
		{"the labels the sync copies", func() error {
			return objPatch(ctx, f.writer, m, false, func() { m.Labels["node-role.kubernetes.io/worker"] = "" })
		}},
	}
	for _, s := range steps {
		if err := s.write(); err != nil {
			return fmt.Errorf("machine %s, %s: %w", m.Name, s.what, err)
		}
	}
	return nil
}

// objPatch changes obj and stores the change as a merge patch of obj or of its status.
func objPatch[T client.Object](ctx context.Context, c client.Client, obj T, status bool, change func()) error {
	before := obj.DeepCopyObject().(client.Object)
	change()
	if status {
		return c.Status().Patch(ctx, obj, client.MergeFrom(before))
	}
	return c.Patch(ctx, obj, client.MergeFrom(before))
}

func setMAPICondition(m *machinev1beta1.Machine, t string, status corev1.ConditionStatus, reason string) {
	for i := range m.Status.Conditions {
		if string(m.Status.Conditions[i].Type) == t {
			m.Status.Conditions[i].Status, m.Status.Conditions[i].Reason = status, reason
			m.Status.Conditions[i].LastTransitionTime = metav1.Now()
			return
		}
	}
	m.Status.Conditions = append(m.Status.Conditions, machinev1beta1.Condition{Type: machinev1beta1.ConditionType(t), Status: status,
		Reason: reason, LastTransitionTime: metav1.Now()})
}

// addressOf is the Machine's internal IP.
func addressOf(m *machinev1beta1.Machine) string {
	for _, a := range m.Status.Addresses {
		if a.Type == corev1.NodeInternalIP {
			return a.Address
		}
	}
	return ""
}
