// Package simmachinetemplate is the simulated provider's SimMachineTemplate controller. It
// implements the infrastructure side of Cluster API's opt-in autoscaling from zero: from the
// instance type of spec.template.spec it reports in status.capacity what a Node created from
// the template offers (cpu, memory, pods, ephemeral-storage and the GPU extended resource)
// and in status.nodeInfo its architecture and operating system, both read from the simulated
// cloud's catalogue. The cluster autoscaler reads these when a MachineSet or
// MachineDeployment using the template has no Machines.
package simmachinetemplate

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	infrav1 "github.com/machina-dev/machina/api/infrastructure/v1alpha1"
	"github.com/machina-dev/machina/internal/cloud/api"
	cloudclient "github.com/machina-dev/machina/internal/cloud/client"
	"github.com/machina-dev/machina/internal/events"
	"github.com/machina-dev/machina/internal/gate"
	"github.com/machina-dev/machina/internal/patch"
	"github.com/machina-dev/machina/internal/requeue"
)

// CapacityReportedCondition says whether status.capacity and status.nodeInfo describe the
// template's instance type.
const CapacityReportedCondition = "CapacityReported"

// Reasons of CapacityReported.
const (
	// InstanceTypeFoundReason: capacity and nodeInfo describe the instance type (True).
	InstanceTypeFoundReason = "InstanceTypeFound"
	// InvalidInstanceTypeReason: the catalogue has no such instance type; capacity and
	// nodeInfo were cleared (False).
	InvalidInstanceTypeReason = "InvalidInstanceType"
	// CloudUnavailableReason: the catalogue could not be read; status is left as it was and
	// the lookup retried (Unknown).
	CloudUnavailableReason = "CloudUnavailable"
)

// DefaultOperatingSystem is reported when the image is not in the catalogue.
const DefaultOperatingSystem = "linux"

// DefaultResync is how often a template is looked at again without an event. The catalogue
// only changes when the cloud restarts, so this is slow.
const DefaultResync = 10 * time.Minute

const instanceTypePath = "spec.template.spec.instanceType"

// Reconciler reconciles SimMachineTemplates.
type Reconciler struct {
	Client   client.Client
	Cloud    *cloudclient.Client
	Recorder record.EventRecorder
	// Resync is how often a template is reconciled without an event (DefaultResync when 0).
	Resync time.Duration
}

// +kubebuilder:rbac:groups=infrastructure.machina.dev,resources=simmachinetemplates;simmachinetemplates/status,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=cluster.x-k8s.io,resources=clusters,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=events,verbs=create;patch

// SetupWithManager registers the controller; a Cluster being paused or unpaused brings its
// templates back.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named("sim-simmachinetemplate").
		For(&infrav1.SimMachineTemplate{}).
		Watches(&clusterv1.Cluster{}, handler.EnqueueRequestsFromMapFunc(r.clusterToTemplates), builder.WithPredicates(gate.ClusterChanged)).
		WithOptions(controller.Options{MaxConcurrentReconciles: 2}).
		Complete(r)
}

func (r *Reconciler) clusterToTemplates(ctx context.Context, o client.Object) []reconcile.Request {
	var list infrav1.SimMachineTemplateList
	if err := r.Client.List(ctx, &list, client.InNamespace(o.GetNamespace()),
		client.MatchingLabels{clusterv1.ClusterNameLabel: o.GetName()}); err != nil {
		return nil
	}
	out := make([]reconcile.Request, 0, len(list.Items))
	for _, t := range list.Items {
		out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: t.Namespace, Name: t.Name}})
	}
	return out
}

// Reconcile brings one template's status in line with the catalogue.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (res ctrl.Result, retErr error) {
	tmpl := &infrav1.SimMachineTemplate{}
	if err := r.Client.Get(ctx, req.NamespacedName, tmpl); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	helper := patch.NewHelper(tmpl, r.Client)
	defer helper.Finish(ctx, tmpl, &res, &retErr)

	name, cluster, err := r.cluster(ctx, tmpl)
	if err != nil {
		return ctrl.Result{}, err
	}
	if name != "" && cluster == nil {
		// Its Cluster may be paused: wait for it (its creation brings the template back).
		log.FromContext(ctx).V(1).Info("waiting for the Cluster", "cluster", name)
		return ctrl.Result{}, nil
	}
	if d, _ := gate.ClusterAPI(tmpl, cluster, &tmpl.Status.Conditions); d.Paused {
		log.FromContext(ctx).V(1).Info("not reconciling", "reason", d.Message)
		return ctrl.Result{}, nil
	}
	if !tmpl.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil
	}

	spec := tmpl.Spec.Template.Spec
	types, err := r.Cloud.DescribeInstanceTypes(ctx, spec.InstanceType)
	switch {
	case err == nil && len(types) == 1:
	case cloudclient.HasCode(err, api.CodeInvalidInstanceType) || (err == nil && len(types) != 1):
		tmpl.Status.Capacity, tmpl.Status.NodeInfo = nil, nil
		msg := fmt.Sprintf("%s: Invalid value: %q: not in the simulated cloud's catalogue of instance types; status.capacity and status.nodeInfo are cleared",
			instanceTypePath, spec.InstanceType)
		if r.setCondition(tmpl, metav1.ConditionFalse, InvalidInstanceTypeReason, msg) {
			events.Eventf(r.Recorder, tmpl, corev1.EventTypeWarning, InvalidInstanceTypeReason, "%s", msg)
		}
		return ctrl.Result{RequeueAfter: requeue.After(r.Resync, DefaultResync)}, nil
	default:
		r.setCondition(tmpl, metav1.ConditionUnknown, CloudUnavailableReason,
			fmt.Sprintf("reading instance type %q from the simulated cloud: %v", spec.InstanceType, err))
		return ctrl.Result{}, fmt.Errorf("describing instance type %q: %w", spec.InstanceType, err)
	}
	osName, err := r.operatingSystem(ctx, spec.Image)
	if err != nil {
		r.setCondition(tmpl, metav1.ConditionUnknown, CloudUnavailableReason,
			fmt.Sprintf("reading image %q from the simulated cloud: %v", spec.Image, err))
		return ctrl.Result{}, fmt.Errorf("describing image %q: %w", spec.Image, err)
	}
	t := types[0]
	capacity := Capacity(t)
	if !equalResources(tmpl.Status.Capacity, capacity) {
		tmpl.Status.Capacity = capacity
	}
	tmpl.Status.NodeInfo = &infrav1.NodeInfo{Architecture: architecture(t), OperatingSystem: osName}
	r.setCondition(tmpl, metav1.ConditionTrue, InstanceTypeFoundReason,
		fmt.Sprintf("instance type %s: %d vCPU, %d MiB memory, %d GPU, %s/%s", t.Name, t.VCPU, t.MemoryMiB, t.GPU, osName, architecture(t)))
	return ctrl.Result{RequeueAfter: requeue.After(r.Resync, DefaultResync)}, nil
}

// Capacity is the capacity of a Node of instance type t, as the simulated kubelet registers
// it: cpu, memory, pods, ephemeral-storage and, when the type has GPUs, the GPU resource
// (nvidia.com/gpu unless the catalogue names another).
func Capacity(t api.InstanceType) corev1.ResourceList {
	maxPods, storage := t.MaxPods, t.EphemeralStorageGiB
	if maxPods == 0 {
		maxPods = 110
	}
	if storage == 0 {
		storage = 100
	}
	out := corev1.ResourceList{
		corev1.ResourceCPU:              *resource.NewQuantity(int64(t.VCPU), resource.DecimalSI),
		corev1.ResourceMemory:           *resource.NewQuantity(t.MemoryMiB<<20, resource.BinarySI),
		corev1.ResourcePods:             *resource.NewQuantity(int64(maxPods), resource.DecimalSI),
		corev1.ResourceEphemeralStorage: *resource.NewQuantity(int64(storage)<<30, resource.BinarySI),
	}
	if t.GPU > 0 {
		name := t.GPUResource
		if name == "" {
			name = "nvidia.com/gpu"
		}
		out[corev1.ResourceName(name)] = *resource.NewQuantity(int64(t.GPU), resource.DecimalSI)
	}
	return out
}

func architecture(t api.InstanceType) string {
	if t.Architecture == "" {
		return "amd64"
	}
	return t.Architecture
}

// equalResources compares quantities by value, so a stored "16Gi" equals a computed 17179869184.
func equalResources(a, b corev1.ResourceList) bool {
	if len(a) != len(b) {
		return false
	}
	for k, va := range a {
		vb, ok := b[k]
		if !ok || va.Cmp(vb) != 0 {
			return false
		}
	}
	return true
}

// operatingSystem is the catalogue's operating system of an image; DefaultOperatingSystem
// when the image is not in the catalogue (launching it will fail, which is the SimMachine's
// business, not the autoscaler's).
func (r *Reconciler) operatingSystem(ctx context.Context, image string) (string, error) {
	if image == "" {
		return DefaultOperatingSystem, nil
	}
	images, err := r.Cloud.DescribeImages(ctx, image)
	switch {
	case cloudclient.IsInvalid(err):
		return DefaultOperatingSystem, nil
	case err != nil:
		return "", err
	case len(images) == 1 && images[0].OperatingSystem != "":
		return images[0].OperatingSystem, nil
	default:
		return DefaultOperatingSystem, nil
	}
}

func (r *Reconciler) setCondition(tmpl *infrav1.SimMachineTemplate, s metav1.ConditionStatus, reason, msg string) bool {
	return meta.SetStatusCondition(&tmpl.Status.Conditions, metav1.Condition{Type: CapacityReportedCondition,
		Status: s, Reason: reason, Message: msg, ObservedGeneration: tmpl.Generation})
}

// cluster returns the name of the template's Cluster (its cluster-name label or a Cluster
// owner reference; empty when neither) and the Cluster, nil when there is no such Cluster.
func (r *Reconciler) cluster(ctx context.Context, tmpl *infrav1.SimMachineTemplate) (string, *clusterv1.Cluster, error) {
	name := tmpl.Labels[clusterv1.ClusterNameLabel]
	if name == "" {
		for _, ref := range tmpl.OwnerReferences {
			if gv, err := schema.ParseGroupVersion(ref.APIVersion); err == nil && ref.Kind == "Cluster" && gv.Group == clusterv1.GroupVersion.Group {
				name = ref.Name
			}
		}
	}
	cluster, err := gate.Cluster(ctx, r.Client, tmpl.Namespace, name)
	return name, cluster, err
}
