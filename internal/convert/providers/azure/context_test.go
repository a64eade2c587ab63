package azure

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	configv1 "github.com/openshift/api/config/v1"
	mapiv1 "github.com/openshift/api/machine/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
	capzv1 "sigs.k8s.io/cluster-api-provider-azure/api/v1beta1"

	"github.com/machina-dev/machina/internal/convert"
	ct "github.com/machina-dev/machina/internal/convert/converttest"
)

func TestNewContext(t *testing.T) {
	infra := &configv1.Infrastructure{ObjectMeta: metav1.ObjectMeta{Name: "cluster"}}
	infra.Status.InfrastructureName = cluster
	ac := &capzv1.AzureCluster{ObjectMeta: metav1.ObjectMeta{Name: cluster}}
	ac.Spec.Location, ac.Spec.SubscriptionID, ac.Spec.ResourceGroup = location, subscription, rg
	ac.Spec.NetworkSpec.Vnet = capzv1.VnetSpec{Name: "byo-vnet", ResourceGroup: "net-rg"}
	ac.Spec.NetworkSpec.NodeOutboundLB = &capzv1.LoadBalancerSpec{}
	if _, err := NewContext(infra, ac); err == nil || !strings.Contains(err.Error(), "no Azure platform status") {
		t.Errorf("non-Azure Infrastructure: %v", err)
	}
	infra.Status.PlatformStatus = &configv1.PlatformStatus{Type: configv1.AzurePlatformType, Azure: &configv1.AzurePlatformStatus{ResourceGroupName: "infra-rg"}}
	if _, err := NewContext(infra, nil); err == nil {
		t.Error("no AzureCluster accepted: the Infrastructure names no location")
	}
	c, err := NewContext(infra, ac)
	if err != nil {
		t.Fatal(err)
	}
	want := Platform{Location: location, SubscriptionID: subscription, ResourceGroup: rg, NetworkResourceGroup: "net-rg", Vnet: "byo-vnet", OutboundLoadBalancer: ptr.To(cluster)}
	if p := c.Platform.(Platform); c.ClusterName != cluster || !equalPlatform(p, want) {
		t.Errorf("context %+v, platform %+v; want %+v", c, p, want)
	}
	// Without a node outbound load balancer (user-defined routing) workers join none.
	ac.Spec.NetworkSpec.NodeOutboundLB = nil
	if p, _ := FromAzureCluster(ac); p.OutboundLoadBalancer == nil || *p.OutboundLoadBalancer != "" {
		t.Errorf("no nodeOutboundLB: %v", p.OutboundLoadBalancer)
	}
	if p := newPlatform(t).WithInfrastructure(infra); p.ResourceGroup != "infra-rg" || p.networkResourceGroup() != "infra-rg" {
		t.Errorf("resource groups from the Infrastructure: %+v", p)
	}
}

func equalPlatform(a, b Platform) bool {
	return a.Location == b.Location && a.SubscriptionID == b.SubscriptionID && a.ResourceGroup == b.ResourceGroup &&
		a.NetworkResourceGroup == b.NetworkResourceGroup && a.Vnet == b.Vnet && ptr.Equal(a.OutboundLoadBalancer, b.OutboundLoadBalancer)
}

// newPlatform is New for a known-good location; New without one must fail.
func newPlatform(t *testing.T) Platform {
	t.Helper()
	p, err := New(location)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := New(""); err == nil {
		t.Error("New without a location accepted")
	}
	return p
}

func toInfra(t *testing.T, p Platform, ps *mapiv1.AzureMachineProviderSpec) *convert.Report {
	t.Helper()
	b, err := json.Marshal(ps)
	if err != nil {
		t.Fatal(err)
	}
	r := &convert.Report{}
	p.ToInfra(&runtime.RawExtension{Raw: b}, field.NewPath("v"), r)
	return r
}

// fields is converttest.Fields with each path once (several checks may name one field).
func fields(errs field.ErrorList) []string { return slices.Compact(ct.Fields(errs)) }

// Every value CAPZ cannot carry is an error naming its field, all reported together.
func TestErrorsNameFieldPaths(t *testing.T) {
	ps := genProviderSpec(ct.New(7))
	ps.Location = "eastus"
	ps.ResourceGroup = "other-rg"
	ps.Vnet = "other-vnet"
	ps.PublicLoadBalancer = ""
	ps.InternalLoadBalancer = cluster + "-internal"
	ps.AvailabilitySet = cluster + "-cluster"
	ps.SecurityGroup = cluster + "-nsg"
	ps.NatRule = ptr.To(int64(1))
	ps.CredentialsSecret.Name = "other"
	ps.Image = mapiv1.Image{ResourceID: "/subscriptions/x/resourceGroups/y"}
	ps.DataDisks = []mapiv1.DataDisk{{NameSuffix: "etcd", DiskSizeGB: 8, Lun: 0, DeletionPolicy: mapiv1.DiskDeletionPolicyTypeDetach, CachingType: "None"}}
	r := toInfra(t, testPlatform, ps)
	want := []string{"v.availabilitySet", "v.credentialsSecret.name", "v.dataDisks[0].deletionPolicy", "v.image.resourceID", "v.internalLoadBalancer",
		"v.location", "v.natRule", "v.publicLoadBalancer", "v.resourceGroup", "v.securityGroup", "v.vnet"}
	if got := fields(r.Errors); !slices.Equal(got, want) {
		t.Errorf("errors at %v\nwant %v\n%v", got, want, r.Errors)
	}
}

// Without the AzureCluster the subscription is unknown: images by resource ID cannot be
// converted, cluster values are reported unchecked, and nothing converts back.
func TestUnknownCluster(t *testing.T) {
	p := newPlatform(t)
	ps := genProviderSpec(ct.New(3))
	ps.Image = mapiv1.Image{ResourceID: galleryImage(ct.New(1))}
	r := toInfra(t, p, ps)
	if got := fields(r.Errors); !slices.Equal(got, []string{"v.image.resourceID"}) && !slices.Equal(got, []string{"v.image.resourceID", "v.managedIdentity"}) {
		t.Errorf("errors %v", r.Errors)
	}
	var warned []string
	for _, w := range r.Warnings {
		warned = append(warned, w.Field)
	}
	for _, f := range []string{"v.resourceGroup", "v.vnet", "v.publicLoadBalancer"} {
		if !slices.Contains(warned, f) {
			t.Errorf("no warning that %s was not checked: %v", f, r.Warnings)
		}
	}
	back := &convert.Report{}
	paths := convert.InfraPaths{Infra: field.NewPath("AzureMachine", "spec"), Machine: field.NewPath("Machine", "spec"), Metadata: field.NewPath("Machine", "metadata")}
	p.FromInfra(genSpec(ct.New(2)), convert.MachineValues{}, paths, back)
	if len(back.Errors) < 2 || !strings.Contains(back.Errors.ToAggregate().Error(), "give the AzureCluster") {
		t.Errorf("converting back without the AzureCluster: %v", back.Errors)
	}
}

// Values the Machine API leaves to Azure become explicit in CAPZ, with a warning.
func TestDefaultsAreStated(t *testing.T) {
	ps := genProviderSpec(ct.New(5))
	ps.OSDisk.CachingType, ps.OSDisk.DiskSettings.EphemeralStorageLocation = "", ""
	ps.Image = mapiv1.Image{Publisher: "redhat", Offer: "rh-ocp-worker", SKU: "rh-ocp-worker", Version: "4.15.1"}
	ps.Diagnostics = mapiv1.AzureDiagnostics{}
	b, _ := json.Marshal(ps)
	r := &convert.Report{}
	spec, _ := testPlatform.ToInfra(&runtime.RawExtension{Raw: b}, field.NewPath("v"), r)
	s := spec.(*capzv1.AzureMachineSpec)
	if len(r.Errors) > 0 {
		t.Fatal(r.Errors)
	}
	if s.OSDisk.CachingType != cachingReadWrite || s.Image.Marketplace.ThirdPartyImage || s.Diagnostics.Boot.StorageAccountType != capzv1.DisabledDiagnosticsStorage {
		t.Errorf("caching %q, image %+v, diagnostics %+v", s.OSDisk.CachingType, s.Image.Marketplace, s.Diagnostics.Boot)
	}
	var warned []string
	for _, w := range r.Warnings {
		warned = append(warned, w.Field)
	}
	if !slices.Contains(warned, "v.osDisk.cachingType") || !slices.Contains(warned, "v.image.type") {
		t.Errorf("warnings %v", r.Warnings)
	}
}
