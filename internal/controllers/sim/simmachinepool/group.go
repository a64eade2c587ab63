package simmachinepool

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	infrav1 "github.com/machina-dev/machina/api/infrastructure/v1alpha1"
	"github.com/machina-dev/machina/internal/cloud/api"
	cloudclient "github.com/machina-dev/machina/internal/cloud/client"
	"github.com/machina-dev/machina/internal/events"
	"github.com/machina-dev/machina/internal/requeue"
)

// bootstrapDataKey is the key of the bootstrap data in the pool's data Secret.
const bootstrapDataKey = "value"

// reconcileNormal makes the group exist with the pool's template, keeps one SimMachine per
// member and moves the group towards the MachinePool's replicas.
func (r *Reconciler) reconcileNormal(ctx context.Context, smp *infrav1.SimMachinePool, mp *clusterv1.MachinePool, cluster *clusterv1.Cluster) (ctrl.Result, error) {
	if !ptr.Deref(cluster.Status.Initialization.InfrastructureProvisioned, false) {
		setReady(smp, metav1.ConditionFalse, infrav1.WaitingForClusterInfrastructureReason,
			fmt.Sprintf("waiting for Cluster %s's infrastructure to be provisioned", cluster.Name))
		return ctrl.Result{}, nil
	}
	userData, res, err := r.bootstrapData(ctx, smp, mp)
	if userData == nil || err != nil {
		return res, err
	}
	ref := cluster.Spec.InfrastructureRef
	if ref.Kind != "SimCluster" || ref.APIGroup != infrav1.GroupVersion.Group {
		setReady(smp, metav1.ConditionFalse, infrav1.InvalidConfigurationReason,
			fmt.Sprintf("Cluster %s's infrastructure is %s.%s, not a SimCluster", cluster.Name, ref.Kind, ref.APIGroup))
		return ctrl.Result{}, nil
	}
	var sc infrav1.SimCluster
	if err := r.Client.Get(ctx, client.ObjectKey{Namespace: cluster.Namespace, Name: ref.Name}, &sc); err != nil {
		return ctrl.Result{}, fmt.Errorf("reading SimCluster %s: %w", ref.Name, err)
	}
	zones := mp.Spec.FailureDomains
	if len(zones) == 0 {
		for _, fd := range sc.Status.FailureDomains {
			zones = append(zones, fd.Name)
		}
	}
	tmpl := api.LaunchTemplate{InstanceType: smp.Spec.Template.InstanceType, Image: smp.Spec.Template.Image,
		UserData: userData, Tags: smp.Spec.Template.Tags}
	replicas := int(ptr.Deref(mp.Spec.Replicas, 1))

	group, err := r.ensureGroup(ctx, smp, cluster, &sc, zones, tmpl, replicas)
	if err != nil {
		return r.cloudError(smp, "creating the scaling group", err)
	}
	if group == nil {
		return ctrl.Result{RequeueAfter: WaitRequeue}, nil
	}
	// The cloud does not show a group's user data: a hash of the template last applied is
	// kept on the SimMachinePool to notice a changed bootstrap Secret.
	hash := templateHash(tmpl)
	if !sameTemplate(group.LaunchTemplate, tmpl) || smp.Annotations[TemplateHashAnnotation] != hash {
		updated, err := r.Cloud.UpdateScalingGroup(ctx, api.UpdateScalingGroupRequest{ScalingGroupID: group.ScalingGroupID, LaunchTemplate: &tmpl})
		if err != nil {
			return r.cloudError(smp, "updating the launch template", err)
		}
		if updated.LaunchTemplateVersion != group.LaunchTemplateVersion {
			events.Eventf(r.Recorder, smp, corev1.EventTypeNormal, "LaunchTemplateUpdated", "Scaling group %s launches version %d of the template",
				group.ScalingGroupID, updated.LaunchTemplateVersion)
		}
		group = updated
		if smp.Annotations == nil {
			smp.Annotations = map[string]string{}
		}
		smp.Annotations[TemplateHashAnnotation] = hash
	}
	smp.Status.InfrastructureMachineKind = "SimMachine"
	if !ptr.Deref(smp.Status.Initialization.Provisioned, false) {
		smp.Status.Initialization.Provisioned = ptr.To(true)
		events.Eventf(r.Recorder, smp, corev1.EventTypeNormal, "ScalingGroupCreated", "Scaling group %s is ready", group.ScalingGroupID)
	}

	converged, err := r.reconcileMembers(ctx, smp, mp, group, replicas)
	if err != nil {
		if _, ok := cloudclient.AsError(err); ok {
			return r.cloudError(smp, "managing the group's members", err)
		}
		return ctrl.Result{}, err
	}
	if !converged {
		return ctrl.Result{RequeueAfter: WaitRequeue}, nil
	}
	return ctrl.Result{RequeueAfter: requeue.Jittered(r.Resync, DefaultResync)}, nil
}

// bootstrapData reads the pool's shared bootstrap data; nil data means "not yet" (the
// Ready condition says why).
func (r *Reconciler) bootstrapData(ctx context.Context, smp *infrav1.SimMachinePool, mp *clusterv1.MachinePool) ([]byte, ctrl.Result, error) {
	name := ptr.Deref(mp.Spec.Template.Spec.Bootstrap.DataSecretName, "")
	if name == "" {
		setReady(smp, metav1.ConditionFalse, infrav1.WaitingForBootstrapDataReason, "waiting for the MachinePool's bootstrap data secret")
		return nil, ctrl.Result{}, nil
	}
	var secret corev1.Secret
	if err := r.Client.Get(ctx, client.ObjectKey{Namespace: smp.Namespace, Name: name}, &secret); err != nil {
		if !apierrors.IsNotFound(err) {
			return nil, ctrl.Result{}, err
		}
		setReady(smp, metav1.ConditionFalse, infrav1.WaitingForBootstrapDataReason, fmt.Sprintf("bootstrap data Secret %s not found", name))
		return nil, ctrl.Result{RequeueAfter: SecretRetry}, nil
	}
	data, ok := secret.Data[bootstrapDataKey]
	if !ok {
		setReady(smp, metav1.ConditionFalse, infrav1.WaitingForBootstrapDataReason,
			fmt.Sprintf("bootstrap data Secret %s has no %q key", name, bootstrapDataKey))
		return nil, ctrl.Result{RequeueAfter: SecretRetry}, nil
	}
	return data, ctrl.Result{}, nil
}

// groupName is the scaling group's name: unique per SimMachinePool, which makes creating
// it idempotent.
func groupName(smp *infrav1.SimMachinePool) string { return "simmp-" + string(smp.UID) }

// ensureGroup returns the pool's scaling group, creating it (with the desired capacity
// the MachinePool asks for) when it does not exist.
func (r *Reconciler) ensureGroup(ctx context.Context, smp *infrav1.SimMachinePool, cluster *clusterv1.Cluster, sc *infrav1.SimCluster,
	zones []string, tmpl api.LaunchTemplate, replicas int) (*api.ScalingGroup, error) {
	if id := smp.Status.GroupID; id != "" {
		g, err := r.Cloud.GetScalingGroup(ctx, id)
		if err == nil {
			return g, nil
		}
		if !cloudclient.IsNotFound(err) {
			return nil, err
		}
		events.Eventf(r.Recorder, smp, corev1.EventTypeWarning, "ScalingGroupGone", "Scaling group %s no longer exists; creating it again", id)
		smp.Status.GroupID = ""
	}
	list, err := r.Cloud.DescribeScalingGroups(ctx, api.DescribeScalingGroupsRequest{Names: []string{groupName(smp)}})
	if err != nil {
		return nil, err
	}
	if len(list) > 0 {
		smp.Status.GroupID = list[0].ScalingGroupID
		return &list[0], nil
	}
	resp, err := r.Cloud.CreateScalingGroup(ctx, api.CreateScalingGroupRequest{
		Name: groupName(smp), Region: sc.Spec.Region, Zones: zones, NetworkID: sc.Status.NetworkID,
		DesiredCapacity: replicas, LaunchTemplate: tmpl,
		Tags: map[string]string{TagPool: smp.Namespace + "/" + smp.Name, TagCluster: cluster.Namespace + "/" + cluster.Name,
			"machina.dev/api": clusterv1.GroupVersion.Group},
	})
	if err != nil {
		return nil, err
	}
	smp.Status.GroupID = resp.ScalingGroup.ScalingGroupID
	if smp.Annotations == nil {
		smp.Annotations = map[string]string{}
	}
	smp.Annotations[TemplateHashAnnotation] = templateHash(tmpl)
	return &resp.ScalingGroup, nil
}

// TemplateHashAnnotation records the hash of the launch template (user data included) the
// pool last gave its group.
const TemplateHashAnnotation = "infrastructure.machina.dev/launch-template-hash"

// sameTemplate compares what the cloud shows of a launch template (not the user data).
func sameTemplate(a, b api.LaunchTemplate) bool {
	return a.InstanceType == b.InstanceType && a.Image == b.Image && maps.Equal(nilIfEmpty(a.Tags), nilIfEmpty(b.Tags))
}

func templateHash(t api.LaunchTemplate) string {
	b, _ := json.Marshal(t)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:16])
}

func nilIfEmpty(m map[string]string) map[string]string {
	if len(m) == 0 {
		return nil
	}
	return m
}

// setStatus reports the group's members on the SimMachinePool.
func setStatus(smp *infrav1.SimMachinePool, group *api.ScalingGroup) {
	ids := make([]string, 0, len(group.Instances))
	for _, in := range group.Instances {
		ids = append(ids, in.ProviderID)
	}
	sort.Strings(ids)
	if !slices.Equal(ids, smp.Spec.ProviderIDList) {
		smp.Spec.ProviderIDList = ids
	}
	smp.Status.Replicas = ptr.To(int32(len(group.Instances)))
}

// reconcileDelete deletes the scaling group (terminating its members) and the pool's
// Machines and SimMachines, and lets the SimMachinePool go once they are all gone. A pool
// that is deleted does not drain: its Machines are marked to skip it.
func (r *Reconciler) reconcileDelete(ctx context.Context, smp *infrav1.SimMachinePool, mp *clusterv1.MachinePool) (ctrl.Result, error) {
	if !controllerutil.ContainsFinalizer(smp, infrav1.SimMachinePoolFinalizer) {
		return ctrl.Result{}, nil
	}
	setReady(smp, metav1.ConditionFalse, GroupDeletingReason, "deleting the scaling group")
	if id := smp.Status.GroupID; id != "" {
		if err := r.Cloud.DeleteScalingGroup(ctx, id); err != nil && !cloudclient.IsNotFound(err) {
			return r.cloudError(smp, "deleting the scaling group", err)
		}
	}
	sms, machines, err := r.listMembers(ctx, smp, mp)
	if err != nil {
		return ctrl.Result{}, err
	}
	for i := range machines {
		if err := r.deleteMachine(ctx, &machines[i], false, "its SimMachinePool is being deleted"); err != nil {
			return ctrl.Result{}, err
		}
	}
	for i := range sms {
		sm := &sms[i]
		if sm.DeletionTimestamp.IsZero() && !ownedByMachine(sm) {
			if err := r.Client.Delete(ctx, sm); err != nil && !apierrors.IsNotFound(err) {
				return ctrl.Result{}, err
			}
		}
	}
	if len(sms) > 0 || len(machines) > 0 {
		setReady(smp, metav1.ConditionFalse, GroupDeletingReason,
			fmt.Sprintf("waiting for %d SimMachine(s) and %d Machine(s) to be deleted", len(sms), len(machines)))
		return ctrl.Result{RequeueAfter: time.Second}, nil
	}
	controllerutil.RemoveFinalizer(smp, infrav1.SimMachinePoolFinalizer)
	return ctrl.Result{}, nil
}

// cloudError records a cloud failure in the Ready condition and retries later (a refused
// request too: the spec may be fixed).
func (r *Reconciler) cloudError(smp *infrav1.SimMachinePool, what string, err error) (ctrl.Result, error) {
	reason := infrav1.CloudErrorReason
	if cloudclient.IsInvalid(err) {
		reason = infrav1.InvalidConfigurationReason
	}
	setReady(smp, metav1.ConditionFalse, reason, fmt.Sprintf("%s: %v", what, err))
	events.Eventf(r.Recorder, smp, corev1.EventTypeWarning, reason, "%s: %v", what, err)
	return ctrl.Result{RequeueAfter: 10 * WaitRequeue / 2}, nil
}
