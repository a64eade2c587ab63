package kubelet

import (
	"context"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// renewLease creates or renews the Node's Lease in kube-node-lease.
func (k *Kubelet) renewLease(ctx context.Context, node *corev1.Node, now time.Time) error {
	cur, err := k.currentLease(node.Name)
	if err != nil {
		return err
	}
	if cur == nil {
		return k.createLease(ctx, node, now)
	}
	if cur.Spec.RenewTime != nil && now.Sub(cur.Spec.RenewTime.Time) < k.opts.RenewInterval {
		return nil
	}
	l := cur.DeepCopy()
	l.Spec.RenewTime = ptr.To(metav1.NewMicroTime(now))
	l.Spec.HolderIdentity = ptr.To(node.Name)
	l.Spec.LeaseDurationSeconds = ptr.To(int32(k.opts.LeaseDuration / time.Second))
	if len(l.OwnerReferences) == 0 || l.OwnerReferences[0].UID != node.UID {
		// A Lease left over from an earlier Node of the same name.
		l.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: node.Name, UID: node.UID}}
	}
	updated, err := k.client.CoordinationV1().Leases(corev1.NamespaceNodeLease).Update(ctx, l, metav1.UpdateOptions{})
	k.wroteLease(node.Name, updated, err)
	return err
}

func (k *Kubelet) createLease(ctx context.Context, node *corev1.Node, now time.Time) error {
	l := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{
			Name:            node.Name,
			Namespace:       corev1.NamespaceNodeLease,
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: node.Name, UID: node.UID}},
		},
		Spec: coordinationv1.LeaseSpec{
			HolderIdentity:       ptr.To(node.Name),
			LeaseDurationSeconds: ptr.To(int32(k.opts.LeaseDuration / time.Second)),
			RenewTime:            ptr.To(metav1.NewMicroTime(now)),
		},
	}
	leases := k.client.CoordinationV1().Leases(corev1.NamespaceNodeLease)
	created, err := leases.Create(ctx, l, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		// Written by an earlier run of this kubelet (nothing here is remembered across
		// restarts): renew the live object.
		cur, err := leases.Get(ctx, node.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		k.wroteLease(node.Name, cur, nil)
		return k.renewLease(ctx, node, now)
	}
	k.wroteLease(node.Name, created, err)
	return err
}
