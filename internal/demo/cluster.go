// Package demo creates the cluster objects machina's lab needs before Machines can be mirrored
// between the two APIs: the namespaces of each API, the config.openshift.io Infrastructure
// naming the cluster, the Cluster API Cluster with its SimCluster, the Cluster's kubeconfig
// Secret (the lab is self-hosted: it points at the same apiserver), and the worker user-data
// Secret OpenShift installations have. `machina up` and the integration tests both use it.
package demo

import (
	"context"
	"fmt"

	configv1 "github.com/openshift/api/config/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/machina-dev/machina/api/infrastructure/v1alpha1"
)

// Cluster describes the lab's cluster.
type Cluster struct {
	Name                string // Cluster API Cluster and Infrastructure status.infrastructureName
	Region              string // SimCluster region
	MachineAPINamespace string
	ClusterAPINamespace string
	Kubeconfig          []byte // what <name>-kubeconfig carries
}

// UserDataSecret is the Machine API user-data Secret every demo Machine references.
const UserDataSecret = "worker-user-data"

// EnsureCluster creates whatever of the cluster objects is missing; existing ones are left as
// they are, so it is safe on every start of a persistent lab.
func EnsureCluster(ctx context.Context, c client.Client, cl Cluster) error {
	for _, ns := range []string{cl.MachineAPINamespace, cl.ClusterAPINamespace} {
		if err := create(ctx, c, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			return err
		}
	}
	infra := &configv1.Infrastructure{ObjectMeta: metav1.ObjectMeta{Name: "cluster"},
		Spec: configv1.InfrastructureSpec{PlatformSpec: configv1.PlatformSpec{Type: configv1.NonePlatformType}}}
	if err := create(ctx, c, infra); err != nil {
		return err
	}
	if err := c.Get(ctx, client.ObjectKeyFromObject(infra), infra); err != nil {
		return err
	}
	if infra.Status.InfrastructureName == "" {
		infra.Status = configv1.InfrastructureStatus{
			InfrastructureName:     cl.Name,
			PlatformStatus:         &configv1.PlatformStatus{Type: configv1.NonePlatformType},
			ControlPlaneTopology:   configv1.HighlyAvailableTopologyMode,
			InfrastructureTopology: configv1.HighlyAvailableTopologyMode,
		}
		if err := c.Status().Update(ctx, infra); err != nil {
			return fmt.Errorf("writing the Infrastructure status: %w", err)
		}
	}
	objs := []client.Object{
		&infrav1.SimCluster{ObjectMeta: metav1.ObjectMeta{Name: cl.Name, Namespace: cl.ClusterAPINamespace},
			Spec: infrav1.SimClusterSpec{Region: cl.Region}},
		&clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: cl.Name, Namespace: cl.ClusterAPINamespace},
			Spec: clusterv1.ClusterSpec{InfrastructureRef: clusterv1.ContractVersionedObjectReference{
				APIGroup: infrav1.GroupName, Kind: "SimCluster", Name: cl.Name}}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: cl.Name + "-kubeconfig", Namespace: cl.ClusterAPINamespace,
			Labels: map[string]string{clusterv1.ClusterNameLabel: cl.Name}},
			Data: map[string][]byte{"value": cl.Kubeconfig}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: UserDataSecret, Namespace: cl.MachineAPINamespace},
			Data: map[string][]byte{"userData": []byte("#cloud-config\n# simulated worker\n")}},
	}
	for _, o := range objs {
		if err := create(ctx, c, o); err != nil {
			return err
		}
	}
	return nil
}

func create(ctx context.Context, c client.Client, o client.Object) error {
	if err := c.Create(ctx, o); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating %T %s: %w", o, o.GetName(), err)
	}
	return nil
}
