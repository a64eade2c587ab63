package kubelet_test

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/machina-dev/machina/internal/cloud/api"
	"github.com/machina-dev/machina/internal/cloud/client"
	"github.com/machina-dev/machina/internal/cloud/kubelet"
	"github.com/machina-dev/machina/internal/cloud/server"
	"github.com/machina-dev/machina/internal/lab"
	"github.com/machina-dev/machina/internal/lab/labtest"
)

type env struct {
	t     *testing.T
	cloud *client.Client
	kube  kubernetes.Interface
}

var tokenSeq int

func (e *env) ctx() context.Context {
	c, cancel := context.WithTimeout(context.Background(), time.Minute)
	e.t.Cleanup(cancel)
	return c
}

func (e *env) run(itype string, tags map[string]string) api.Instance {
	e.t.Helper()
	tokenSeq++
	out, err := e.cloud.RunInstances(e.ctx(), api.RunInstancesRequest{
		ClientToken: fmt.Sprintf("token-%d", tokenSeq), Region: "sim-east-1", Zone: "sim-east-1b",
		InstanceType: itype, Image: "sim-rhcos-9", Tags: tags,
	})
	if err != nil {
		e.t.Fatal(err)
	}
	return out.Instance
}

func (e *env) eventually(what string, cond func() (bool, error)) {
	e.t.Helper()
	// Generous: the suite must pass on a loaded 2-core machine; a pass returns as soon as
	// the condition holds.
	deadline := time.Now().Add(3 * time.Minute)
	var last error
	for {
		ok, err := cond()
		if ok {
			return
		}
		last = err
		if time.Now().After(deadline) {
			e.t.Fatalf("timed out waiting for %s (last error: %v)", what, last)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (e *env) node(name string) (*corev1.Node, error) {
	return e.kube.CoreV1().Nodes().Get(e.ctx(), name, metav1.GetOptions{})
}

func condition(n *corev1.Node, ct corev1.NodeConditionType) *corev1.NodeCondition {
	for i := range n.Status.Conditions {
		if n.Status.Conditions[i].Type == ct {
			return &n.Status.Conditions[i]
		}
	}
	return nil
}

func (e *env) waitReady(name string, status corev1.ConditionStatus) *corev1.Node {
	e.t.Helper()
	var node *corev1.Node
	e.eventually(fmt.Sprintf("Node %s Ready=%s", name, status), func() (bool, error) {
		n, err := e.node(name)
		if err != nil {
			return false, err
		}
		node = n
		c := condition(n, corev1.NodeReady)
		return c != nil && c.Status == status, nil
	})
	return node
}

func (e *env) waitNodeGone(name string) {
	e.t.Helper()
	e.eventually("Node "+name+" deleted", func() (bool, error) {
		_, err := e.node(name)
		return apierrors.IsNotFound(err), err
	})
}

func (e *env) lease(name string) (*coordinationv1.Lease, error) {
	return e.kube.CoordinationV1().Leases(corev1.NamespaceNodeLease).Get(e.ctx(), name, metav1.GetOptions{})
}

func (e *env) pod(name, node string, grace int64) *corev1.Pod {
	e.t.Helper()
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: corev1.PodSpec{
			NodeName:                      node,
			TerminationGracePeriodSeconds: ptr.To(grace),
			Containers:                    []corev1.Container{{Name: "app", Image: "registry.example/app:1"}},
		},
	}
	p, err := e.kube.CoreV1().Pods("default").Create(e.ctx(), p, metav1.CreateOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	return p
}

func (e *env) getPod(name string) (*corev1.Pod, error) {
	return e.kube.CoreV1().Pods("default").Get(e.ctx(), name, metav1.GetOptions{})
}

func (e *env) deletePod(name string) {
	e.t.Helper()
	if err := e.kube.CoreV1().Pods("default").Delete(e.ctx(), name, metav1.DeleteOptions{}); err != nil {
		e.t.Fatal(err)
	}
}

// TestKubelet runs the simulated kubelet against a real kube-apiserver.
func TestKubelet(t *testing.T) {
	l := labtest.Start(t, labtest.WithControllerManager())
	srv, err := server.New(server.Options{
		StateDir:      t.TempDir(),
		NoSync:        true,
		Delays:        server.Delays{ShuttingDown: 2 * time.Second},
		SweepInterval: 50 * time.Millisecond,
		KubeConfig:    l.Config,
		Kubelet: kubelet.Options{
			SyncInterval:   100 * time.Millisecond,
			RenewInterval:  500 * time.Millisecond, // lab.KubeletHeartbeatInterval or less
			StatusInterval: 2 * time.Second,
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := srv.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	cc, err := client.New(srv.URL(), client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	kube := kubernetes.NewForConfigOrDie(l.Config)
	newEnv := func(t *testing.T) *env { return &env{t: t, cloud: cc, kube: kube} }

	t.Run("registers a Ready Node with a Lease", func(t *testing.T) {
		e := newEnv(t)
		inst := e.run("g1.xlarge", map[string]string{"test": "register"})
		n := e.waitReady(inst.Hostname, corev1.ConditionTrue)
		if n.Spec.ProviderID != inst.ProviderID {
			t.Errorf("providerID = %q, want %q", n.Spec.ProviderID, inst.ProviderID)
		}
		wantLabels := map[string]string{
			"topology.kubernetes.io/region":    "sim-east-1",
			"topology.kubernetes.io/zone":      "sim-east-1b",
			"node.kubernetes.io/instance-type": "g1.xlarge",
			"kubernetes.io/arch":               "amd64",
			"kubernetes.io/os":                 "linux",
			"kubernetes.io/hostname":           inst.Hostname,
		}
		for k, v := range wantLabels {
			if n.Labels[k] != v {
				t.Errorf("label %s = %q, want %q", k, n.Labels[k], v)
			}
		}
		wantCap := map[corev1.ResourceName]string{"cpu": "8", "memory": "60Gi", "nvidia.com/gpu": "1", "pods": "110"}
		for r, v := range wantCap {
			q := n.Status.Capacity[r]
			if q.Cmp(resource.MustParse(v)) != 0 {
				t.Errorf("capacity %s = %s, want %s", r, q.String(), v)
			}
			a := n.Status.Allocatable[r]
			if a.Cmp(resource.MustParse(v)) != 0 {
				t.Errorf("allocatable %s = %s, want %s", r, a.String(), v)
			}
		}
		addrs := map[corev1.NodeAddressType]string{}
		for _, a := range n.Status.Addresses {
			addrs[a.Type] = a.Address
		}
		if addrs[corev1.NodeInternalIP] != inst.PrivateIP || addrs[corev1.NodeHostName] != inst.Hostname {
			t.Errorf("addresses = %v", n.Status.Addresses)
		}
		for _, ct := range []corev1.NodeConditionType{corev1.NodeMemoryPressure, corev1.NodeDiskPressure, corev1.NodePIDPressure} {
			if c := condition(n, ct); c == nil || c.Status != corev1.ConditionFalse {
				t.Errorf("condition %s = %+v", ct, c)
			}
		}
		var first *metav1.MicroTime
		e.eventually("Lease", func() (bool, error) {
			lease, err := e.lease(inst.Hostname)
			if err != nil {
				return false, err
			}
			if *lease.Spec.HolderIdentity != inst.Hostname || len(lease.OwnerReferences) != 1 || lease.OwnerReferences[0].UID != n.UID {
				t.Fatalf("lease = %+v", lease)
			}
			first = lease.Spec.RenewTime
			return first != nil, nil
		})
		e.eventually("Lease renewal", func() (bool, error) {
			lease, err := e.lease(inst.Hostname)
			return err == nil && lease.Spec.RenewTime.After(first.Time), err
		})
	})

	t.Run("stays Ready through kube-controller-manager's node monitor grace period", func(t *testing.T) {
		e := newEnv(t)
		inst := e.run("s1.small", nil)
		e.waitReady(inst.Hostname, corev1.ConditionTrue)
		// Node lifecycle would mark the Node Unknown after NodeMonitorGracePeriod without
		// Lease renewals; watch it stay Ready for longer than that.
		until := time.Now().Add(lab.NodeMonitorGracePeriod + 3*time.Second)
		for time.Now().Before(until) {
			n, err := e.node(inst.Hostname)
			if err != nil {
				t.Fatal(err)
			}
			if c := condition(n, corev1.NodeReady); c.Status != corev1.ConditionTrue {
				t.Fatalf("Node went %s (%s)", c.Status, c.Reason)
			}
			time.Sleep(500 * time.Millisecond)
		}
	})

	t.Run("finishes the deletion of pods on a live Node", func(t *testing.T) {
		e := newEnv(t)
		inst := e.run("s1.small", nil)
		e.waitReady(inst.Hostname, corev1.ConditionTrue)
		e.pod("drained", inst.Hostname, 1)
		e.eventually("pod running", func() (bool, error) {
			p, err := e.getPod("drained")
			return err == nil && p.Status.Phase == corev1.PodRunning && podReady(p), err
		})
		began := time.Now()
		e.deletePod("drained")
		e.eventually("pod deleted", func() (bool, error) {
			_, err := e.getPod("drained")
			return apierrors.IsNotFound(err), err
		})
		if d := time.Since(began); d < 900*time.Millisecond {
			t.Errorf("pod was removed after %s, before its 1s grace period", d)
		}
	})

	t.Run("NotReady fault stops heartbeats; clearing it recovers", func(t *testing.T) {
		e := newEnv(t)
		inst := e.run("s1.small", map[string]string{"fault": "notready"})
		e.waitReady(inst.Hostname, corev1.ConditionTrue)
		e.pod("stuck", inst.Hostname, 1)
		f, err := cc.CreateFault(e.ctx(), api.Fault{Kind: api.FaultNodeNotReady, Tags: map[string]string{"fault": "notready"}})
		if err != nil {
			t.Fatal(err)
		}
		n := e.waitReady(inst.Hostname, corev1.ConditionFalse)
		if c := condition(n, corev1.NodeReady); c.Reason != "KubeletNotReady" {
			t.Errorf("Ready condition = %+v", c)
		}
		lease, err := e.lease(inst.Hostname)
		if err != nil {
			t.Fatal(err)
		}
		e.deletePod("stuck")
		// For four renew intervals neither the Lease is renewed nor the pod finalised.
		time.Sleep(2 * time.Second)
		if l2, _ := e.lease(inst.Hostname); !l2.Spec.RenewTime.Equal(lease.Spec.RenewTime) {
			t.Errorf("Lease renewed under a NotReady fault: %v → %v", lease.Spec.RenewTime, l2.Spec.RenewTime)
		}
		if p, err := e.getPod("stuck"); err != nil || p.DeletionTimestamp == nil {
			t.Errorf("pod on a NotReady Node: %v, %v", p, err)
		}
		if _, err := cc.DeleteFaults(e.ctx(), f.FaultID); err != nil {
			t.Fatal(err)
		}
		e.waitReady(inst.Hostname, corev1.ConditionTrue)
		e.eventually("pod finalised after recovery", func() (bool, error) {
			_, err := e.getPod("stuck")
			return apierrors.IsNotFound(err), err
		})
	})

	t.Run("condition fault sets and clears a condition", func(t *testing.T) {
		e := newEnv(t)
		inst := e.run("s1.small", nil)
		e.waitReady(inst.Hostname, corev1.ConditionTrue)
		f, err := cc.CreateFault(e.ctx(), api.Fault{Kind: api.FaultNodeCondition, InstanceIDs: []string{inst.InstanceID},
			ConditionType: "KernelDeadlock", ConditionStatus: "True", Reason: "DeadlockDetected"})
		if err != nil {
			t.Fatal(err)
		}
		e.eventually("condition set", func() (bool, error) {
			n, err := e.node(inst.Hostname)
			if err != nil {
				return false, err
			}
			c := condition(n, "KernelDeadlock")
			return c != nil && c.Status == corev1.ConditionTrue && c.Reason == "DeadlockDetected" &&
				condition(n, corev1.NodeReady).Status == corev1.ConditionTrue, nil
		})
		if _, err := cc.DeleteFaults(e.ctx(), f.FaultID); err != nil {
			t.Fatal(err)
		}
		e.eventually("condition removed", func() (bool, error) {
			n, err := e.node(inst.Hostname)
			return err == nil && condition(n, "KernelDeadlock") == nil && n.Annotations[kubelet.FaultConditionsAnnotation] == "", err
		})
	})

	t.Run("terminated instance: Node goes Unknown, then is deleted; its pods stay Terminating", func(t *testing.T) {
		e := newEnv(t)
		inst := e.run("s1.small", nil)
		e.waitReady(inst.Hostname, corev1.ConditionTrue)
		e.pod("orphan", inst.Hostname, 300)
		e.eventually("pod running", func() (bool, error) {
			p, err := e.getPod("orphan")
			return err == nil && p.Status.Phase == corev1.PodRunning, err
		})
		if _, err := cc.TerminateInstances(e.ctx(), inst.InstanceID); err != nil {
			t.Fatal(err)
		}
		n := e.waitReady(inst.Hostname, corev1.ConditionUnknown)
		if !slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.Key == kubelet.ShutdownTaint }) {
			t.Errorf("shutting-down Node has no shutdown taint: %v", n.Spec.Taints)
		}
		e.deletePod("orphan")
		e.waitNodeGone(inst.Hostname)
		p, err := e.getPod("orphan")
		if err != nil || p.DeletionTimestamp == nil {
			t.Errorf("pod of a dead instance: %v, %v (want it left Terminating)", p, err)
		}
		_ = e.kube.CoreV1().Pods("default").Delete(e.ctx(), "orphan", metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)})
	})

	t.Run("killed instance: Node deleted", func(t *testing.T) {
		e := newEnv(t)
		inst := e.run("s1.small", nil)
		e.waitReady(inst.Hostname, corev1.ConditionTrue)
		if _, err := cc.KillInstances(e.ctx(), api.KillInstancesRequest{InstanceIDs: []string{inst.InstanceID}}); err != nil {
			t.Fatal(err)
		}
		e.waitNodeGone(inst.Hostname)
	})

	t.Run("Node deleted behind its back re-registers", func(t *testing.T) {
		e := newEnv(t)
		inst := e.run("s1.small", nil)
		old := e.waitReady(inst.Hostname, corev1.ConditionTrue)
		if err := kube.CoreV1().Nodes().Delete(e.ctx(), inst.Hostname, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		e.eventually("re-registration", func() (bool, error) {
			n, err := e.node(inst.Hostname)
			return err == nil && n.UID != old.UID, err
		})
	})

	t.Run("Lease deleted behind its back comes back", func(t *testing.T) {
		e := newEnv(t)
		inst := e.run("s1.small", nil)
		n := e.waitReady(inst.Hostname, corev1.ConditionTrue)
		var old *coordinationv1.Lease
		e.eventually("Lease", func() (l bool, err error) {
			old, err = e.lease(inst.Hostname)
			return err == nil, err
		})
		if err := kube.CoordinationV1().Leases(corev1.NamespaceNodeLease).Delete(e.ctx(), inst.Hostname, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		// The kubelet remembers the Lease it last wrote; renewing it finds it gone and
		// creates it again.
		e.eventually("a new Lease", func() (bool, error) {
			l, err := e.lease(inst.Hostname)
			return err == nil && l.UID != old.UID && len(l.OwnerReferences) == 1 && l.OwnerReferences[0].UID == n.UID, err
		})
	})

	t.Run("Node of an unknown instance is deleted", func(t *testing.T) {
		e := newEnv(t)
		stray := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "stray"},
			Spec: corev1.NodeSpec{ProviderID: api.FormatProviderID("sim-east-1", "sim-east-1a", "i-00000000000000000")}}
		if _, err := kube.CoreV1().Nodes().Create(e.ctx(), stray, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		other := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "not-ours"}, Spec: corev1.NodeSpec{ProviderID: "aws:///us-east-1a/i-1"}}
		if _, err := kube.CoreV1().Nodes().Create(e.ctx(), other, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		e.waitNodeGone("stray")
		if _, err := e.node("not-ours"); err != nil {
			t.Errorf("a Node of another provider was touched: %v", err)
		}
	})

	t.Run("hundreds of Nodes without a goroutine each", func(t *testing.T) {
		e := newEnv(t)
		before := runtime.NumGoroutine()
		const n = 300
		for i := range n {
			e.run("s1.medium", map[string]string{"scale": "yes", "i": fmt.Sprint(i)})
		}
		began := time.Now()
		e.eventually(fmt.Sprintf("%d Ready Nodes with Leases", n), func() (bool, error) {
			nodes, err := kube.CoreV1().Nodes().List(e.ctx(), metav1.ListOptions{LabelSelector: "node.kubernetes.io/instance-type=s1.medium"})
			if err != nil {
				return false, err
			}
			ready := 0
			for i := range nodes.Items {
				if c := condition(&nodes.Items[i], corev1.NodeReady); c != nil && c.Status == corev1.ConditionTrue {
					ready++
				}
			}
			leases, err := kube.CoordinationV1().Leases(corev1.NamespaceNodeLease).List(e.ctx(), metav1.ListOptions{})
			if err != nil {
				return false, err
			}
			if ready < n || len(leases.Items) < n {
				return false, fmt.Errorf("%d of %d Nodes Ready, %d Leases", ready, n, len(leases.Items))
			}
			return true, nil
		})
		t.Logf("%d Nodes Ready in %s", n, time.Since(began).Round(time.Millisecond))
		if after := runtime.NumGoroutine(); after-before > 100 {
			t.Errorf("goroutines grew from %d to %d for %d Nodes", before, after, n)
		}
	})
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
