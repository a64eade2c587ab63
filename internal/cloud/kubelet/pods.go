package kubelet

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// syncPods finishes the deletion of the Node's pods whose containers have stopped and
// reports new pods as running. It returns when it next has to look.
func (k *Kubelet) syncPods(ctx context.Context, node *corev1.Node, now time.Time) (time.Duration, error) {
	objs, err := k.pods.ByIndex(podNodeIndex, node.Name)
	if err != nil {
		return 0, err
	}
	var next time.Duration
	for _, o := range objs {
		p := o.(*corev1.Pod)
		if p.DeletionTimestamp != nil {
			at := k.stopTime(p, now)
			if now.Before(at) {
				if d := at.Sub(now); next == 0 || d < next {
					next = d
				}
				continue
			}
			uid := p.UID
			err := k.client.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{
				GracePeriodSeconds: ptr.To[int64](0),
				Preconditions:      &metav1.Preconditions{UID: &uid},
			})
			if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
				return 0, err
			}
			continue
		}
		if p.Status.Phase == corev1.PodPending || p.Status.Phase == "" {
			if err := k.startPod(ctx, node, p, now); err != nil && !apierrors.IsNotFound(err) {
				return 0, err
			}
		}
	}
	return next, nil
}

// stopTime is when a terminating pod's containers have stopped: its grace period (or
// PodStopTime, if shorter) after the kubelet first saw the deletion, as a real kubelet
// counts it. After a restart the count starts again, which only delays the pod.
func (k *Kubelet) stopTime(p *corev1.Pod, now time.Time) time.Time {
	k.mu.Lock()
	seen, ok := k.terminating[p.UID]
	if !ok {
		seen = now
		k.terminating[p.UID] = now
	}
	k.mu.Unlock()
	grace := time.Duration(0)
	if p.DeletionGracePeriodSeconds != nil {
		grace = time.Duration(*p.DeletionGracePeriodSeconds) * time.Second
	}
	if k.opts.PodStopTime > 0 && k.opts.PodStopTime < grace {
		grace = k.opts.PodStopTime
	}
	return seen.Add(grace)
}

// startPod reports a pod bound to the Node as running and ready.
func (k *Kubelet) startPod(ctx context.Context, node *corev1.Node, p *corev1.Pod, now time.Time) error {
	t := metav1.NewTime(now)
	np := p.DeepCopy()
	np.Status.Phase = corev1.PodRunning
	np.Status.StartTime = &t
	var ip string
	for _, a := range node.Status.Addresses {
		if a.Type == corev1.NodeInternalIP {
			ip = a.Address
		}
	}
	if ip != "" {
		np.Status.HostIP = ip
		np.Status.HostIPs = []corev1.HostIP{{IP: ip}}
		if p.Spec.HostNetwork {
			np.Status.PodIP = ip
			np.Status.PodIPs = []corev1.PodIP{{IP: ip}}
		}
	}
	np.Status.Conditions = nil
	for _, ct := range []corev1.PodConditionType{corev1.PodReadyToStartContainers, corev1.PodInitialized,
		corev1.PodScheduled, corev1.ContainersReady, corev1.PodReady} {
		np.Status.Conditions = append(np.Status.Conditions, corev1.PodCondition{Type: ct, Status: corev1.ConditionTrue, LastTransitionTime: t})
	}
	np.Status.ContainerStatuses = nil
	for _, c := range p.Spec.Containers {
		np.Status.ContainerStatuses = append(np.Status.ContainerStatuses, corev1.ContainerStatus{
			Name: c.Name, Image: c.Image, ImageID: c.Image, Ready: true, Started: ptr.To(true),
			ContainerID: "sim://" + string(p.UID) + "/" + c.Name,
			State:       corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: t}},
		})
	}
	_, err := k.client.CoreV1().Pods(p.Namespace).UpdateStatus(ctx, np, metav1.UpdateOptions{})
	return err
}
