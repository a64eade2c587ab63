package kubelet_test

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/machina-dev/machina/internal/cloud/api"
	"github.com/machina-dev/machina/internal/cloud/client"
	"github.com/machina-dev/machina/internal/cloud/server"
	"github.com/machina-dev/machina/internal/lab/labtest"
)

func TestTmpKCM(t *testing.T) {
	l := labtest.Start(t)
	srv, _ := server.New(server.Options{StateDir: t.TempDir(), NoSync: true, KubeConfig: l.Config})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := srv.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	cc, _ := client.New(srv.URL(), client.Options{})
	kube := kubernetes.NewForConfigOrDie(l.Config)
	out, err := cc.RunInstances(ctx, api.RunInstancesRequest{ClientToken: "x", Region: "sim-east-1", Zone: "sim-east-1a", InstanceType: "s1.small", Image: "sim-rhcos-9"})
	if err != nil {
		t.Fatal(err)
	}
	f, _ := cc.CreateFault(ctx, api.Fault{Kind: api.FaultNodeNotReady, InstanceIDs: []string{"i-none"}})
	_ = f
	for i := 0; i < 9; i++ {
		time.Sleep(5 * time.Second)
		n, err := kube.CoreV1().Nodes().Get(ctx, out.Instance.Hostname, metav1.GetOptions{})
		if err != nil {
			t.Logf("%ds: %v", i*5, err)
			continue
		}
		for _, c := range n.Status.Conditions {
			if c.Type == corev1.NodeReady {
				t.Logf("%ds: Ready=%s %s hb=%s taints=%v", i*5, c.Status, c.Reason, c.LastHeartbeatTime, n.Spec.Taints)
			}
		}
	}
	// NotReady fault with KCM: expect Unknown eventually
	_, _ = cc.CreateFault(ctx, api.Fault{Kind: api.FaultNodeNotReady, InstanceIDs: []string{out.Instance.InstanceID}})
	for i := 0; i < 0; i++ {
		time.Sleep(5 * time.Second)
		n, _ := kube.CoreV1().Nodes().Get(ctx, out.Instance.Hostname, metav1.GetOptions{})
		for _, c := range n.Status.Conditions {
			if c.Type == corev1.NodeReady {
				t.Logf("fault %ds: Ready=%s %s taints=%v", i*5, c.Status, c.Reason, n.Spec.Taints)
			}
		}
	}
	_, _ = cc.ClearFaults(ctx)
	time.Sleep(3 * time.Second)
	n, _ := kube.CoreV1().Nodes().Get(ctx, out.Instance.Hostname, metav1.GetOptions{})
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			t.Logf("cleared: Ready=%s %s taints=%v", c.Status, c.Reason, n.Spec.Taints)
		}
	}
}
