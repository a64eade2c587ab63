package machine

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	capierrors "sigs.k8s.io/cluster-api/api/deprecated/errors"
	"sigs.k8s.io/cluster-api/util/conditions"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/machina-dev/machina/internal/controllers/clusterapi/external"
	"github.com/machina-dev/machina/internal/controllers/clusterapi/internal/conds"
	"github.com/machina-dev/machina/internal/events"
	"github.com/machina-dev/machina/internal/requeue"
)

// reconcileNormal runs the steps of a Machine that is not being deleted: bootstrap, then
// infrastructure, then the Node. Each step records its state in a condition; the phase and
// the Ready summary are derived from them at the end.
func (r *Reconciler) reconcileNormal(ctx context.Context, m *clusterv1.Machine, cluster *clusterv1.Cluster) (ctrl.Result, error) {
	oldNode := m.Status.NodeRef.Name
	setCondition(m, clusterv1.MachineDeletingCondition, metav1.ConditionFalse, clusterv1.MachineNotDeletingReason, "")
	var results []ctrl.Result
	var errs []error
	for _, step := range []func(context.Context, *clusterv1.Machine, *clusterv1.Cluster) (ctrl.Result, error){
		r.reconcileBootstrap, r.reconcileInfrastructure, r.reconcileNode,
	} {
		res, err := step(ctx, m, cluster)
		results = append(results, res)
		if err != nil {
			errs = append(errs, err)
		}
	}
	r.updatePhase(m)
	r.setUpToDate(ctx, m)
	// Available waits for spec.minReadySeconds: come back when it has passed.
	results = append(results, ctrl.Result{RequeueAfter: setReady(m)})
	r.progressEvent(m, oldNode)
	if len(errs) > 0 {
		return ctrl.Result{}, errs[0]
	}
	out := ctrl.Result{RequeueAfter: requeue.Jittered(r.Resync, DefaultResync)}
	for _, res := range results {
		if res.RequeueAfter > 0 && res.RequeueAfter < out.RequeueAfter {
			out.RequeueAfter = res.RequeueAfter
		}
	}
	return out, nil
}

// reconcileBootstrap owns the bootstrap config (when there is one) and copies its data
// secret name to spec.bootstrap.dataSecretName once the config is ready.
func (r *Reconciler) reconcileBootstrap(ctx context.Context, m *clusterv1.Machine, _ *clusterv1.Cluster) (ctrl.Result, error) {
	ref := m.Spec.Bootstrap.ConfigRef
	if ref.IsDefined() {
		cfg, err := r.watcher.Get(ctx, r.Resolver, r.Reader, ref, m.Namespace, !hasBootstrapData(m))
		switch {
		case apierrors.IsNotFound(err):
			if !hasBootstrapData(m) {
				setCondition(m, clusterv1.MachineBootstrapConfigReadyCondition, metav1.ConditionFalse,
					clusterv1.MachineBootstrapConfigDoesNotExistReason, fmt.Sprintf("%s %s does not exist", ref.Kind, ref.Name))
				return ctrl.Result{RequeueAfter: WaitRequeue}, nil
			}
		case err != nil:
			setCondition(m, clusterv1.MachineBootstrapConfigReadyCondition, metav1.ConditionUnknown,
				clusterv1.MachineBootstrapConfigInternalErrorReason, err.Error())
			return ctrl.Result{}, err
		default:
			if err := external.EnsureOwned(ctx, r.Client, cfg, m, true, m.Spec.ClusterName); err != nil {
				return ctrl.Result{}, err
			}
			if name := cfg.String("status", "dataSecretName"); name != "" && cfg.Provisioned("dataSecretCreated") &&
				!hasBootstrapData(m) {
				m.Spec.Bootstrap.DataSecretName = ptr.To(name)
				events.Eventf(r.Recorder, m, corev1.EventTypeNormal, "BootstrapDataReady", "%s %s provided bootstrap data Secret %s", ref.Kind, ref.Name, name)
			}
			if !hasBootstrapData(m) {
				msg := fmt.Sprintf("%s %s has not provided bootstrap data yet", ref.Kind, ref.Name)
				if c := cfg.Condition(clusterv1.ReadyCondition); c != nil && c.Message != "" {
					msg += ": " + c.Message
				}
				setCondition(m, clusterv1.MachineBootstrapConfigReadyCondition, metav1.ConditionFalse,
					clusterv1.MachineBootstrapConfigNotReadyReason, msg)
				return ctrl.Result{}, nil
			}
		}
	}
	if pool := machinePoolOwner(m); pool != "" && !ref.IsDefined() && !hasBootstrapData(m) {
		// A MachinePool Machine has no bootstrap of its own: its pool's instances share the
		// pool's bootstrap data, so there is nothing to wait for.
		m.Status.Initialization.BootstrapDataSecretCreated = ptr.To(true)
		setCondition(m, clusterv1.MachineBootstrapConfigReadyCondition, metav1.ConditionTrue,
			clusterv1.MachineBootstrapDataSecretProvidedReason, "bootstrap data is shared by MachinePool "+pool)
		return ctrl.Result{}, nil
	}
	if !hasBootstrapData(m) {
		setCondition(m, clusterv1.MachineBootstrapConfigReadyCondition, metav1.ConditionFalse,
			clusterv1.MachineBootstrapConfigNotReadyReason, "waiting for spec.bootstrap.dataSecretName")
		return ctrl.Result{}, nil
	}
	m.Status.Initialization.BootstrapDataSecretCreated = ptr.To(true)
	setCondition(m, clusterv1.MachineBootstrapConfigReadyCondition, metav1.ConditionTrue,
		clusterv1.MachineBootstrapDataSecretProvidedReason, "")
	return ctrl.Result{}, nil
}

// reconcileInfrastructure owns the InfraMachine and copies what the contract says a
// provider reports: provisioned, providerID, addresses, failure domain, the Ready condition
// and, from v1beta1 providers, terminal failures.
func (r *Reconciler) reconcileInfrastructure(ctx context.Context, m *clusterv1.Machine, _ *clusterv1.Cluster) (ctrl.Result, error) {
	ref := m.Spec.InfrastructureRef
	infra, err := r.watcher.Get(ctx, r.Resolver, r.Reader, ref, m.Namespace, !isProvisioned(m))
	switch {
	case apierrors.IsNotFound(err):
		if isProvisioned(m) && !failed(m) {
			// The contract makes this terminal: the infrastructure went away after it was ready.
			r.fail(m, capierrors.InvalidConfigurationMachineError,
				fmt.Sprintf("%s %s was deleted after the Machine's infrastructure was provisioned", ref.Kind, ref.Name))
		}
		setCondition(m, clusterv1.MachineInfrastructureReadyCondition, metav1.ConditionFalse,
			clusterv1.MachineInfrastructureDoesNotExistReason, fmt.Sprintf("%s %s does not exist", ref.Kind, ref.Name))
		return ctrl.Result{RequeueAfter: WaitRequeue}, nil
	case err != nil:
		setCondition(m, clusterv1.MachineInfrastructureReadyCondition, metav1.ConditionUnknown,
			clusterv1.MachineInfrastructureInternalErrorReason, err.Error())
		return ctrl.Result{}, err
	}
	if err := external.EnsureOwned(ctx, r.Client, infra, m, true, m.Spec.ClusterName); err != nil {
		return ctrl.Result{}, err
	}

	if reason, msg := infra.Failure(); (reason != "" || msg != "") && !failed(m) {
		r.fail(m, capierrors.MachineStatusError(reason), msg)
	}
	if infra.Provisioned("provisioned") && !isProvisioned(m) {
		m.Status.Initialization.InfrastructureProvisioned = ptr.To(true)
	}
	// As the contract has it, spec.providerID is taken once the InfraMachine reports
	// provisioned: a provider stores its providerID before (or with) that flag, and reading
	// it earlier would cost the Machine a spec and status write per provider step.
	if pid := infra.ProviderID(); pid != "" && m.Spec.ProviderID == "" && isProvisioned(m) {
		m.Spec.ProviderID = pid
	}
	if addrs := infra.Addresses(); len(addrs) > 0 && !equality.Semantic.DeepEqual(addrs, m.Status.Addresses) {
		m.Status.Addresses = addrs
	}
	if fd := infra.FailureDomain(); fd != "" {
		m.Status.FailureDomain = fd
	} else if m.Status.FailureDomain == "" {
		m.Status.FailureDomain = m.Spec.FailureDomain
	}
	mirrorInfraReady(m, infra)
	// The InfraMachine's changes are watched: no requeue needed.
	return ctrl.Result{}, nil
}

// progressEvent tells a new Machine's story with one event, when it finds its Node, naming
// the instance it runs on: like upstream, no event for the InfraMachine being provisioned
// (the InfrastructureReady condition and the Provisioned phase say it), so a new Machine costs
// one event write.
func (r *Reconciler) progressEvent(m *clusterv1.Machine, oldNode string) {
	node := m.Status.NodeRef.Name
	if node == "" || node == oldNode {
		return
	}
	ref := m.Spec.InfrastructureRef
	events.Eventf(r.Recorder, m, corev1.EventTypeNormal, "SuccessfulSetNodeRef", "Machine %s has Node %s (%s %s, providerID %s)",
		m.Name, node, ref.Kind, ref.Name, m.Spec.ProviderID)
}

// mirrorInfraReady sets InfrastructureReady from the InfraMachine's Ready condition, or from
// its provisioned flag when it has none.
func mirrorInfraReady(m *clusterv1.Machine, infra *external.Object) {
	if failed(m) {
		d := m.Status.Deprecated.V1Beta1
		setCondition(m, clusterv1.MachineInfrastructureReadyCondition, metav1.ConditionFalse, string(ptr.Deref(d.FailureReason, "Failed")),
			ptr.Deref(d.FailureMessage, ""))
		return
	}
	fallback := conditions.FallbackCondition{Status: metav1.ConditionTrue, Reason: clusterv1.MachineInfrastructureReadyReason}
	if !infra.Provisioned("provisioned") {
		fallback = conditions.FallbackCondition{Status: metav1.ConditionFalse, Reason: clusterv1.MachineInfrastructureNotReadyReason,
			Message: fmt.Sprintf("%s %s is not provisioned yet", infra.GetKind(), infra.GetName())}
	}
	conditions.Set(m, conds.Mirror(infra.Condition(clusterv1.ReadyCondition), clusterv1.ReadyCondition,
		clusterv1.MachineInfrastructureReadyCondition, clusterv1.MachineInfrastructureReadyReason, clusterv1.MachineInfrastructureNotReadyReason, fallback))
}

// fail surfaces a terminal failure: it is kept in status.deprecated.v1beta1 and moves the
// Machine to the Failed phase; only deleting the Machine moves it on.
func (r *Reconciler) fail(m *clusterv1.Machine, reason capierrors.MachineStatusError, msg string) {
	if m.Status.Deprecated == nil {
		m.Status.Deprecated = &clusterv1.MachineDeprecatedStatus{}
	}
	if m.Status.Deprecated.V1Beta1 == nil {
		m.Status.Deprecated.V1Beta1 = &clusterv1.MachineV1Beta1DeprecatedStatus{}
	}
	if reason != "" {
		m.Status.Deprecated.V1Beta1.FailureReason = ptr.To(reason)
	}
	if msg != "" {
		m.Status.Deprecated.V1Beta1.FailureMessage = ptr.To(msg)
	}
	events.Eventf(r.Recorder, m, corev1.EventTypeWarning, "Failed", "%s: %s", reason, msg)
}

// machinePoolOwner returns the name of the MachinePool controlling m, "" when none.
func machinePoolOwner(m *clusterv1.Machine) string {
	if ref := metav1.GetControllerOf(m); ref != nil && ref.Kind == "MachinePool" &&
		strings.HasPrefix(ref.APIVersion, clusterv1.GroupVersion.Group+"/") {
		return ref.Name
	}
	return ""
}
