package ec2_test

import (
	"slices"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsec2 "github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/machina-dev/machina/internal/cloud/cloudtest"
	"github.com/machina-dev/machina/internal/cloud/kubelet"
	"github.com/machina-dev/machina/internal/cloud/server"
	"github.com/machina-dev/machina/internal/lab/labtest"
)

// TestEC2InstanceBecomesNode: an instance launched through EC2 registers a Node named by
// its private DNS name with provider ID aws:///<zone>/<id>; stopping it taints the Node,
// starting it clears the taint, terminating it deletes the Node.
func TestEC2InstanceBecomesNode(t *testing.T) {
	l := labtest.Start(t)
	e := start(t, cloudtest.WithKubelet(l.Config), cloudtest.WithDelays(server.Delays{Pending: 200 * time.Millisecond, ShuttingDown: 200 * time.Millisecond}))
	kube := kubernetes.NewForConfigOrDie(l.Config)

	i := e.run(runInput(map[string]string{"Name": "node-test"}))[0]
	id, name := aws.ToString(i.InstanceId), aws.ToString(i.PrivateDnsName)
	var node *corev1.Node
	eventually(t, "a Ready Node", func() (bool, error) {
		n, err := kube.CoreV1().Nodes().Get(ctx(t), name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		node = n
		for _, c := range n.Status.Conditions {
			if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
				return true, nil
			}
		}
		return false, nil
	})
	if node.Spec.ProviderID != "aws:///us-east-1a/"+id || node.Labels["topology.kubernetes.io/zone"] != "us-east-1a" ||
		node.Labels["node.kubernetes.io/instance-type"] != "m6i.xlarge" || node.Status.Capacity.Cpu().Value() != 4 {
		t.Errorf("Node = %s %v %v", node.Spec.ProviderID, node.Labels, node.Status.Capacity)
	}
	if !slices.ContainsFunc(node.Status.Addresses, func(a corev1.NodeAddress) bool {
		return a.Type == corev1.NodeInternalIP && a.Address == aws.ToString(i.PrivateIpAddress)
	}) {
		t.Errorf("addresses = %v", node.Status.Addresses)
	}

	tainted := func(want bool) func() (bool, error) {
		return func() (bool, error) {
			n, err := kube.CoreV1().Nodes().Get(ctx(t), name, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			has := slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.Key == kubelet.ShutdownTaint })
			return has == want, nil
		}
	}
	if _, err := e.ec2.StopInstances(ctx(t), &awsec2.StopInstancesInput{InstanceIds: []string{id}}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the shutdown taint on the stopped instance's Node", tainted(true))
	eventually(t, "the instance stopped", func() (bool, error) {
		return e.describe(id).State.Name == types.InstanceStateNameStopped, nil
	})
	if _, err := e.ec2.StartInstances(ctx(t), &awsec2.StartInstancesInput{InstanceIds: []string{id}}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the taint gone after the start", tainted(false))

	if _, err := e.ec2.TerminateInstances(ctx(t), &awsec2.TerminateInstancesInput{InstanceIds: []string{id}}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the Node deleted", func() (bool, error) {
		_, err := kube.CoreV1().Nodes().Get(ctx(t), name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), err
	})
}
