package azure

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	mapiv1 "github.com/openshift/api/machine/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	capzv1 "sigs.k8s.io/cluster-api-provider-azure/api/v1beta1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/machina-dev/machina/internal/convert"
	ct "github.com/machina-dev/machina/internal/convert/converttest"
)

const (
	roleLabel  = convert.MachineAPIRoleLabel
	cpLabel    = clusterv1.MachineControlPlaneLabel
	internalLB = cluster + "-internal"
)

// installerCluster is the AzureCluster the installer writes: an Internal API server load
// balancer <cluster>-internal and the control-plane outbound load balancer <cluster>.
func installerCluster() *capzv1.AzureCluster {
	ac := &capzv1.AzureCluster{ObjectMeta: metav1.ObjectMeta{Name: cluster}}
	ac.Spec.Location, ac.Spec.SubscriptionID, ac.Spec.ResourceGroup = location, subscription, rg
	ac.Spec.NetworkSpec.Vnet.Name = cluster + "-vnet"
	ac.Spec.NetworkSpec.NodeOutboundLB = &capzv1.LoadBalancerSpec{Name: cluster}
	ac.Spec.NetworkSpec.APIServerLB = &capzv1.LoadBalancerSpec{Name: internalLB, BackendPool: capzv1.BackendPool{Name: internalLB},
		LoadBalancerClassSpec: capzv1.LoadBalancerClassSpec{Type: capzv1.Internal}}
	ac.Spec.NetworkSpec.ControlPlaneOutboundLB = &capzv1.LoadBalancerSpec{Name: cluster}
	return ac
}

func cpContext(t *testing.T, edit func(*capzv1.AzureCluster)) convert.Context {
	t.Helper()
	c := testCtx
	if edit == nil { // offline: no AzureCluster
		return c
	}
	ac := installerCluster()
	edit(ac)
	p, err := FromAzureCluster(ac)
	if err != nil {
		t.Fatal(err)
	}
	c.Platform = p
	return c
}

// masterSpec is a master's providerSpec as the installer writes it.
func masterSpec() *mapiv1.AzureMachineProviderSpec {
	ps := genProviderSpec(ct.New(11))
	ps.Subnet = cluster + "-master-subnet"
	ps.InternalLoadBalancer, ps.PublicLoadBalancer = internalLB, cluster
	ps.ManagedIdentity = ""
	return ps
}

func azureMachine(t *testing.T, ps *mapiv1.AzureMachineProviderSpec, labels map[string]string) *mapiv1.Machine {
	t.Helper()
	b, err := json.Marshal(ps)
	if err != nil {
		t.Fatal(err)
	}
	labels[convert.MachineAPIClusterLabel] = cluster
	return &mapiv1.Machine{
		ObjectMeta: metav1.ObjectMeta{Name: cluster + "-master-0", Namespace: "openshift-machine-api", Labels: labels},
		Spec:       mapiv1.MachineSpec{ProviderSpec: mapiv1.ProviderSpec{Value: &runtime.RawExtension{Raw: b}}},
	}
}

func noEdit(*capzv1.AzureCluster) {}

// TestControlPlaneToClusterAPI: a master converts when its load balancers are those CAPZ adds a
// control-plane Machine to, is refused naming the providerSpec field otherwise, is refused by
// its role with a Public API server load balancer, and converts with a warning offline.
func TestControlPlaneToClusterAPI(t *testing.T) {
	master := func() map[string]string { return map[string]string{roleLabel: "master"} }
	v := "spec.providerSpec.value."
	for _, tc := range []struct {
		name       string
		edit       func(*capzv1.AzureCluster)
		spec       func(*mapiv1.AzureMachineProviderSpec)
		labels     map[string]string
		wantErrors []string
		wantWarn   string
	}{
		{name: "installer master", edit: noEdit, labels: master(), wantWarn: "public API pool"},
		{name: "another internal load balancer", edit: noEdit, spec: func(ps *mapiv1.AzureMachineProviderSpec) { ps.InternalLoadBalancer = "other" }, labels: master(),
			wantErrors: []string{v + "internalLoadBalancer"}},
		{name: "no internal load balancer", edit: noEdit, spec: func(ps *mapiv1.AzureMachineProviderSpec) { ps.InternalLoadBalancer = "" }, labels: master(),
			wantErrors: []string{v + "internalLoadBalancer"}},
		{name: "another public load balancer", edit: noEdit, spec: func(ps *mapiv1.AzureMachineProviderSpec) { ps.PublicLoadBalancer = "other" }, labels: master(),
			wantErrors: []string{v + "publicLoadBalancer"}},
		{name: "user-defined routing", edit: func(ac *capzv1.AzureCluster) { ac.Spec.NetworkSpec.ControlPlaneOutboundLB = nil },
			spec: func(ps *mapiv1.AzureMachineProviderSpec) { ps.PublicLoadBalancer = "" }, labels: master()},
		{name: "public load balancer without CAPZ's", edit: func(ac *capzv1.AzureCluster) { ac.Spec.NetworkSpec.ControlPlaneOutboundLB = nil }, labels: master(),
			wantErrors: []string{v + "publicLoadBalancer"}},
		{name: "Public API server load balancer", edit: func(ac *capzv1.AzureCluster) { ac.Spec.NetworkSpec.APIServerLB.Type = capzv1.Public }, labels: master(),
			wantErrors: []string{"metadata.labels[" + roleLabel + "]"}},
		{name: "defaulted API server load balancer", edit: func(ac *capzv1.AzureCluster) { ac.Spec.NetworkSpec.APIServerLB = nil }, labels: master(),
			wantErrors: []string{"metadata.labels[" + roleLabel + "]"}},
		{name: "without the AzureCluster", labels: master(), wantWarn: "AzureCluster is not known"},
		{name: "a worker with an internal load balancer", edit: noEdit, labels: map[string]string{roleLabel: "worker"},
			wantErrors: []string{v + "internalLoadBalancer"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ps := masterSpec()
			if tc.spec != nil {
				tc.spec(ps)
			}
			out, w, errs := convert.ToClusterAPIMachine(azureMachine(t, ps, tc.labels), cpContext(t, tc.edit))
			if got := fields(errs); !slices.Equal(got, tc.wantErrors) {
				t.Fatalf("errors on %v, want %v: %v", got, tc.wantErrors, errs)
			}
			if tc.wantErrors != nil {
				if d := errs[0].Detail; !strings.Contains(d, "spec.networkSpec.") && !strings.Contains(d, "role") {
					t.Errorf("the refusal names no AzureCluster field: %s", d)
				}
				return
			}
			if _, ok := out.Machine.Labels[cpLabel]; !ok {
				t.Errorf("no %s label: %v", cpLabel, out.Machine.Labels)
			}
			if warned := slices.ContainsFunc(w, func(w convert.Warning) bool { return strings.Contains(w.Detail, tc.wantWarn) }); tc.wantWarn != "" && !warned {
				t.Errorf("no warning %q: %v", tc.wantWarn, w)
			}
		})
	}
}

// capiControlPlane is the installer's master converted to the Cluster API, with labels.
func capiControlPlane(t *testing.T, labels map[string]string) (*clusterv1.Machine, client.Object) {
	t.Helper()
	out, _, errs := convert.ToClusterAPIMachine(azureMachine(t, masterSpec(), map[string]string{roleLabel: "master"}), cpContext(t, noEdit))
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	out.Machine.Labels = labels
	out.Machine.Labels[convert.ClusterAPIClusterLabel] = cluster
	return out.Machine, out.InfraMachine
}

// TestControlPlaneToMachineAPI: a Cluster API control-plane Machine gets role master and the
// load balancers CAPZ puts it behind, or is refused when they cannot be known or written.
func TestControlPlaneToMachineAPI(t *testing.T) {
	for _, tc := range []struct {
		name         string
		edit         func(*capzv1.AzureCluster)
		wantErrors   []string
		wantPublicLB string
	}{
		{name: "installer cluster", edit: noEdit, wantPublicLB: cluster},
		{name: "user-defined routing", edit: func(ac *capzv1.AzureCluster) { ac.Spec.NetworkSpec.ControlPlaneOutboundLB = nil }},
		{name: "Public API server load balancer", edit: func(ac *capzv1.AzureCluster) { ac.Spec.NetworkSpec.APIServerLB.Type = capzv1.Public },
			wantErrors: []string{"Machine.metadata.labels[" + cpLabel + "]"}},
		{name: "without the AzureCluster", wantErrors: []string{"AzureMachine.spec"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, im := capiControlPlane(t, map[string]string{cpLabel: ""})
			out, _, errs := convert.ToMachineAPIMachine(m, im, cpContext(t, tc.edit))
			if got := fields(errs); !slices.Equal(got, tc.wantErrors) {
				t.Fatalf("errors on %v, want %v: %v", got, tc.wantErrors, errs)
			}
			if tc.wantErrors != nil {
				return
			}
			var ps mapiv1.AzureMachineProviderSpec
			if err := json.Unmarshal(out.Spec.ProviderSpec.Value.Raw, &ps); err != nil {
				t.Fatal(err)
			}
			if out.Labels[roleLabel] != "master" || ps.InternalLoadBalancer != internalLB || ps.PublicLoadBalancer != tc.wantPublicLB {
				t.Errorf("role %q, internal %q, public %q; want master, %s, %q", out.Labels[roleLabel], ps.InternalLoadBalancer, ps.PublicLoadBalancer, internalLB, tc.wantPublicLB)
			}
		})
	}
}

// The load balancers CAPZ's webhook names when the AzureCluster leaves them unnamed.
func TestControlPlaneLoadBalancerDefaults(t *testing.T) {
	ac := installerCluster()
	ac.Spec.NetworkSpec.APIServerLB.Name, ac.Spec.NetworkSpec.APIServerLB.BackendPool.Name = "", ""
	ac.Spec.NetworkSpec.ControlPlaneOutboundLB.Name = ""
	p := newPlatform(t).WithAzureCluster(ac)
	if got, want := *p.APIServerLB, (LoadBalancer{Name: cluster + "-internal-lb", BackendPool: cluster + "-internal-lb-backendPool", Internal: true}); got != want {
		t.Errorf("API server load balancer %+v, want %+v", got, want)
	}
	if got, want := *p.ControlPlaneOutboundLB, (LoadBalancer{Name: cluster + "-outbound-lb", BackendPool: cluster + "-outbound-lb-outboundBackendPool"}); got != want {
		t.Errorf("control-plane outbound load balancer %+v, want %+v", got, want)
	}
	ac.Spec.NetworkSpec.APIServerLB = nil
	if lb := newPlatform(t).WithAzureCluster(ac).APIServerLB; lb.Internal || lb.Name != cluster+"-public-lb" {
		t.Errorf("no apiServerLB: %+v, want CAPZ's default Public %s-public-lb", lb, cluster)
	}
}
