package kubelet

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"

	"github.com/machina-dev/machina/internal/cloud/api"
)

var everything = labels.Everything()

const (
	// FaultConditionsAnnotation lists the condition types a node-condition fault set on
	// the Node, so that they are removed when the fault is cleared.
	FaultConditionsAnnotation = "sim.machina.dev/fault-conditions"
	// ShutdownTaint marks Nodes whose instance is shutting down, as cloud providers do.
	ShutdownTaint = "node.cloudprovider.kubernetes.io/shutdown"
)

// standardConditions are owned by the kubelet and always posted.
var standardConditions = []corev1.NodeConditionType{
	corev1.NodeReady, corev1.NodeMemoryPressure, corev1.NodeDiskPressure, corev1.NodePIDPressure,
}

// syncNode brings one Node (and its Lease and pods) to what its instance wants. It
// returns a delay after which the Node wants another look, if any.
func (k *Kubelet) syncNode(ctx context.Context, name string) (time.Duration, error) {
	k.mu.Lock()
	t := k.targets[name]
	known := k.known
	k.mu.Unlock()
	now := k.now()
	node, exists, err := k.currentNode(name, now)
	if err != nil {
		return 0, err
	}
	if t == nil {
		// The instance was purged (or never existed): remove its Node.
		if exists {
			if pid, perr := api.ParseProviderID(node.Spec.ProviderID); perr == nil && !known[pid.InstanceID] {
				return 0, k.deleteNode(ctx, node)
			}
		}
		return 0, nil
	}
	if exists && node.Spec.ProviderID != "" && node.Spec.ProviderID != t.inst.ProviderID {
		k.log.Info("a Node with the instance's name belongs to another provider ID; leaving it alone",
			"node", name, "providerID", node.Spec.ProviderID, "instance", t.inst.ProviderID)
		return 0, nil
	}
	switch t.inst.State {
	case api.StatePending:
		return 0, nil
	case api.StateShuttingDown, api.StateStopping, api.StateStopped:
		// A stopped instance keeps its Node, tainted and Unknown, as a cloud provider does.
		if exists {
			return 0, k.markGone(ctx, node, now)
		}
		return 0, nil
	case api.StateTerminated:
		if !exists {
			return 0, nil
		}
		if at := t.inst.StateTransitionTime.Add(k.opts.NodeDeleteDelay); now.Before(at) {
			return at.Sub(now), k.markGone(ctx, node, now)
		}
		return 0, k.deleteNode(ctx, node)
	}

	// Running.
	if !exists {
		node, err = k.createNode(ctx, t, now)
		k.wroteNode(name, node, err, now)
		if err != nil {
			return 0, err
		}
	}
	if !k.statusCurrent(node, t, now) {
		node, err = k.postStatus(ctx, node, t, now)
		k.wroteNode(name, node, err, now)
		if err != nil {
			return 0, err
		}
	}
	if t.notReady {
		// The kubelet is broken: no heartbeats, and pods are left as they are.
		return 0, nil
	}
	if err := k.renewLease(ctx, node, now); err != nil {
		return 0, err
	}
	return k.syncPods(ctx, node, now)
}

func (k *Kubelet) deleteNode(ctx context.Context, node *corev1.Node) error {
	uid := node.UID
	k.forget(node.Name)
	err := k.client.CoreV1().Nodes().Delete(ctx, node.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return nil
	}
	if err == nil {
		k.log.V(1).Info("deleted Node of a gone instance", "node", node.Name, "providerID", node.Spec.ProviderID)
	}
	return err
}

// buildNode is the Node a freshly booted instance registers.
func (k *Kubelet) buildNode(t *target, now time.Time) *corev1.Node {
	k.mu.Lock()
	it, okType := k.types[t.inst.InstanceType]
	im := k.images[t.inst.Image]
	k.mu.Unlock()
	if !okType {
		it = api.InstanceType{Name: t.inst.InstanceType, VCPU: 1, MemoryMiB: 1024, Architecture: t.inst.Architecture, MaxPods: 110, EphemeralStorageGiB: 10}
	}
	osName := im.OperatingSystem
	if osName == "" {
		osName = "linux"
	}
	arch := t.inst.Architecture
	if arch == "" {
		arch = it.Architecture
	}
	capacity := corev1.ResourceList{
		corev1.ResourceCPU:              *resource.NewQuantity(int64(it.VCPU), resource.DecimalSI),
		corev1.ResourceMemory:           *resource.NewQuantity(it.MemoryMiB<<20, resource.BinarySI),
		corev1.ResourcePods:             *resource.NewQuantity(int64(it.MaxPods), resource.DecimalSI),
		corev1.ResourceEphemeralStorage: *resource.NewQuantity(int64(it.EphemeralStorageGiB)<<30, resource.BinarySI),
	}
	if it.GPU > 0 {
		gpu := it.GPUResource
		if gpu == "" {
			gpu = "nvidia.com/gpu"
		}
		capacity[corev1.ResourceName(gpu)] = *resource.NewQuantity(int64(it.GPU), resource.DecimalSI)
	}
	n := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name: t.inst.Hostname,
			Labels: map[string]string{
				corev1.LabelHostname:           t.inst.Hostname,
				corev1.LabelOSStable:           osName,
				corev1.LabelArchStable:         arch,
				"beta.kubernetes.io/os":        osName,
				"beta.kubernetes.io/arch":      arch,
				corev1.LabelInstanceTypeStable: t.inst.InstanceType,
				corev1.LabelTopologyRegion:     t.inst.Region,
				corev1.LabelTopologyZone:       t.inst.Zone,
			},
		},
		Spec: corev1.NodeSpec{ProviderID: t.inst.ProviderID},
		Status: corev1.NodeStatus{
			Capacity:    capacity,
			Allocatable: capacity.DeepCopy(),
			Addresses: []corev1.NodeAddress{
				{Type: corev1.NodeInternalIP, Address: t.inst.PrivateIP},
				{Type: corev1.NodeHostName, Address: t.inst.Hostname},
				{Type: corev1.NodeInternalDNS, Address: t.inst.Hostname},
			},
			DaemonEndpoints: corev1.NodeDaemonEndpoints{KubeletEndpoint: corev1.DaemonEndpoint{Port: 10250}},
			NodeInfo: corev1.NodeSystemInfo{
				MachineID:               strings.ReplaceAll(t.inst.InstanceID, "-", ""),
				SystemUUID:              t.inst.InstanceID,
				BootID:                  t.inst.InstanceID + "-" + fmt.Sprint(t.inst.LaunchTime.Unix()),
				KernelVersion:           "6.12.0-sim",
				OSImage:                 t.inst.Image,
				ContainerRuntimeVersion: "sim://1.0.0",
				KubeletVersion:          k.kubeletVersion,
				OperatingSystem:         osName,
				Architecture:            arch,
			},
			Phase: corev1.NodeRunning,
		},
	}
	n.Status.Conditions = k.conditions(n, t, now)
	if types := faultTypes(t); len(types) > 0 {
		n.Annotations = map[string]string{FaultConditionsAnnotation: strings.Join(types, ",")}
	}
	return n
}

func (k *Kubelet) createNode(ctx context.Context, t *target, now time.Time) (*corev1.Node, error) {
	want := k.buildNode(t, now)
	created, err := k.client.CoreV1().Nodes().Create(ctx, want, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		// The cache lagged behind an earlier create.
		return k.client.CoreV1().Nodes().Get(ctx, want.Name, metav1.GetOptions{})
	}
	if err != nil {
		return nil, err
	}
	k.log.V(1).Info("registered Node", "node", created.Name, "providerID", created.Spec.ProviderID)
	return created, nil
}

// faultTypes lists the condition types set by node-condition faults, sorted.
func faultTypes(t *target) []string {
	var out []string
	for _, f := range t.conds {
		if !slices.Contains(out, f.ConditionType) {
			out = append(out, f.ConditionType)
		}
	}
	sort.Strings(out)
	return out
}

// conditions computes the Node's conditions: the standard ones, faults on top, and any
// other condition (set by someone else) kept as it is.
func (k *Kubelet) conditions(node *corev1.Node, t *target, now time.Time) []corev1.NodeCondition {
	hb := metav1.NewTime(now)
	want := map[corev1.NodeConditionType]corev1.NodeCondition{
		corev1.NodeReady:          {Status: corev1.ConditionTrue, Reason: "KubeletReady", Message: "kubelet is posting ready status"},
		corev1.NodeMemoryPressure: {Status: corev1.ConditionFalse, Reason: "KubeletHasSufficientMemory", Message: "kubelet has sufficient memory available"},
		corev1.NodeDiskPressure:   {Status: corev1.ConditionFalse, Reason: "KubeletHasNoDiskPressure", Message: "kubelet has no disk pressure"},
		corev1.NodePIDPressure:    {Status: corev1.ConditionFalse, Reason: "KubeletHasSufficientPID", Message: "kubelet has sufficient PID available"},
	}
	if t.notReady {
		want[corev1.NodeReady] = corev1.NodeCondition{Status: corev1.ConditionFalse, Reason: "KubeletNotReady", Message: "container runtime is down (injected fault)"}
	}
	for _, f := range t.conds {
		reason, msg := f.Reason, f.Message
		if reason == "" {
			reason = "InjectedFault"
		}
		if msg == "" {
			msg = "set by simulated cloud fault " + f.FaultID
		}
		want[corev1.NodeConditionType(f.ConditionType)] = corev1.NodeCondition{Status: corev1.ConditionStatus(f.ConditionStatus), Reason: reason, Message: msg}
	}
	previousFaults := splitList(node.Annotations[FaultConditionsAnnotation])
	var out []corev1.NodeCondition
	for _, c := range node.Status.Conditions {
		w, ok := want[c.Type]
		if !ok {
			if !slices.Contains(previousFaults, string(c.Type)) {
				out = append(out, c) // someone else's condition
			}
			continue
		}
		delete(want, c.Type)
		nc := corev1.NodeCondition{Type: c.Type, Status: w.Status, Reason: w.Reason, Message: w.Message,
			LastHeartbeatTime: hb, LastTransitionTime: c.LastTransitionTime}
		if c.Status != w.Status {
			nc.LastTransitionTime = hb
		}
		out = append(out, nc)
	}
	var rest []corev1.NodeConditionType
	for ct := range want {
		rest = append(rest, ct)
	}
	sort.Slice(rest, func(a, b int) bool { return rest[a] < rest[b] })
	for _, ct := range rest {
		w := want[ct]
		out = append(out, corev1.NodeCondition{Type: ct, Status: w.Status, Reason: w.Reason, Message: w.Message,
			LastHeartbeatTime: hb, LastTransitionTime: hb})
	}
	return out
}

// statusCurrent reports whether the Node's status already says what the instance wants
// and its heartbeat is recent enough.
func (k *Kubelet) statusCurrent(node *corev1.Node, t *target, now time.Time) bool {
	if hasTaint(node, ShutdownTaint) {
		return false
	}
	if node.Annotations[FaultConditionsAnnotation] != strings.Join(faultTypes(t), ",") {
		return false
	}
	get := func(ct corev1.NodeConditionType) *corev1.NodeCondition {
		for i := range node.Status.Conditions {
			if node.Status.Conditions[i].Type == ct {
				return &node.Status.Conditions[i]
			}
		}
		return nil
	}
	ready := get(corev1.NodeReady)
	if ready == nil {
		return false
	}
	wantReady := corev1.ConditionTrue
	if t.notReady {
		wantReady = corev1.ConditionFalse
	}
	for _, f := range t.conds {
		if f.ConditionType == string(corev1.NodeReady) {
			wantReady = corev1.ConditionStatus(f.ConditionStatus)
		}
	}
	if ready.Status != wantReady {
		return false
	}
	if !t.notReady && now.Sub(ready.LastHeartbeatTime.Time) >= k.opts.StatusInterval {
		return false
	}
	for _, ct := range standardConditions[1:] {
		c := get(ct)
		if c == nil {
			return false
		}
	}
	for _, f := range t.conds {
		c := get(corev1.NodeConditionType(f.ConditionType))
		if c == nil || string(c.Status) != f.ConditionStatus {
			return false
		}
	}
	return true
}

func hasTaint(node *corev1.Node, key string) bool {
	for _, t := range node.Spec.Taints {
		if t.Key == key {
			return true
		}
	}
	return false
}

// postStatus posts the Node's status. The fault annotation lists every fault condition
// type that may be on the status: it is widened before the status is posted and narrowed
// after, so a crash in between never leaves an unlisted fault condition behind.
func (k *Kubelet) postStatus(ctx context.Context, node *corev1.Node, t *target, now time.Time) (*corev1.Node, error) {
	nodes := k.client.CoreV1().Nodes()
	want := faultTypes(t)
	listed := splitList(node.Annotations[FaultConditionsAnnotation])
	union := slices.Clone(listed)
	for _, ct := range want {
		if !slices.Contains(union, ct) {
			union = append(union, ct)
		}
	}
	sort.Strings(union)
	var err error
	if len(union) != len(listed) || hasTaint(node, ShutdownTaint) {
		if node, err = k.updateMeta(ctx, node, union); err != nil {
			return nil, err
		}
	}
	n := node.DeepCopy()
	n.Status.Conditions = k.conditions(node, t, now)
	n.Status.Phase = corev1.NodeRunning
	fresh := k.buildNode(t, now)
	n.Status.Capacity = fresh.Status.Capacity
	n.Status.Allocatable = fresh.Status.Allocatable
	n.Status.Addresses = fresh.Status.Addresses
	n.Status.NodeInfo = fresh.Status.NodeInfo
	n.Status.DaemonEndpoints = fresh.Status.DaemonEndpoints
	if node, err = nodes.UpdateStatus(ctx, n, metav1.UpdateOptions{}); err != nil {
		return nil, err
	}
	if strings.Join(union, ",") != strings.Join(want, ",") {
		return k.updateMeta(ctx, node, want)
	}
	return node, nil
}

// updateMeta sets the fault annotation and drops the shutdown taint.
func (k *Kubelet) updateMeta(ctx context.Context, node *corev1.Node, faultTypes []string) (*corev1.Node, error) {
	n := node.DeepCopy()
	if len(faultTypes) == 0 {
		delete(n.Annotations, FaultConditionsAnnotation)
	} else {
		if n.Annotations == nil {
			n.Annotations = map[string]string{}
		}
		n.Annotations[FaultConditionsAnnotation] = strings.Join(faultTypes, ",")
	}
	n.Spec.Taints = slices.DeleteFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.Key == ShutdownTaint })
	return k.client.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{})
}

func splitList(s string) []string {
	var out []string
	for _, x := range strings.Split(s, ",") {
		if x != "" {
			out = append(out, x)
		}
	}
	return out
}

// markGone reports a Node whose instance is shutting down or terminated: Ready and the
// other kubelet conditions become Unknown and the shutdown taint is added.
func (k *Kubelet) markGone(ctx context.Context, node *corev1.Node, now time.Time) error {
	nodes := k.client.CoreV1().Nodes()
	if !hasTaint(node, ShutdownTaint) {
		taint := corev1.Taint{Key: ShutdownTaint, Effect: corev1.TaintEffectNoSchedule}
		patch, _ := json.Marshal(map[string]any{"spec": map[string]any{"taints": append(slices.Clone(node.Spec.Taints), taint)},
			"metadata": map[string]any{"resourceVersion": node.ResourceVersion}})
		updated, err := nodes.Patch(ctx, node.Name, types.MergePatchType, patch, metav1.PatchOptions{})
		if err != nil {
			return err
		}
		node = updated
	}
	n := node.DeepCopy()
	changed := false
	for i := range n.Status.Conditions {
		c := &n.Status.Conditions[i]
		if slices.Contains(standardConditions, c.Type) && c.Status != corev1.ConditionUnknown {
			c.Status = corev1.ConditionUnknown
			c.Reason = "NodeStatusUnknown"
			c.Message = "Kubelet stopped posting node status."
			c.LastTransitionTime = metav1.NewTime(now)
			changed = true
		}
	}
	if !changed {
		return nil
	}
	_, err := nodes.UpdateStatus(ctx, n, metav1.UpdateOptions{})
	return err
}
