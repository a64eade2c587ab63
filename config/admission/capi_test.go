package admission_test

import (
	"context"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/machina-dev/machina/internal/lab/labtest"
)

func capiMachineSpec(cluster string) clusterv1.MachineSpec {
	return clusterv1.MachineSpec{ClusterName: cluster,
		Bootstrap:         clusterv1.Bootstrap{DataSecretName: ptr.To("bootstrap")},
		InfrastructureRef: clusterv1.ContractVersionedObjectReference{APIGroup: "infrastructure.machina.dev", Kind: "SimMachine", Name: "m"}}
}

func capiMachine(name, cluster string) *clusterv1.Machine {
	return &clusterv1.Machine{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Spec: capiMachineSpec(cluster)}
}

func capiMachineSet(name, cluster string) *clusterv1.MachineSet {
	sel := map[string]string{"set": name}
	return &clusterv1.MachineSet{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: clusterv1.MachineSetSpec{ClusterName: cluster, Selector: metav1.LabelSelector{MatchLabels: sel},
			Template: clusterv1.MachineTemplateSpec{ObjectMeta: clusterv1.ObjectMeta{Labels: sel}, Spec: capiMachineSpec(cluster)}}}
}

// TestClusterAPIAdmissionAsUsersSeeIt sends Cluster API requests as a non-admin user and
// checks the defaults Cluster API's webhooks would set and its immutable fields.
func TestClusterAPIAdmissionAsUsersSeeIt(t *testing.T) {
	l := labtest.Shared(t)
	ctx := context.Background()
	admin := clientAs(t, l, "admin", nil, "system:masters")
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "capi-editor"}, Rules: []rbacv1.PolicyRule{{
		APIGroups: []string{"cluster.x-k8s.io"}, Resources: []string{"machines", "machinesets", "machinedeployments"},
		Verbs: []string{"get", "list", "watch", "create", "update", "patch", "delete"}}}}
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "bob-capi-editor"},
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "capi-editor"},
		Subjects: []rbacv1.Subject{{Kind: "User", Name: "bob", APIGroup: "rbac.authorization.k8s.io"}}}
	for _, o := range []client.Object{role, binding} {
		if err := admin.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	bob := clientAs(t, l, "bob", nil)
	// Policies and RBAC become active a moment after they are created.
	deadline := time.Now().Add(30 * time.Second)
	for {
		probe := capiMachine("probe", "c1")
		err := bob.Create(ctx, probe, client.DryRunAll)
		if err == nil && probe.Labels[clusterv1.ClusterNameLabel] == "c1" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("policies never became active: %v %v", err, probe.Labels)
		}
		time.Sleep(200 * time.Millisecond)
	}

	t.Run("MachineDefaulted", func(t *testing.T) {
		m := capiMachine("defaulted", "c1")
		m.Labels = map[string]string{clusterv1.ClusterNameLabel: "other", "team": "blue"}
		if err := bob.Create(ctx, m); err != nil {
			t.Fatal(err)
		}
		if m.Labels[clusterv1.ClusterNameLabel] != "c1" || m.Labels["team"] != "blue" {
			t.Errorf("labels %v: want the cluster-name label set from spec.clusterName", m.Labels)
		}
		if ptr.Deref(m.Spec.Deletion.NodeDeletionTimeoutSeconds, -1) != 10 {
			t.Errorf("nodeDeletionTimeoutSeconds %v, want 10", m.Spec.Deletion.NodeDeletionTimeoutSeconds)
		}
		m = capiMachine("own-timeout", "c1")
		m.Spec.Deletion.NodeDeletionTimeoutSeconds = ptr.To[int32](30)
		if err := bob.Create(ctx, m); err != nil {
			t.Fatal(err)
		}
		if ptr.Deref(m.Spec.Deletion.NodeDeletionTimeoutSeconds, -1) != 30 {
			t.Errorf("nodeDeletionTimeoutSeconds %v, want the user's 30", m.Spec.Deletion.NodeDeletionTimeoutSeconds)
		}
	})
	t.Run("ClusterNameImmutable", func(t *testing.T) {
		m := capiMachine("moving", "c1")
		if err := bob.Create(ctx, m); err != nil {
			t.Fatal(err)
		}
		m.Spec.ClusterName = "c2"
		expectDenied(t, bob.Update(ctx, m), "spec.clusterName: Forbidden: field is immutable")
		m.Spec.ClusterName = "c1"
		m.Labels[clusterv1.ClusterNameLabel] = "c2"
		expectDenied(t, bob.Update(ctx, m), "metadata.labels[cluster.x-k8s.io/cluster-name]: Forbidden: field is immutable")
		delete(m.Labels, clusterv1.ClusterNameLabel)
		expectDenied(t, bob.Update(ctx, m), "metadata.labels[cluster.x-k8s.io/cluster-name]: Forbidden: field is immutable")
		m.Labels[clusterv1.ClusterNameLabel] = "c1"
		m.Labels["team"] = "green"
		if err := bob.Update(ctx, m); err != nil {
			t.Fatalf("an update leaving the cluster alone was refused: %v", err)
		}
		ms := capiMachineSet("moving", "c1")
		if err := bob.Create(ctx, ms); err != nil {
			t.Fatal(err)
		}
		ms.Spec.ClusterName = "c2"
		expectDenied(t, bob.Update(ctx, ms), "spec.clusterName: Forbidden: field is immutable")
	})
	t.Run("MaxProvisioningIsAPositiveInteger", func(t *testing.T) {
		for _, v := range []string{"0", "-1", "ten", "1e3", "1000000000"} {
			ms := capiMachineSet("limited", "c1")
			ms.Annotations = map[string]string{"machina.dev/max-provisioning": v}
			expectDenied(t, bob.Create(ctx, ms, client.DryRunAll), `metadata.annotations[machina.dev/max-provisioning]: Invalid value: "`+v+
				`": must be a positive integer (how many of the set's Machines may be provisioning at once)`)
		}
		md := &clusterv1.MachineDeployment{ObjectMeta: metav1.ObjectMeta{Name: "limited", Namespace: ns,
			Annotations: map[string]string{"machina.dev/max-provisioning": "none"}},
			Spec: clusterv1.MachineDeploymentSpec{ClusterName: "c1", Selector: metav1.LabelSelector{MatchLabels: map[string]string{"md": "limited"}},
				Template: clusterv1.MachineTemplateSpec{ObjectMeta: clusterv1.ObjectMeta{Labels: map[string]string{"md": "limited"}}, Spec: capiMachineSpec("c1")}}}
		expectDenied(t, bob.Create(ctx, md, client.DryRunAll), `metadata.annotations[machina.dev/max-provisioning]: Invalid value: "none"`)
		md.Annotations["machina.dev/max-provisioning"] = "50"
		if err := bob.Create(ctx, md, client.DryRunAll); err != nil {
			t.Fatalf("a limit of 50 refused: %v", err)
		}
	})
	t.Run("MachineSetDefaulted", func(t *testing.T) {
		ms := capiMachineSet("plain", "c1")
		if err := bob.Create(ctx, ms); err != nil {
			t.Fatal(err)
		}
		if ptr.Deref(ms.Spec.Replicas, -1) != 1 || ms.Labels[clusterv1.ClusterNameLabel] != "c1" ||
			ms.Spec.Selector.MatchLabels[clusterv1.ClusterNameLabel] != "c1" || ms.Spec.Selector.MatchLabels["set"] != "plain" ||
			ms.Spec.Template.Labels[clusterv1.ClusterNameLabel] != "c1" || ms.Spec.Template.Labels["set"] != "plain" {
			t.Errorf("replicas %v labels %v selector %v template labels %v", ms.Spec.Replicas, ms.Labels,
				ms.Spec.Selector.MatchLabels, ms.Spec.Template.Labels)
		}
		// With the autoscaler's bounds: its min size when created, then the old replicas
		// brought within the bounds when an update leaves replicas out.
		as := capiMachineSet("autoscaled", "c1")
		as.Annotations = map[string]string{clusterv1.AutoscalerMinSizeAnnotation: "2", clusterv1.AutoscalerMaxSizeAnnotation: "5"}
		if err := bob.Create(ctx, as); err != nil {
			t.Fatal(err)
		}
		if ptr.Deref(as.Spec.Replicas, -1) != 2 {
			t.Errorf("replicas %v, want the min size 2", as.Spec.Replicas)
		}
		as.Spec.Replicas = ptr.To[int32](7)
		if err := bob.Update(ctx, as); err != nil {
			t.Fatal(err)
		}
		as.Spec.Replicas = nil
		if err := bob.Update(ctx, as); err != nil {
			t.Fatal(err)
		}
		if ptr.Deref(as.Spec.Replicas, -1) != 5 {
			t.Errorf("replicas %v, want 7 brought down to the max size 5", as.Spec.Replicas)
		}
	})
}
