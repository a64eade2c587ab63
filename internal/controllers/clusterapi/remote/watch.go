package remote

import (
	"context"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// +kubebuilder:rbac:groups=cluster.x-k8s.io,resources=clusters,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;list;watch

// SetupWithManager adds c to mgr, so that it starts and stops with the manager, and a
// controller that forgets a Cluster's client and Node cache once the Cluster is gone.
func (c *Clients) SetupWithManager(mgr ctrl.Manager) error {
	if err := mgr.Add(c); err != nil {
		return err
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named("clusterapi-remote").
		For(&clusterv1.Cluster{}).
		Complete(reconcile.Func(c.reconcileCluster))
}

// reconcileCluster forgets the workload cluster of a Cluster that no longer exists.
func (c *Clients) reconcileCluster(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	err := c.Reader.Get(ctx, req.NamespacedName, &clusterv1.Cluster{})
	if apierrors.IsNotFound(err) {
		c.Forget(req.Namespace, req.Name)
		return ctrl.Result{}, nil
	}
	return ctrl.Result{}, client.IgnoreNotFound(err)
}
