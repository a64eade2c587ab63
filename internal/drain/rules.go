package drain

import (
	"math"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// Behavior is what a drain does with a pod.
type Behavior string

// The behaviours a Classifier can choose (the values of Cluster API's MachineDrainRules).
const (
	// BehaviorDrain evicts the pod once every pod of a lower order has left the Node.
	BehaviorDrain Behavior = "Drain"
	// BehaviorSkip leaves the pod on the Node; the drain does not wait for it.
	BehaviorSkip Behavior = "Skip"
	// BehaviorWaitCompleted never evicts the pod but waits until it has finished (phase
	// Succeeded or Failed) or is gone. Such pods are in order group 0.
	BehaviorWaitCompleted Behavior = "WaitCompleted"
)

// Rule is a Classifier's decision for one pod.
type Rule struct {
	Behavior Behavior
	// Order groups pods that are drained together, lowest first (Drain only).
	Order int32
}

// Classifier decides how one pod is drained. It is asked only about pods a drain does not
// leave alone anyway (mirror pods, DaemonSet pods, finished pods). An error stops the drain
// and is reported by the caller.
type Classifier func(pod *corev1.Pod) (Rule, error)

type plannedPod struct {
	pod  *corev1.Pod
	rule Rule
}

// plan lists the pods that keep the drain busy, each with its rule.
func plan(pods []corev1.Pod, unreachable bool, classify Classifier) ([]plannedPod, error) {
	var out []plannedPod
	for i := range pods {
		pod := &pods[i]
		if skip(pod) {
			continue
		}
		// The kubelet of an unreachable Node will never finish a terminating pod.
		if unreachable && pod.DeletionTimestamp != nil && time.Since(pod.DeletionTimestamp.Time) > UnreachableSkipWait {
			continue
		}
		rule := Rule{Behavior: BehaviorDrain}
		if classify != nil {
			var err error
			if rule, err = classify(pod); err != nil {
				return nil, err
			}
		}
		switch rule.Behavior {
		case BehaviorSkip:
			continue
		case BehaviorWaitCompleted:
			rule.Order = 0
		}
		out = append(out, plannedPod{pod: pod, rule: rule})
	}
	return out, nil
}

// group sorts the planned pods into res (pods of a later order, WaitCompleted pods of the
// current group, pods already terminating) and returns the pods of the current group to evict.
func group(planned []plannedPod, res *Result) []*corev1.Pod {
	var toEvict []*corev1.Pod
	current := lowestOrder(planned)
	for _, p := range planned {
		name := p.pod.Namespace + "/" + p.pod.Name
		switch {
		case p.rule.Order > current:
			res.Later = append(res.Later, name)
		case p.rule.Behavior == BehaviorWaitCompleted:
			res.Completing = append(res.Completing, name)
		case p.pod.DeletionTimestamp != nil:
			res.Waiting = append(res.Waiting, name)
		default:
			toEvict = append(toEvict, p.pod)
		}
	}
	return toEvict
}

// lowestOrder is the order of the group being drained now.
func lowestOrder(pods []plannedPod) int32 {
	lowest := int32(math.MaxInt32)
	for _, p := range pods {
		lowest = min(lowest, p.rule.Order)
	}
	return lowest
}
