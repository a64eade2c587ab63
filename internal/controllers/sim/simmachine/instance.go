package simmachine

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/log"

	infrav1 "github.com/machina-dev/machina/api/infrastructure/v1alpha1"
	"github.com/machina-dev/machina/internal/cloud/api"
	cloudclient "github.com/machina-dev/machina/internal/cloud/client"
	"github.com/machina-dev/machina/internal/events"
	"github.com/machina-dev/machina/internal/requeue"
)

// Tags the controller puts on every instance it launches.
const (
	TagSimMachineUID = "machina.dev/simmachine-uid"
	TagSimMachine    = "machina.dev/simmachine"
	TagMachine       = "machina.dev/machine"
	TagCluster       = "machina.dev/cluster"
	TagAPI           = "machina.dev/api"
)

// Reasons of the Ready condition beyond the shared ones.
const (
	InsufficientCapacityReason = "InsufficientCapacity"
	InstanceTerminatingReason  = "InstanceTerminating"
)

// bootstrapDataKey is the key of the bootstrap data in the Machine's data Secret.
const bootstrapDataKey = "value"

// reconcileNormal makes the instance exist and reports it.
func (r *Reconciler) reconcileNormal(ctx context.Context, sm *infrav1.SimMachine, m *clusterv1.Machine, cluster *clusterv1.Cluster) (ctrl.Result, error) {
	if !ptr.Deref(cluster.Status.Initialization.InfrastructureProvisioned, false) {
		setReady(sm, metav1.ConditionFalse, infrav1.WaitingForClusterInfrastructureReason,
			fmt.Sprintf("waiting for Cluster %s's infrastructure to be provisioned", cluster.Name))
		return ctrl.Result{}, nil
	}

	// An instance named by spec.providerID (ours from an earlier pass, or one adopted from
	// another API) is the only instance this SimMachine may ever have.
	if sm.Spec.ProviderID != "" {
		pid, err := api.ParseProviderID(sm.Spec.ProviderID)
		if err != nil {
			r.invalid(sm, "spec.providerID: "+err.Error())
			return ctrl.Result{}, nil
		}
		inst, err := r.Cloud.GetInstance(ctx, pid.InstanceID)
		if cloudclient.IsNotFound(err) {
			sm.Status.InstanceState = string(api.StateTerminated)
			setReady(sm, metav1.ConditionFalse, infrav1.InstanceTerminatedReason,
				fmt.Sprintf("instance %s no longer exists", pid.InstanceID))
			return ctrl.Result{RequeueAfter: requeue.Jittered(r.Resync, DefaultResync)}, nil
		}
		if err != nil {
			return r.cloudError(sm, "looking up the instance", err)
		}
		return r.apply(sm, inst), nil
	}

	if !hasBootstrapData(m) {
		setReady(sm, metav1.ConditionFalse, infrav1.WaitingForBootstrapDataReason, "waiting for the Machine's bootstrap data secret")
		return ctrl.Result{}, nil
	}
	// A pass that crashed after launching may not have recorded the instance.
	if inst, err := r.findByTag(ctx, sm); err != nil {
		return r.cloudError(sm, "looking up the instance", err)
	} else if inst != nil {
		return r.apply(sm, inst), nil
	}
	// A Machine being deleted gets no instance. Its deletion deletes this SimMachine next,
	// and a delete racing this pass's finalizer write can remove the SimMachine with the
	// finalizer on it (kubernetes/kubernetes#77988): an instance launched now would have no
	// SimMachine left to terminate it. (The soak saw exactly that: a Machine scaled away
	// within a second of its creation.)
	if !m.DeletionTimestamp.IsZero() {
		setReady(sm, metav1.ConditionFalse, infrav1.MachineDeletingReason, fmt.Sprintf("Machine %s is being deleted", m.Name))
		return ctrl.Result{}, nil
	}
	var secret corev1.Secret
	key := client.ObjectKey{Namespace: sm.Namespace, Name: *m.Spec.Bootstrap.DataSecretName}
	if err := r.Client.Get(ctx, key, &secret); err != nil {
		if !apierrors.IsNotFound(err) {
			return ctrl.Result{}, err
		}
		setReady(sm, metav1.ConditionFalse, infrav1.WaitingForBootstrapDataReason, fmt.Sprintf("bootstrap data Secret %s not found", key))
		return ctrl.Result{RequeueAfter: SecretRetry}, nil
	}
	userData, ok := secret.Data[bootstrapDataKey]
	if !ok {
		setReady(sm, metav1.ConditionFalse, infrav1.WaitingForBootstrapDataReason,
			fmt.Sprintf("bootstrap data Secret %s has no %q key", key, bootstrapDataKey))
		return ctrl.Result{RequeueAfter: SecretRetry}, nil
	}

	ref := cluster.Spec.InfrastructureRef
	if ref.Kind != "SimCluster" || ref.APIGroup != infrav1.GroupVersion.Group {
		r.invalid(sm, fmt.Sprintf("Cluster %s's infrastructure is %s.%s, not a SimCluster", cluster.Name, ref.Kind, ref.APIGroup))
		return ctrl.Result{}, nil
	}
	region, network, zones, err := r.simCluster(ctx, cluster)
	if err != nil {
		return ctrl.Result{}, err
	}
	zone := sm.Spec.Zone
	if zone == "" {
		zone = m.Spec.FailureDomain
	}
	if zone == "" && len(zones) > 0 {
		zone = zones[0]
	}
	tags := map[string]string{}
	for k, v := range sm.Spec.Tags {
		tags[k] = v
	}
	tags[TagSimMachineUID] = string(sm.UID)
	tags[TagSimMachine] = sm.Namespace + "/" + sm.Name
	tags[TagMachine] = m.Namespace + "/" + m.Name
	tags[TagCluster] = cluster.Namespace + "/" + cluster.Name
	tags[TagAPI] = clusterv1.GroupVersion.Group
	resp, err := r.Cloud.RunInstances(ctx, api.RunInstancesRequest{
		ClientToken: string(sm.UID), Region: region, Zone: zone, InstanceType: sm.Spec.InstanceType,
		Image: sm.Spec.Image, UserData: userData, Tags: tags, NetworkID: network,
	})
	if err != nil {
		return r.cloudError(sm, "creating the instance", err)
	}
	if resp.Created {
		log.FromContext(ctx).Info("launched an instance", "instance", resp.Instance.InstanceID, "zone", resp.Instance.Zone)
		events.Eventf(r.Recorder, sm, corev1.EventTypeNormal, "InstanceCreated", "Created instance %s in %s", resp.Instance.InstanceID, resp.Instance.Zone)
	}
	return r.apply(sm, &resp.Instance), nil
}

// simCluster reads the region, network and zones of the Cluster's SimCluster.
func (r *Reconciler) simCluster(ctx context.Context, cluster *clusterv1.Cluster) (region, network string, zones []string, err error) {
	ref := cluster.Spec.InfrastructureRef
	var sc infrav1.SimCluster
	if err := r.Client.Get(ctx, client.ObjectKey{Namespace: cluster.Namespace, Name: ref.Name}, &sc); err != nil {
		return "", "", nil, fmt.Errorf("reading SimCluster %s: %w", ref.Name, err)
	}
	for _, fd := range sc.Status.FailureDomains {
		zones = append(zones, fd.Name)
	}
	return sc.Spec.Region, sc.Status.NetworkID, zones, nil
}

// findByTag returns the newest instance launched for this SimMachine, nil when none.
func (r *Reconciler) findByTag(ctx context.Context, sm *infrav1.SimMachine) (*api.Instance, error) {
	list, err := r.Cloud.DescribeInstances(ctx, api.DescribeInstancesRequest{Tags: map[string]string{TagSimMachineUID: string(sm.UID)}})
	if err != nil || len(list) == 0 {
		return nil, err
	}
	return &list[len(list)-1], nil
}

// apply reports the instance on the SimMachine and decides when to look again.
func (r *Reconciler) apply(sm *infrav1.SimMachine, inst *api.Instance) ctrl.Result {
	if sm.Spec.ProviderID == "" {
		sm.Spec.ProviderID = inst.ProviderID
	}
	sm.Status.InstanceID = inst.InstanceID
	sm.Status.InstanceState = string(inst.State)
	sm.Status.FailureDomain = inst.Zone
	sm.Status.Addresses = []clusterv1.MachineAddress{
		{Type: clusterv1.MachineInternalIP, Address: inst.PrivateIP},
		{Type: clusterv1.MachineInternalDNS, Address: inst.Hostname},
		{Type: clusterv1.MachineHostName, Address: inst.Hostname},
	}
	switch inst.State {
	case api.StateRunning:
		if !ptr.Deref(sm.Status.Initialization.Provisioned, false) {
			sm.Status.Initialization.Provisioned = ptr.To(true) // InstanceCreated told the story; no event per state
		}
		setReady(sm, metav1.ConditionTrue, infrav1.InstanceRunningReason, "")
		r.running.Seen(client.ObjectKeyFromObject(sm))
		return ctrl.Result{RequeueAfter: requeue.Spread(r.Resync, DefaultResync, r.running.Len(), requeue.CloudLooks)}
	case api.StatePending:
		setReady(sm, metav1.ConditionFalse, infrav1.InstanceProvisioningReason, "instance "+inst.InstanceID+" is booting")
		return ctrl.Result{RequeueAfter: PendingRequeue}
	default:
		msg := fmt.Sprintf("instance %s is %s", inst.InstanceID, inst.State)
		if inst.StateReason != "" {
			msg += " (" + inst.StateReason + ")"
		}
		setReady(sm, metav1.ConditionFalse, infrav1.InstanceTerminatedReason, msg)
		r.running.Gone(client.ObjectKeyFromObject(sm))
		return ctrl.Result{RequeueAfter: requeue.Jittered(r.Resync, DefaultResync)}
	}
}

// invalid records a terminal configuration error.
func (r *Reconciler) invalid(sm *infrav1.SimMachine, msg string) {
	setReady(sm, metav1.ConditionFalse, infrav1.InvalidConfigurationReason, msg)
	events.Eventf(r.Recorder, sm, corev1.EventTypeWarning, infrav1.InvalidConfigurationReason, "%s", msg)
}

// cloudError classifies a cloud error: a refused request is terminal (InvalidConfiguration);
// no capacity and outages are retried with a condition saying why, never a failure.
func (r *Reconciler) cloudError(sm *infrav1.SimMachine, what string, err error) (ctrl.Result, error) {
	switch {
	case cloudclient.IsInvalid(err):
		msg := err.Error()
		if ae, ok := cloudclient.AsError(err); ok {
			msg = ae.Message
		}
		if f := cloudclient.InvalidField(err); f != "" {
			msg = f + ": " + msg
		}
		r.invalid(sm, what+": "+msg)
		return ctrl.Result{}, nil
	case cloudclient.IsCapacity(err):
		setReady(sm, metav1.ConditionFalse, InsufficientCapacityReason, fmt.Sprintf("%s: %v", what, err))
		events.Eventf(r.Recorder, sm, corev1.EventTypeWarning, InsufficientCapacityReason, "%s: %v", what, err)
		return ctrl.Result{RequeueAfter: CapacityRetry}, nil
	default:
		setReady(sm, metav1.ConditionFalse, infrav1.CloudErrorReason, fmt.Sprintf("%s: %v", what, err))
		events.Eventf(r.Recorder, sm, corev1.EventTypeWarning, infrav1.CloudErrorReason, "%s: %v", what, err)
		return ctrl.Result{RequeueAfter: UnavailableRetry}, nil
	}
}

// reconcileDelete terminates the instance, waits until it is gone and lets the SimMachine go.
func (r *Reconciler) reconcileDelete(ctx context.Context, sm *infrav1.SimMachine) (ctrl.Result, error) {
	if !controllerutil.ContainsFinalizer(sm, infrav1.SimMachineFinalizer) {
		return ctrl.Result{}, nil
	}
	var inst *api.Instance
	var err error
	lookup := "by providerID " + sm.Spec.ProviderID
	if sm.Spec.ProviderID != "" {
		pid, perr := api.ParseProviderID(sm.Spec.ProviderID)
		if perr == nil {
			inst, err = r.Cloud.GetInstance(ctx, pid.InstanceID)
			if cloudclient.IsNotFound(err) {
				inst, err = nil, nil
			}
		}
	} else {
		lookup = "by tag " + TagSimMachineUID + "=" + string(sm.UID)
		inst, err = r.findByTag(ctx, sm)
	}
	if err != nil {
		return r.cloudError(sm, "looking up the instance", err)
	}
	if inst != nil {
		sm.Status.InstanceState = string(inst.State)
		switch inst.State {
		case api.StatePending, api.StateRunning:
			if _, err := r.Cloud.TerminateInstances(ctx, inst.InstanceID); err != nil && !cloudclient.IsNotFound(err) {
				return r.cloudError(sm, "terminating the instance", err)
			}
			events.Eventf(r.Recorder, sm, corev1.EventTypeNormal, "InstanceTerminating", "Terminating instance %s", inst.InstanceID)
			setReady(sm, metav1.ConditionFalse, InstanceTerminatingReason, "terminating instance "+inst.InstanceID)
			return ctrl.Result{RequeueAfter: PendingRequeue}, nil
		case api.StateShuttingDown:
			setReady(sm, metav1.ConditionFalse, InstanceTerminatingReason, "waiting for instance "+inst.InstanceID+" to terminate")
			return ctrl.Result{RequeueAfter: PendingRequeue}, nil
		}
	}
	log.FromContext(ctx).Info("no live instance; releasing the SimMachine", "lookup", lookup)
	setReady(sm, metav1.ConditionFalse, infrav1.InstanceTerminatedReason, "the instance is terminated")
	controllerutil.RemoveFinalizer(sm, infrav1.SimMachineFinalizer)
	return ctrl.Result{}, nil
}

// hasBootstrapData reports whether the Machine names its bootstrap data Secret.
func hasBootstrapData(m *clusterv1.Machine) bool {
	return m.Spec.Bootstrap.DataSecretName != nil && *m.Spec.Bootstrap.DataSecretName != ""
}
