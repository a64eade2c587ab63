package simmachine

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/machina-dev/machina/api/infrastructure/v1alpha1"
	"github.com/machina-dev/machina/internal/cloud/api"
	cloudclient "github.com/machina-dev/machina/internal/cloud/client"
)

// OrphanSweeper terminates the instances this controller launched whose SimMachine is gone
// while nothing records them. The finalizer is stored before a launch, but a delete that
// races the finalizer write can still remove the SimMachine with the finalizer on it
// (kubernetes/kubernetes#77988, unfixed in the apiserver): the pass then launches for an
// object that no longer exists, and nothing would ever terminate that instance. Level-
// triggered: every period it looks at every live instance tagged as a SimMachine's.
type OrphanSweeper struct {
	// Cache reads SimMachines and Machines of both APIs; Reader confirms uncached.
	Cache, Reader client.Reader
	Cloud         *cloudclient.Client
	// Every is the period (DefaultOrphanSweep when zero); Grace how old an instance must be
	// before it can be an orphan (DefaultOrphanGrace), so a launch whose SimMachine a cache
	// has not seen yet is never one.
	Every, Grace time.Duration
}

// Defaults of OrphanSweeper.
const (
	DefaultOrphanSweep = 30 * time.Second
	DefaultOrphanGrace = time.Minute
)

// NeedLeaderElection is true: one replica sweeps.
func (*OrphanSweeper) NeedLeaderElection() bool { return true }

// +kubebuilder:rbac:groups=machine.openshift.io,resources=machines,verbs=get;list;watch

// Start sweeps every period until ctx ends.
func (o *OrphanSweeper) Start(ctx context.Context) error {
	every := o.Every
	if every == 0 {
		every = DefaultOrphanSweep
	}
	log := ctrl.LoggerFrom(ctx).WithName("sim-orphan-sweeper")
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(every):
		}
		if n, err := o.Sweep(ctx); err != nil {
			log.Error(err, "sweeping orphaned instances")
		} else if n > 0 {
			log.Info("terminated instances whose SimMachine is gone", "count", n)
		}
	}
}

// Sweep terminates the orphans it finds now and returns how many.
func (o *OrphanSweeper) Sweep(ctx context.Context) (int, error) {
	live, err := o.Cloud.DescribeInstances(ctx, api.DescribeInstancesRequest{
		Tags:   map[string]string{TagSimMachineUID: "*", TagAPI: clusterv1.GroupVersion.Group},
		States: []api.InstanceState{api.StatePending, api.StateRunning, api.StateStopping, api.StateStopped},
	})
	if err != nil {
		return 0, err
	}
	grace := o.Grace
	if grace == 0 {
		grace = DefaultOrphanGrace
	}
	live = slices.DeleteFunc(live, func(inst api.Instance) bool { return time.Since(inst.LaunchTime) < grace })
	if len(live) == 0 {
		return 0, nil // nothing old enough to be an orphan: no need to list what records instances
	}
	known, err := o.recorded(ctx)
	if err != nil {
		return 0, err
	}
	var orphans []string
	for _, inst := range live {
		if known.owns(inst) {
			continue
		}
		if gone, err := o.simMachineGone(ctx, inst); err != nil || !gone {
			continue
		}
		orphans = append(orphans, inst.InstanceID)
	}
	if len(orphans) == 0 {
		return 0, nil
	}
	if _, err := o.Cloud.TerminateInstances(ctx, orphans...); err != nil {
		return 0, fmt.Errorf("terminating orphaned instances %v: %w", orphans, err)
	}
	return len(orphans), nil
}

// recordedInstances are what the cluster knows of instances: the UIDs of the SimMachines and
// every providerID a SimMachine or a Machine of either API records.
type recordedInstances struct {
	uids        map[types.UID]bool
	providerIDs map[string]bool
}

// owns says whether an instance is still someone's: its SimMachine exists, or a SimMachine
// or Machine records it (adopted, or handed to the Machine API in a migration).
func (k recordedInstances) owns(inst api.Instance) bool {
	return k.uids[types.UID(inst.Tags[TagSimMachineUID])] ||
		k.providerIDs[api.FormatProviderID(inst.Region, inst.Zone, inst.InstanceID)]
}

func (o *OrphanSweeper) recorded(ctx context.Context) (recordedInstances, error) {
	k := recordedInstances{uids: map[types.UID]bool{}, providerIDs: map[string]bool{}}
	var sms infrav1.SimMachineList
	var capi clusterv1.MachineList
	var mapi machinev1beta1.MachineList
	for _, l := range []client.ObjectList{&sms, &capi, &mapi} {
		if err := o.Cache.List(ctx, l, client.UnsafeDisableDeepCopy); err != nil {
			return k, err
		}
	}
	for i := range sms.Items {
		k.uids[sms.Items[i].UID] = true
		k.providerIDs[sms.Items[i].Spec.ProviderID] = true
	}
	for i := range capi.Items {
		k.providerIDs[capi.Items[i].Spec.ProviderID] = true
	}
	for i := range mapi.Items {
		if id := mapi.Items[i].Spec.ProviderID; id != nil {
			k.providerIDs[*id] = true
		}
	}
	return k, nil
}

// simMachineGone confirms, uncached, that the SimMachine an instance was launched for no
// longer exists (or its name now belongs to another SimMachine).
func (o *OrphanSweeper) simMachineGone(ctx context.Context, inst api.Instance) (bool, error) {
	ns, name, ok := strings.Cut(inst.Tags[TagSimMachine], "/")
	if !ok || ns == "" || name == "" {
		return false, nil // not tagged as this controller tags: not ours to judge
	}
	sm := &infrav1.SimMachine{}
	err := o.Reader.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, sm)
	switch {
	case apierrors.IsNotFound(err):
		return true, nil
	case err != nil:
		return false, err
	}
	return string(sm.UID) != inst.Tags[TagSimMachineUID], nil
}
