// Package setctl holds what the Cluster API controllers of replicated objects (MachineSet,
// MachineDeployment, MachinePool) share: the link to their Cluster, deleting the children
// they own, and naming lists in messages. (Spacing the status writes that only move counts is
// internal/controllers/internal/coalesce's.)
package setctl

import (
	"context"
	"fmt"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	kerrors "k8s.io/apimachinery/pkg/util/errors"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// LinkCluster sets the cluster-name label on o and, when o has no owner, an owner reference
// to its Cluster.
func LinkCluster(o client.Object, cluster *clusterv1.Cluster) {
	if o.GetLabels()[clusterv1.ClusterNameLabel] != cluster.Name {
		labels := o.GetLabels()
		if labels == nil {
			labels = map[string]string{}
		}
		labels[clusterv1.ClusterNameLabel] = cluster.Name
		o.SetLabels(labels)
	}
	if len(o.GetOwnerReferences()) == 0 {
		o.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: clusterv1.GroupVersion.String(), Kind: "Cluster",
			Name: cluster.Name, UID: cluster.UID}})
	}
}

// DeleteOwned lists list's kind in namespace ns, asks for the deletion of every item whose
// controller is owner (those not already being deleted) and returns the names of all that
// are left, deleting or not. An item already gone is not an error.
func DeleteOwned(ctx context.Context, c client.Client, list client.ObjectList, ns string, owner types.UID) ([]string, error) {
	if err := c.List(ctx, list, client.InNamespace(ns)); err != nil {
		return nil, err
	}
	items, err := meta.ExtractList(list)
	if err != nil {
		return nil, err
	}
	var left []string
	var errs []error
	for _, item := range items {
		o, ok := item.(client.Object)
		if !ok {
			continue
		}
		if ref := metav1.GetControllerOf(o); ref == nil || ref.UID != owner {
			continue
		}
		left = append(left, o.GetName())
		if o.GetDeletionTimestamp().IsZero() {
			if err := c.Delete(ctx, o); err != nil && !apierrors.IsNotFound(err) {
				errs = append(errs, err)
			}
		}
	}
	return left, kerrors.NewAggregate(errs)
}

// Summarise lists up to five names, then how many more there are.
func Summarise(names []string) string {
	if len(names) <= 5 {
		return strings.Join(names, ", ")
	}
	return strings.Join(names[:5], ", ") + fmt.Sprintf(" and %d more", len(names)-5)
}
