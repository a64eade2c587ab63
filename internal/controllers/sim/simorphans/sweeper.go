// Package simorphans terminates the simulated cloud's instances that machina's simulated
// provider launched for an object that is gone while nothing in the cluster records them.
//
// Every launch is preceded by a stored finalizer, so an instance normally outlives its
// Machine or SimMachine only until that finalizer's deletion step terminates it. But a
// delete that races the finalizer write can remove the object with the finalizer on it
// (kubernetes/kubernetes#77988, unfixed in the apiserver): the controller, told the
// finalizer was stored, launches for an object that no longer exists, and nothing would ever
// terminate that instance. The soak found it (docs/migration.md, "Faults below the manager").
package simorphans

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
	"github.com/machina-dev/machina/internal/controllers/sim/simactuator"
	"github.com/machina-dev/machina/internal/controllers/sim/simmachine"
)

// Sweeper terminates, every period, the live instances over Grace old that a launcher below
// tagged as an object's which is gone (or whose name now belongs to an object with another
// UID) while no SimMachine or Machine of either API records them. Level-triggered: it keeps
// no state between sweeps.
type Sweeper struct {
	// Cache reads SimMachines and Machines of both APIs; Reader confirms uncached.
	Cache, Reader client.Reader
	Cloud         *cloudclient.Client
	// Every is the period (DefaultEvery when zero); Grace how old an instance must be before
	// it can be an orphan (DefaultGrace), so a launch whose object a cache has not seen yet is
	// never one.
	Every, Grace time.Duration
}

// Defaults of Sweeper.
const (
	DefaultEvery = 30 * time.Second
	DefaultGrace = time.Minute
)

// launcher is how one of the simulated provider's controllers tags what it launches.
type launcher struct {
	api             string // the machina.dev/api tag
	uidTag, nameTag string // the object's UID and namespace/name
	newObject       func() client.Object
}

// launchers are the simulated provider's controllers that launch one instance per object:
// the SimMachine controller (Cluster API) and the Machine API actuator. A SimMachinePool's
// instances belong to its pool, which terminates what it does not record itself.
var launchers = []launcher{
	{api: clusterv1.GroupVersion.Group, uidTag: simmachine.TagSimMachineUID, nameTag: simmachine.TagSimMachine,
		newObject: func() client.Object { return &infrav1.SimMachine{} }},
	{api: machinev1beta1.GroupName, uidTag: simactuator.TagMachineUID, nameTag: simactuator.TagMachine,
		newObject: func() client.Object { return &machinev1beta1.Machine{} }},
}

// NeedLeaderElection is true: one replica sweeps.
func (*Sweeper) NeedLeaderElection() bool { return true }

// +kubebuilder:rbac:groups=machine.openshift.io,resources=machines,verbs=get;list;watch
// +kubebuilder:rbac:groups=infrastructure.machina.dev,resources=simmachines,verbs=get;list;watch
// +kubebuilder:rbac:groups=cluster.x-k8s.io,resources=machines,verbs=get;list;watch

// Start sweeps every period until ctx ends.
func (o *Sweeper) Start(ctx context.Context) error {
	every := o.Every
	if every == 0 {
		every = DefaultEvery
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
			log.Info("terminated instances whose Machine or SimMachine is gone", "count", n)
		}
	}
}

// candidate is a live instance old enough to be an orphan, with the launcher that tagged it.
type candidate struct {
	inst api.Instance
	by   launcher
}

// Sweep terminates the orphans it finds now and returns how many.
func (o *Sweeper) Sweep(ctx context.Context) (int, error) {
	candidates, err := o.oldEnough(ctx)
	if err != nil || len(candidates) == 0 {
		return 0, err // with none, no need to list what records instances
	}
	known, err := o.recorded(ctx)
	if err != nil {
		return 0, err
	}
	var orphans []string
	for _, c := range candidates {
		if known.owns(c) {
			continue
		}
		if gone, err := o.objectGone(ctx, c); err != nil || !gone {
			continue
		}
		orphans = append(orphans, c.inst.InstanceID)
	}
	if len(orphans) == 0 {
		return 0, nil
	}
	if _, err := o.Cloud.TerminateInstances(ctx, orphans...); err != nil {
		return 0, fmt.Errorf("terminating orphaned instances %v: %w", orphans, err)
	}
	return len(orphans), nil
}

// oldEnough lists each launcher's live instances launched over Grace ago.
func (o *Sweeper) oldEnough(ctx context.Context) ([]candidate, error) {
	grace := o.Grace
	if grace == 0 {
		grace = DefaultGrace
	}
	var out []candidate
	for _, l := range launchers {
		live, err := o.Cloud.DescribeInstances(ctx, api.DescribeInstancesRequest{
			Tags:   map[string]string{l.uidTag: "*", simmachine.TagAPI: l.api},
			States: []api.InstanceState{api.StatePending, api.StateRunning, api.StateStopping, api.StateStopped},
		})
		if err != nil {
			return nil, err
		}
		live = slices.DeleteFunc(live, func(inst api.Instance) bool { return time.Since(inst.LaunchTime) < grace })
		for _, inst := range live {
			out = append(out, candidate{inst: inst, by: l})
		}
	}
	return out, nil
}

// recordedInstances are what the cluster knows of instances: the UIDs of the SimMachines and
// Machine API Machines, and every providerID a SimMachine or a Machine of either API records.
type recordedInstances struct {
	uids        map[types.UID]bool
	providerIDs map[string]bool
}

// owns says whether an instance is still someone's: the object it was launched for exists,
// or a SimMachine or Machine records it (adopted, or handed to the other API in a migration).
func (k recordedInstances) owns(c candidate) bool {
	return k.uids[types.UID(c.inst.Tags[c.by.uidTag])] ||
		k.providerIDs[api.FormatProviderID(c.inst.Region, c.inst.Zone, c.inst.InstanceID)]
}

func (o *Sweeper) recorded(ctx context.Context) (recordedInstances, error) {
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
		k.uids[mapi.Items[i].UID] = true
		if id := mapi.Items[i].Spec.ProviderID; id != nil {
			k.providerIDs[*id] = true
		}
	}
	return k, nil
}

// objectGone confirms, uncached, that the object an instance was launched for no longer
// exists (or its name now belongs to another object).
func (o *Sweeper) objectGone(ctx context.Context, c candidate) (bool, error) {
	ns, name, ok := strings.Cut(c.inst.Tags[c.by.nameTag], "/")
	if !ok || ns == "" || name == "" {
		return false, nil // not tagged as the launcher tags: not ours to judge
	}
	obj := c.by.newObject()
	err := o.Reader.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, obj)
	switch {
	case apierrors.IsNotFound(err):
		return true, nil
	case err != nil:
		return false, err
	}
	return string(obj.GetUID()) != c.inst.Tags[c.by.uidTag], nil
}
