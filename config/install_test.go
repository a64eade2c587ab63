package config_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/machina-dev/machina/api/infrastructure/v1alpha1"
	"github.com/machina-dev/machina/config"
	"github.com/machina-dev/machina/internal/demo"
	"github.com/machina-dev/machina/internal/lab"
	"github.com/machina-dev/machina/internal/manager"
	"github.com/machina-dev/machina/internal/testenv"
)

// One lab for the install tests: every controller group, running as the manager's
// ServiceAccount with only the roles config/ ships.
func TestInstalledManager(t *testing.T) {
	e := testenv.Start(t, testenv.Options{Groups: "machineapi,clusterapi,sim,sync,migration,admission"})
	e.SeedCluster("lab")
	t.Run("IdentityHasOnlyTheGeneratedRoles", func(t *testing.T) { testIdentity(e.For(t)) })
	t.Run("ScaleAndMigrateUnderLeastPrivilege", func(t *testing.T) { testScaleAndMigrate(e.For(t)) })
	t.Run("LeaderElectionUnderServiceAccount", func(t *testing.T) { testLeaderElection(e.For(t)) })
	t.Run("ThirdPartyInfraMachineByAggregatedRole", func(t *testing.T) { testThirdPartyProvider(e.For(t)) })
	t.Run("ServerSideDryRunOfEveryManifest", func(t *testing.T) { testDryRun(e.For(t)) })
}

// The manager's identity is a ServiceAccount's, not an administrator's, and RBAC limits it:
// it may do what the controllers need and not what they do not.
func testIdentity(e *testenv.Env) {
	t, ctx := e.T, context.Background()
	ssr := &authenticationv1.SelfSubjectReview{}
	if err := e.ManagerClient().Create(ctx, ssr); err != nil {
		t.Fatal(err)
	}
	ui := ssr.Status.UserInfo
	if ui.Username != lab.ManagerUser || slices.Contains(ui.Groups, "system:masters") {
		t.Fatalf("the manager authenticates as %s %v", ui.Username, ui.Groups)
	}
	for _, tc := range []struct {
		group, resource, verb, ns string
		allowed                   bool
	}{
		{"machine.openshift.io", "machines", "update", "", true},
		{"cluster.x-k8s.io", "machinesets", "create", "", true},
		{"infrastructure.machina.dev", "simmachines", "delete", "", true}, // aggregated from the sim provider
		{"", "pods/eviction", "create", "", true},
		{"coordination.k8s.io", "leases", "update", config.Namespace, true},
		{"coordination.k8s.io", "leases", "update", "default", false},
		{"", "configmaps", "list", "", false},
		{"", "secrets", "delete", "", false},
		{"rbac.authorization.k8s.io", "clusterrolebindings", "create", "", false},
		{"apiextensions.k8s.io", "customresourcedefinitions", "update", "", false},
		{"infrastructure.cluster.x-k8s.io", "awsmachines", "patch", "", true},       // config/aws, aggregated
		{"infrastructure.cluster.x-k8s.io", "openstackmachines", "patch", "", true}, // config/openstack, aggregated
		{"infrastructure.cluster.x-k8s.io", "openstackclusters", "delete", "", false},
		{"infrastructure.cluster.x-k8s.io", "gcpmachines/status", "patch", "", true},     // config/gcp, aggregated
		{"infrastructure.cluster.x-k8s.io", "azuremachinetemplates", "create", "", true}, // config/azure, aggregated
		{"infrastructure.cluster.x-k8s.io", "azureclusters", "delete", "", false},
		{"infrastructure.cluster.x-k8s.io", "ibmpowervsmachinetemplates", "create", "", true}, // config/powervs, aggregated
		{"infrastructure.cluster.x-k8s.io", "ibmpowervsmachines/status", "patch", "", true},
		{"infrastructure.cluster.x-k8s.io", "ibmpowervsclusters", "delete", "", false},
		{"infrastructure.cluster.x-k8s.io", "ibmvpcmachines", "get", "", false},            // CAPIBM's VPC kinds are not converted
		{"infrastructure.cluster.x-k8s.io", "vspheremachinetemplates", "create", "", true}, // config/vsphere, aggregated
		{"infrastructure.cluster.x-k8s.io", "vspheremachines/status", "patch", "", true},
		{"infrastructure.cluster.x-k8s.io", "vsphereclusters", "delete", "", false},
		{"infrastructure.cluster.x-k8s.io", "vspherevms", "get", "", false}, // CAPV's own VM objects are not machina's
		{"infrastructure.cluster.x-k8s.io", "awsclusters", "delete", "", false},
		{"infrastructure.cluster.x-k8s.io", "awsmanagedclusters", "get", "", false}, // no provider role for it
		{"apps", "deployments", "list", "", false},
	} {
		res, sub, _ := strings.Cut(tc.resource, "/")
		sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User: ui.Username, Groups: ui.Groups,
			ResourceAttributes: &authorizationv1.ResourceAttributes{Group: tc.group, Resource: res, Subresource: sub,
				Verb: tc.verb, Namespace: tc.ns},
		}}
		if err := e.Client.Create(ctx, sar); err != nil {
			t.Fatal(err)
		}
		if sar.Status.Allowed != tc.allowed {
			t.Errorf("%s %s.%s in %q: allowed %v, want %v", tc.verb, tc.resource, tc.group, tc.ns, sar.Status.Allowed, tc.allowed)
		}
	}
}

func scenarioSet(name string, replicas int32) *machinev1beta1.MachineSet {
	raw, _ := json.Marshal(&infrav1.SimMachineProviderSpec{
		TypeMeta: metav1.TypeMeta{APIVersion: infrav1.GroupVersion.String(), Kind: "SimMachineProviderSpec"},
		Region:   "sim-east-1", Zone: "sim-east-1b", InstanceType: "s1.small", Image: "sim-rhcos-9",
		UserDataSecret: &corev1.LocalObjectReference{Name: demo.UserDataSecret}})
	sel := map[string]string{"machine.openshift.io/cluster-api-cluster": "lab", "machine.openshift.io/cluster-api-machineset": name}
	return &machinev1beta1.MachineSet{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: manager.DefaultMachineAPINamespace,
			Labels: map[string]string{"machine.openshift.io/cluster-api-cluster": "lab"}},
		Spec: machinev1beta1.MachineSetSpec{Replicas: ptr.To(replicas), Selector: metav1.LabelSelector{MatchLabels: sel},
			Template: machinev1beta1.MachineTemplateSpec{ObjectMeta: machinev1beta1.ObjectMeta{Labels: sel},
				Spec: machinev1beta1.MachineSpec{ProviderSpec: machinev1beta1.ProviderSpec{Value: &runtime.RawExtension{Raw: raw}}}}},
	}
}

// A Machine API MachineSet is mirrored, scaled up, handed to the Cluster API, scaled there,
// handed back and scaled down: every controller group does its part while the manager runs
// with the generated roles only, and RBAC refuses it nothing.
func testScaleAndMigrate(e *testenv.Env) {
	t, ctx := e.T, context.Background()
	const name = "rbac-scenario"
	if err := e.Client.Create(ctx, scenarioSet(name, 1)); err != nil {
		t.Fatal(err)
	}
	mapiKey := client.ObjectKey{Namespace: manager.DefaultMachineAPINamespace, Name: name}
	capiKey := client.ObjectKey{Namespace: manager.DefaultClusterAPINamespace, Name: name}
	expect := func(n int) {
		e.Eventually(3*time.Minute, fmt.Sprintf("%d Machines in both APIs, each with a Node", n), func(ctx context.Context) (bool, string, error) {
			sel := client.MatchingLabels{"machine.openshift.io/cluster-api-machineset": name}
			var mm machinev1beta1.MachineList
			var cm clusterv1.MachineList
			if err := e.Client.List(ctx, &mm, client.InNamespace(mapiKey.Namespace), sel); err != nil {
				return false, err.Error(), nil
			}
			if err := e.Client.List(ctx, &cm, client.InNamespace(capiKey.Namespace), sel); err != nil {
				return false, err.Error(), nil
			}
			running, desc := 0, ""
			for _, m := range mm.Items {
				desc += fmt.Sprintf(" mapi/%s:%s", m.Name, ptr.Deref(m.Status.Phase, "-"))
				if ptr.Deref(m.Status.Phase, "") == machinev1beta1.PhaseRunning && m.Status.NodeRef != nil && m.DeletionTimestamp == nil {
					running++
				}
			}
			for _, m := range cm.Items {
				desc += fmt.Sprintf(" capi/%s:%s", m.Name, m.Status.Phase)
			}
			return len(mm.Items) == n && len(cm.Items) == n && running == n, desc, nil
		})
		e.Logf("%d Machines in both APIs, running with Nodes", n)
	}
	migrate := func(to machinev1beta1.MachineAuthority) {
		ms := &machinev1beta1.MachineSet{}
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			if err := e.Client.Get(ctx, mapiKey, ms); err != nil {
				return err
			}
			ms.Spec.AuthoritativeAPI = to
			return e.Client.Update(ctx, ms)
		})
		if err != nil {
			t.Fatal(err)
		}
		e.Eventually(2*time.Minute, "authority moves to "+string(to), func(ctx context.Context) (bool, string, error) {
			if err := e.Client.Get(ctx, mapiKey, ms); err != nil {
				return false, err.Error(), nil
			}
			return ms.Status.AuthoritativeAPI == to, string(ms.Status.AuthoritativeAPI), nil
		})
		e.Logf("MachineSet %s is %s-authoritative", name, to)
	}
	scale := func(obj client.Object, key client.ObjectKey, set func(), n int32) {
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			if err := e.Client.Get(ctx, key, obj); err != nil {
				return err
			}
			set()
			return e.Client.Update(ctx, obj)
		})
		if err != nil {
			t.Fatal(err)
		}
		expect(int(n))
	}
	mapiSet, capiSet := &machinev1beta1.MachineSet{}, &clusterv1.MachineSet{}

	expect(1)
	scale(mapiSet, mapiKey, func() { mapiSet.Spec.Replicas = ptr.To[int32](2) }, 2)
	migrate(machinev1beta1.MachineAuthorityClusterAPI)
	scale(capiSet, capiKey, func() { capiSet.Spec.Replicas = ptr.To[int32](3) }, 3)
	migrate(machinev1beta1.MachineAuthorityMachineAPI)
	scale(mapiSet, mapiKey, func() { mapiSet.Spec.Replicas = ptr.To[int32](1) }, 1)

	if d := e.Lab.ManagerDenials(); len(d) > 0 {
		t.Fatalf("RBAC refused the manager %d request(s):\n  %s", len(d), strings.Join(d, "\n  "))
	}
}

// A replica elects a leader with the Lease rights the generated Role gives it in its
// namespace.
func testLeaderElection(e *testenv.Env) {
	t := e.T
	cfg, err := e.Lab.ManagerConfig()
	if err != nil {
		t.Fatal(err)
	}
	const id = "machina-rbac-test"
	mgr, err := manager.New(cfg, manager.Options{MetricsAddr: "0", HealthProbeAddr: "0",
		LeaderElection: true, LeaderElectionNamespace: config.Namespace, LeaderElectionID: id})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("manager: %v", err)
		}
	}()
	select {
	case <-mgr.Elected():
	case err := <-done:
		t.Fatalf("manager stopped before it was elected: %v", err)
	case <-time.After(60 * time.Second):
		t.Fatalf("not elected within 60s; RBAC denials: %v", e.Lab.ManagerDenials())
	}
	lease := &coordinationv1.Lease{}
	if err := e.Client.Get(context.Background(), client.ObjectKey{Namespace: config.Namespace, Name: id}, lease); err != nil {
		t.Fatal(err)
	}
	if ptr.Deref(lease.Spec.HolderIdentity, "") == "" {
		t.Errorf("Lease %s/%s has no holder", config.Namespace, id)
	}
}
