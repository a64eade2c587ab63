package kubelet

import (
	"strconv"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// The kubelet's informers lag behind its own writes: a Node looked at again right after its
// registration, status post or Lease renewal would otherwise be registered again (then read
// back), posted from a stale copy (a conflict) or renewed twice. So the kubelet keeps what it
// last wrote and works from the newer of that and the informer's copy. Nothing else depends
// on it: after a restart the informers are the only source, as before.

// ownNodeLag is how long a registered Node the informer has not shown yet is taken to exist.
const ownNodeLag = 10 * time.Second

type ownNode struct {
	node *corev1.Node
	at   time.Time
}

// currentLease is the newer (by renewTime) of the informer's Lease and the one this kubelet
// last wrote; nil: none. The latter is dropped once the informer has caught up with it.
func (k *Kubelet) currentLease(name string) (*coordinationv1.Lease, error) {
	cached, err := k.leases.Leases(corev1.NamespaceNodeLease).Get(name)
	if err != nil && !apierrors.IsNotFound(err) {
		return nil, err
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	mine := k.ownLeases[name]
	switch {
	case mine == nil:
		return cached, nil
	case cached == nil || renewedAfter(mine, cached):
		return mine, nil
	}
	delete(k.ownLeases, name)
	return cached, nil
}

func renewedAfter(a, b *coordinationv1.Lease) bool {
	return a.Spec.RenewTime != nil && (b.Spec.RenewTime == nil || a.Spec.RenewTime.After(b.Spec.RenewTime.Time))
}

// currentNode is the newer of the informer's Node and the one this kubelet last wrote; the
// latter is dropped once the informer has caught up with it, or, for a Node the informer
// never showed, after ownNodeLag (it was deleted meanwhile).
func (k *Kubelet) currentNode(name string, now time.Time) (*corev1.Node, bool, error) {
	cached, err := k.nodes.Get(name)
	if err != nil && !apierrors.IsNotFound(err) {
		return nil, false, err
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	mine, ok := k.ownNodes[name]
	switch {
	case ok && cached == nil && now.Sub(mine.at) < ownNodeLag:
		return mine.node, true, nil
	case ok && cached != nil && newerVersion(mine.node.ResourceVersion, cached.ResourceVersion):
		return mine.node, true, nil
	}
	delete(k.ownNodes, name)
	return cached, cached != nil, nil
}

// newerVersion compares two resourceVersions of one object (the apiserver's are numbers; any
// that are not count as not newer).
func newerVersion(a, b string) bool {
	x, errA := strconv.ParseUint(a, 10, 64)
	y, errB := strconv.ParseUint(b, 10, 64)
	return errA == nil && errB == nil && x > y
}

// wroteNode records the Node a write returned; a Node gone or changed under us is
// forgotten.
func (k *Kubelet) wroteNode(name string, n *corev1.Node, err error, now time.Time) {
	k.mu.Lock()
	defer k.mu.Unlock()
	switch {
	case err == nil && n != nil:
		k.ownNodes[name] = ownNode{node: n, at: now}
	case apierrors.IsNotFound(err) || apierrors.IsConflict(err):
		delete(k.ownNodes, name)
	}
}

// wroteLease records the Lease a write returned; a Lease that is gone or changed under us is
// forgotten, so that the next look starts from the informer again.
func (k *Kubelet) wroteLease(name string, l *coordinationv1.Lease, err error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	switch {
	case err == nil && l != nil:
		k.ownLeases[name] = l
	case apierrors.IsNotFound(err) || apierrors.IsConflict(err):
		delete(k.ownLeases, name)
	}
}

// forget drops what this kubelet remembers of a Node and its Lease (the Node is gone).
func (k *Kubelet) forget(name string) {
	k.mu.Lock()
	delete(k.ownLeases, name)
	delete(k.ownNodes, name)
	k.mu.Unlock()
}
