package cluster

import (
	"context"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Probe timing of the RemoteConnectionProbe condition.
const (
	// ProbeInterval is how often a Cluster's workload apiserver is probed at most.
	ProbeInterval = 10 * time.Second
	// ProbeGracePeriod is how long probes may fail before the condition turns False.
	ProbeGracePeriod = 50 * time.Second
	probeTimeout     = 5 * time.Second
)

// probeState remembers the probes of one Cluster.
type probeState struct {
	lastTry, lastSuccess time.Time
	failures             int
}

// prober probes workload clusters, at most once per ProbeInterval each.
type prober struct {
	mu     sync.Mutex
	states map[types.NamespacedName]probeState
}

// probe reaches the Cluster's apiserver through the kubeconfig Secret (any answer of the
// apiserver counts, a refusal included) and sets RemoteConnectionProbe as upstream does:
// False "not established yet" until a first success, True while the last success is within
// the grace period, then False. It returns when to probe again.
func (r *Reconciler) probe(ctx context.Context, cl *clusterv1.Cluster) time.Duration {
	key := types.NamespacedName{Namespace: cl.Namespace, Name: cl.Name}
	r.probes.mu.Lock()
	if r.probes.states == nil {
		r.probes.states = map[types.NamespacedName]probeState{}
	}
	st := r.probes.states[key]
	r.probes.mu.Unlock()
	if r.Remote == nil {
		setCondition(cl, clusterv1.ClusterRemoteConnectionProbeCondition, metav1.ConditionFalse, clusterv1.ClusterRemoteConnectionProbeFailedReason,
			"Remote connection not established yet")
		return 0
	}
	if now := time.Now(); now.Sub(st.lastTry) >= ProbeInterval {
		st.lastTry = now
		if r.reachable(ctx, cl) {
			st.lastSuccess, st.failures = now, 0
		} else {
			st.failures++
		}
		r.probes.mu.Lock()
		r.probes.states[key] = st
		r.probes.mu.Unlock()
	}
	switch {
	case st.lastSuccess.IsZero() && st.failures < 5:
		setCondition(cl, clusterv1.ClusterRemoteConnectionProbeCondition, metav1.ConditionFalse, clusterv1.ClusterRemoteConnectionProbeFailedReason,
			"Remote connection not established yet")
	case time.Since(st.lastSuccess) > ProbeGracePeriod:
		msg := "Remote connection probe failed"
		if !st.lastSuccess.IsZero() {
			msg += ", probe last succeeded at " + st.lastSuccess.UTC().Format(time.RFC3339)
		}
		setCondition(cl, clusterv1.ClusterRemoteConnectionProbeCondition, metav1.ConditionFalse, clusterv1.ClusterRemoteConnectionProbeFailedReason, msg)
	default:
		setCondition(cl, clusterv1.ClusterRemoteConnectionProbeCondition, metav1.ConditionTrue, clusterv1.ClusterRemoteConnectionProbeSucceededReason, "")
	}
	if st.failures > 0 || st.lastSuccess.IsZero() {
		return ProbeInterval
	}
	return 0
}

func (r *Reconciler) reachable(ctx context.Context, cl *clusterv1.Cluster) bool {
	wc, err := r.Remote.Client(ctx, cl.Namespace, cl.Name)
	if err != nil {
		return false
	}
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	err = wc.Get(ctx, client.ObjectKey{Name: metav1.NamespaceSystem}, &corev1.Namespace{})
	_, answered := err.(apierrors.APIStatus)
	return err == nil || answered
}

// forget drops a deleted Cluster's probe state.
func (p *prober) forget(key types.NamespacedName) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.states, key)
}
