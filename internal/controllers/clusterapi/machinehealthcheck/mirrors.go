package machinehealthcheck

import (
	"context"
	"time"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/machina-dev/machina/internal/gate"
)

// The health check of mirrors.
//
// A Cluster API MachineHealthCheck that the Cluster API owns may select Machines the Machine
// API owns: their Cluster API copies are mirrors, paused with cluster.x-k8s.io/paused (and
// carrying the sync finalizer, gate.PausedAsMirror). The Cluster API check controller — the
// upstream core's, and machina's own like it — leaves every paused Machine out, so without
// more those Machines would not be remediated while the check belongs to the Cluster API.
//
// In Mirrors mode this Reconciler does for them what the check would do: it evaluates the
// check's targets (the mirrors among them, and the others so that remediation.triggerIf
// counts the whole selection, as one check over all of it would), and marks each unhealthy
// mirror HealthCheckSucceeded=False and, when triggerIf allows, OwnerRemediated=False. The
// sync then deletes the authoritative Machine API Machine and its MachineSet replaces it
// (machinesync's carryRemediation). It writes nothing else: the check's status belongs to
// the check's controller. Nodes are read from the cluster machina runs in, where the Machine
// API's Nodes are.

// allChecks maps a Node to every check: a Machine API Node names its Machine API Machine,
// not the mirror, and a cluster has few checks.
func (r *Reconciler) allChecks(ctx context.Context, _ client.Object) []reconcile.Request {
	var list clusterv1.MachineHealthCheckList
	if err := r.Client.List(ctx, &list); err != nil {
		return nil
	}
	reqs := make([]reconcile.Request, 0, len(list.Items))
	for i := range list.Items {
		reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
	}
	return reqs
}

// reconcileMirrors evaluates one check for the mirrors it selects.
func (r *Reconciler) reconcileMirrors(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	mhc := &clusterv1.MachineHealthCheck{}
	if err := r.Client.Get(ctx, req.NamespacedName, mhc); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	cluster, err := gate.Cluster(ctx, r.Client, mhc.Namespace, mhc.Spec.ClusterName)
	if err != nil {
		return ctrl.Result{}, err
	}
	// A paused check (the Machine API owns it, or a user paused it) remediates nothing.
	if d, _ := gate.ClusterAPI(mhc, cluster, nil); d.Paused || cluster == nil || !mhc.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil
	}
	targets, err := r.targets(ctx, mhc, cluster)
	if err != nil {
		log.FromContext(ctx).Info("cannot read the Nodes", "error", err.Error())
		return ctrl.Result{RequeueAfter: RemoteRetry}, nil
	}
	var mirrors []*target
	for _, t := range targets {
		if gate.PausedAsMirror(t.machine) {
			mirrors = append(mirrors, t)
		}
	}
	if len(mirrors) == 0 {
		return ctrl.Result{}, nil
	}
	healthy, next := assess(mhc, cluster, targets, time.Now())
	allowed, _, err := triggerAllows(mhc, len(targets), len(targets)-healthy)
	if err != nil {
		return ctrl.Result{}, nil // the check's controller reports it (InvalidTriggerIf)
	}
	return r.reportAll(ctx, mhc, mirrors, allowed, next)
}

// nodeReader is where the Nodes of cluster are read: its workload cluster, or with no
// Remote the cluster the manager runs in.
func (r *Reconciler) nodeReader(ctx context.Context, cluster *clusterv1.Cluster) (client.Reader, error) {
	if r.Remote == nil {
		return r.Client, nil
	}
	return r.Remote.Client(ctx, cluster.Namespace, cluster.Name)
}
