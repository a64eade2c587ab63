package migration_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	configv1 "github.com/openshift/api/config/v1"
	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	capzv1 "sigs.k8s.io/cluster-api-provider-azure/api/v1beta1"
	capgv1 "sigs.k8s.io/cluster-api-provider-gcp/api/v1beta1"
	capibmv1 "sigs.k8s.io/cluster-api-provider-ibmcloud/api/powervs/v1beta3"
	capov1 "sigs.k8s.io/cluster-api-provider-openstack/api/v1beta1"
	capvv1 "sigs.k8s.io/cluster-api-provider-vsphere/api/govmomi/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/machina-dev/machina/internal/convert"
	"github.com/machina-dev/machina/internal/convert/providers/azure"
	"github.com/machina-dev/machina/internal/convert/providers/gcp"
	"github.com/machina-dev/machina/internal/convert/providers/openstack"
	"github.com/machina-dev/machina/internal/convert/providers/powervs"
	"github.com/machina-dev/machina/internal/convert/providers/vsphere"
	"github.com/machina-dev/machina/internal/provider"
	"github.com/machina-dev/machina/internal/testenv"
)

// uncontrolled is a platform of the provider registry that machina runs no controller for:
// no Machine API actuator and no Cluster API provider. Its CRDs come from its provider's Go
// module (testenv.Options.ProviderCRDs); nothing provisions its Machines, so what is tested
// is what machina's platform-neutral controllers do with its kinds: mirroring both ways,
// updates, deletion, and each handover up to where it needs the platform's own controllers.
type uncontrolled struct {
	provider provider.Provider
	// status is the Infrastructure platform status of a cluster on the platform.
	status *configv1.PlatformStatus
	// infraCluster is the cluster's InfraCluster named name in ns, as an installer writes it.
	infraCluster func(ns, name string) client.Object
	// spec is a providerSpec value of the platform in cluster that converts without error;
	// its size (flavor, instance type, VM size) is size.
	spec func(cluster, size string) *runtime.RawExtension
	// sizes are two sizes of the platform; sizeField is where an InfraMachine spec holds it,
	// specSizeField where a providerSpec value does.
	sizes         [2]string
	sizeField     []string
	specSizeField []string
}

// uncontrolledPlatforms lists the platforms TestPlatformsWithoutController runs on. Adding
// one is one entry.
func uncontrolledPlatforms() []uncontrolled {
	return []uncontrolled{
		{
			provider: provider.OpenStack(),
			status: &configv1.PlatformStatus{Type: configv1.OpenStackPlatformType, OpenStack: &configv1.OpenStackPlatformStatus{
				APIServerInternalIPs: []string{"10.0.0.5"}, IngressIPs: []string{"10.0.0.7"}, CloudName: "openstack"}},
			infraCluster: func(ns, name string) client.Object {
				return &capov1.OpenStackCluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
					Spec: capov1.OpenStackClusterSpec{IdentityRef: capov1.OpenStackIdentityReference{Name: "openstack-cloud-credentials", CloudName: "openstack"}}}
			},
			spec:          openstackSpec,
			sizes:         [2]string{"m1.large", "m1.xlarge"},
			sizeField:     []string{"flavor"},
			specSizeField: []string{"flavor"},
		},
		{
			provider: provider.GCP(),
			status: &configv1.PlatformStatus{Type: configv1.GCPPlatformType, GCP: &configv1.GCPPlatformStatus{
				ProjectID: gcpProject, Region: "us-central1"}},
			infraCluster: func(ns, name string) client.Object {
				return &capgv1.GCPCluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
					Spec: capgv1.GCPClusterSpec{Project: gcpProject, Region: "us-central1", Network: capgv1.NetworkSpec{Name: ptr.To(name + "-network")}}}
			},
			spec:          gcpSpec,
			sizes:         [2]string{"n2-standard-4", "n2-standard-8"},
			sizeField:     []string{"instanceType"},
			specSizeField: []string{"machineType"},
		},
		{
			// The Infrastructure's resource groups are the lab cluster's (azure-lab), as the
			// AzureCluster's and the providerSpec's.
			provider: provider.Azure(),
			status: &configv1.PlatformStatus{Type: configv1.AzurePlatformType, Azure: &configv1.AzurePlatformStatus{
				CloudName: configv1.AzurePublicCloud, ResourceGroupName: "azure-lab-rg", NetworkResourceGroupName: "azure-lab-rg"}},
			infraCluster: func(ns, name string) client.Object {
				return &capzv1.AzureCluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
					Spec: capzv1.AzureClusterSpec{AzureClusterClassSpec: capzv1.AzureClusterClassSpec{Location: "centralus", SubscriptionID: azureSubscription},
						ResourceGroup: name + "-rg", NetworkSpec: capzv1.NetworkSpec{Vnet: capzv1.VnetSpec{Name: name + "-vnet", ResourceGroup: name + "-rg"},
							NodeOutboundLB: &capzv1.LoadBalancerSpec{Name: name}}}}
			},
			spec:          azureSpec,
			sizes:         [2]string{"Standard_D4s_v3", "Standard_D8s_v3"},
			sizeField:     []string{"vmSize"},
			specSizeField: []string{"vmSize"},
		},
		{
			// The IBMPowerVSCluster names the workspace the providerSpec names (as the
			// installer's do), so Machines given it by name convert.
			provider: provider.PowerVS(),
			status: &configv1.PlatformStatus{Type: configv1.PowerVSPlatformType, PowerVS: &configv1.PowerVSPlatformStatus{
				Region: "dal", Zone: "dal10", ResourceGroup: "powervs-lab-rg"}},
			infraCluster: func(ns, name string) client.Object {
				return &capibmv1.IBMPowerVSCluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
					Spec: capibmv1.IBMPowerVSClusterSpec{ServiceInstance: &capibmv1.IBMPowerVSResourceReference{Name: ptr.To(name + "-power-iaas")},
						Zone: ptr.To("dal10"), Network: capibmv1.IBMPowerVSResourceReference{RegEx: ptr.To("^DHCPSERVER.*" + name + ".*_Private$")}}}
			},
			spec:          powervsSpec,
			sizes:         [2]string{"s922", "e980"},
			sizeField:     []string{"systemType"},
			specSizeField: []string{"systemType"},
		},
		{
			// vSphere has no size field of type string; the template a VM is cloned from
			// stands in for it (both APIs name it in their field template).
			provider: provider.VSphere(),
			status:   &configv1.PlatformStatus{Type: configv1.VSpherePlatformType, VSphere: &configv1.VSpherePlatformStatus{}},
			infraCluster: func(ns, name string) client.Object {
				return &capvv1.VSphereCluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
					Spec: capvv1.VSphereClusterSpec{Server: "vcenter.lab.example.com"}}
			},
			spec:          vsphereSpec,
			sizes:         [2]string{"/labdc/vm/rhcos-9.6-template", "/labdc/vm/rhcos-9.8-template"},
			sizeField:     []string{"template"},
			specSizeField: []string{"template"},
		},
	}
}

// openstackSpec is a worker providerSpec as the OpenShift installer writes it on OpenStack,
// trimmed to what any Machine needs.
func openstackSpec(cluster, flavor string) *runtime.RawExtension {
	raw, _ := json.Marshal(map[string]any{
		"apiVersion": "machine.openshift.io/v1alpha1", "kind": openstack.ProviderSpecKind,
		"cloudName": "openstack", "cloudsSecret": map[string]any{"name": "openstack-cloud-credentials", "namespace": mapiNS},
		"flavor": flavor, "image": cluster + "-rhcos",
		"networks": []any{map[string]any{"filter": map[string]any{}, "subnets": []any{map[string]any{"filter": map[string]any{
			"name": cluster + "-nodes", "tags": "openshiftClusterID=" + cluster}}}}},
		"securityGroups": []any{map[string]any{"filter": map[string]any{}, "name": cluster + "-worker"}},
		"tags":           []any{"openshiftClusterID=" + cluster},
		"userDataSecret": map[string]any{"name": "worker-user-data"},
	})
	return &runtime.RawExtension{Raw: raw}
}

const (
	gcpProject        = "openshift-gce-devel"
	azureSubscription = "53b8f551-f0fc-4bea-8cba-6d1fefd54c8a"
)

// gcpSpec is a worker providerSpec as the OpenShift installer writes it on GCP, in the
// cluster's network and project, trimmed to what any Machine needs.
func gcpSpec(cluster, machineType string) *runtime.RawExtension {
	raw, _ := json.Marshal(map[string]any{
		"apiVersion": "machine.openshift.io/v1beta1", "kind": gcp.ProviderSpecKind,
		"credentialsSecret": map[string]any{"name": "gcp-cloud-credentials"},
		"disks": []any{map[string]any{"autoDelete": true, "boot": true, "sizeGb": 128, "type": "pd-ssd",
			"image": "projects/rhcos-cloud/global/images/rhcos-9-6-20250523-0-gcp-x86-64"}},
		"machineType":       machineType,
		"networkInterfaces": []any{map[string]any{"network": cluster + "-network", "subnetwork": cluster + "-worker-subnet"}},
		"projectID":         gcpProject, "region": "us-central1", "zone": "us-central1-a",
		"serviceAccounts": []any{map[string]any{"email": cluster + "-w@" + gcpProject + ".iam.gserviceaccount.com",
			"scopes": []any{"https://www.googleapis.com/auth/cloud-platform"}}},
		"tags":           []any{cluster + "-worker"},
		"userDataSecret": map[string]any{"name": "worker-user-data"},
	})
	return &runtime.RawExtension{Raw: raw}
}

// azureSpec is a worker providerSpec as the OpenShift installer writes it on Azure: the image
// from the cluster's gallery, the cluster's virtual network, resource group and outbound load
// balancer (as in its AzureCluster), zone 1.
func azureSpec(cluster, vmSize string) *runtime.RawExtension {
	raw, _ := json.Marshal(map[string]any{
		"apiVersion": "machine.openshift.io/v1beta1", "kind": azure.ProviderSpecKind,
		"credentialsSecret": map[string]any{"name": "azure-cloud-credentials", "namespace": mapiNS},
		"image": map[string]any{"resourceID": "/resourceGroups/" + cluster + "-rg/providers/Microsoft.Compute/galleries/gallery_" +
			strings.ReplaceAll(cluster, "-", "_") + "/images/" + cluster + "-gen2/versions/latest"},
		"location": "centralus", "networkResourceGroup": cluster + "-rg", "resourceGroup": cluster + "-rg",
		"osDisk":             map[string]any{"diskSizeGB": 128, "managedDisk": map[string]any{"storageAccountType": "Premium_LRS"}, "osType": "Linux"},
		"publicLoadBalancer": cluster, "subnet": cluster + "-worker-subnet", "vnet": cluster + "-vnet",
		"userDataSecret": map[string]any{"name": "worker-user-data"},
		"vmSize":         vmSize, "zone": "1",
	})
	return &runtime.RawExtension{Raw: raw}
}

// powervsSpec is a worker providerSpec as the OpenShift installer writes it on PowerVS: the
// cluster's workspace and RHCOS image by name, its DHCP network by regular expression.
func powervsSpec(cluster, systemType string) *runtime.RawExtension {
	raw, _ := json.Marshal(map[string]any{
		"apiVersion": "machine.openshift.io/v1", "kind": powervs.ProviderSpecKind,
		"credentialsSecret": map[string]any{"name": "powervs-credentials"},
		"image":             map[string]any{"type": "Name", "name": "rhcos-" + cluster},
		"keyPairName":       cluster + "-key", "memoryGiB": 32,
		"network":       map[string]any{"type": "RegEx", "regex": "^DHCPSERVER.*" + cluster + ".*_Private$"},
		"processorType": "Shared", "processors": "0.5",
		"serviceInstance": map[string]any{"type": "Name", "name": cluster + "-power-iaas"},
		"systemType":      systemType,
		"userDataSecret":  map[string]any{"name": "worker-user-data"},
	})
	return &runtime.RawExtension{Raw: raw}
}

// vsphereSpec is a worker providerSpec as the OpenShift installer writes it on vSphere, cloning
// template into the failure domain's workspace, with DHCP on its port group. It names no server:
// the lab's Infrastructure lists no vCenters to check one against, and both actuators then use
// the cluster's.
func vsphereSpec(_, template string) *runtime.RawExtension {
	raw, _ := json.Marshal(map[string]any{
		"apiVersion": "machine.openshift.io/v1beta1", "kind": vsphere.ProviderSpecKind,
		"credentialsSecret": map[string]any{"name": "vsphere-cloud-credentials"},
		"diskGiB":           120, "memoryMiB": 16384, "numCPUs": 4, "numCoresPerSocket": 4,
		"network":        map[string]any{"devices": []any{map[string]any{"networkName": "lab-vlan-1289"}}},
		"template":       template,
		"userDataSecret": map[string]any{"name": "worker-user-data"},
		"workspace": map[string]any{"datacenter": "labdc", "datastore": "/labdc/datastore/vsanDatastore",
			"folder": "/labdc/vm/vsphere-lab", "resourcePool": "/labdc/host/labcluster//Resources"},
	})
	return &runtime.RawExtension{Raw: raw}
}

// TestPlatformsWithoutController runs, in one lab for every platform of the table, machina's
// Machine API (MachineSet only acts on them), sync, migration and Cluster API controllers.
// The Infrastructure is cluster-wide, so each platform's subtests run in turn with the
// Infrastructure and a Cluster of their own (uncontrolledLab.use).
func TestPlatformsWithoutController(t *testing.T) {
	t.Parallel() // a lab of its own, beside the package's other labs (see TestOwnLab)
	var ps []provider.Provider
	for _, u := range uncontrolledPlatforms() {
		ps = append(ps, u.provider)
	}
	e := testenv.Start(t, testenv.Options{Groups: "machineapi,sync,migration,clusterapi", ProviderCRDs: ps})
	lab := newUncontrolledLab(t, e)
	for _, u := range uncontrolledPlatforms() {
		t.Run(u.provider.Name, func(t *testing.T) {
			pl := lab.use(t, u)
			for _, c := range []struct {
				name string
				f    func(*testing.T, *uncontrolledLab, platformLab)
			}{
				{"MachineSetMirrored_UpdatesFlow_DeletionCarried", testUncontrolledMirror},
				{"ClusterAPIAuthoritativeMachineSet_MachinesMirroredToMachineAPI", testUncontrolledFromClusterAPI},
				{"MachineHandover_ToClusterAPI_BackWaitsForProvider", testUncontrolledHandover},
				{"BornClusterAPIMachine_HandedToMachineAPI", testUncontrolledBornClusterAPI},
			} {
				t.Run(c.name, func(t *testing.T) { c.f(t, lab.forT(t), pl) })
			}
		})
	}
}

// uncontrolledLab is the lab of TestPlatformsWithoutController and an administrator client
// whose scheme has every registered platform's types (the converter's output is typed).
type uncontrolledLab struct {
	e *testenv.Env
	c client.Client
}

func newUncontrolledLab(t *testing.T, e *testenv.Env) *uncontrolledLab {
	s, err := provider.Builtin().Scheme()
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.New(e.Lab.Config, client.Options{Scheme: s})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, o := range []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: mapiNS}},
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: capiNS}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: mapiNS, Name: "worker-user-data"}, Data: map[string][]byte{"userData": []byte("{}")}},
		&configv1.Infrastructure{ObjectMeta: metav1.ObjectMeta{Name: "cluster"}},
	} {
		if err := c.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	return &uncontrolledLab{e: e, c: c}
}

func (l *uncontrolledLab) forT(t *testing.T) *uncontrolledLab {
	return &uncontrolledLab{e: l.e.For(t), c: l.c}
}

// platformLab is one platform's turn in the lab: its cluster's name and conversion context.
type platformLab struct {
	uncontrolled
	cluster string
	cc      convert.Context
}

func (p platformLab) name(n string) string { return p.provider.Name + "-" + n }

// use makes the lab a cluster on u's platform: the Infrastructure names a cluster of its own
// (<platform>-lab) with u's platform status, and that Cluster exists with u's InfraCluster.
// Nothing provisions the InfraCluster, as nothing provisions the platform's Machines.
func (l *uncontrolledLab) use(t *testing.T, u uncontrolled) platformLab {
	ctx := context.Background()
	name := u.provider.Name + "-lab"
	infra := &configv1.Infrastructure{}
	if err := l.c.Get(ctx, client.ObjectKey{Name: "cluster"}, infra); err != nil {
		t.Fatal(err)
	}
	infra.Status = configv1.InfrastructureStatus{InfrastructureName: name, PlatformStatus: u.status,
		ControlPlaneTopology: configv1.HighlyAvailableTopologyMode, InfrastructureTopology: configv1.HighlyAvailableTopologyMode}
	if err := l.c.Status().Update(ctx, infra); err != nil {
		t.Fatal(err)
	}
	ic := u.infraCluster(capiNS, name)
	gvk := u.provider.InfraCluster
	for _, o := range []client.Object{ic, &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: capiNS, Name: name},
		Spec: clusterv1.ClusterSpec{InfrastructureRef: clusterv1.ContractVersionedObjectReference{APIGroup: gvk.Group, Kind: gvk.Kind, Name: name}}}} {
		if err := l.c.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	cc, err := provider.Context(ctx, l.c, u.provider, convert.Namespaces{MachineAPI: mapiNS, ClusterAPI: capiNS})
	if err != nil {
		t.Fatal(err)
	}
	return platformLab{uncontrolled: u, cluster: name, cc: cc}
}

// machine is a Machine API Machine of the platform of size i.
func (p platformLab) machine(name string, authority machinev1beta1.MachineAuthority, size int) *machinev1beta1.Machine {
	return &machinev1beta1.Machine{ObjectMeta: metav1.ObjectMeta{Namespace: mapiNS, Name: name, Labels: map[string]string{clusterLabel: p.cluster}},
		Spec: machinev1beta1.MachineSpec{AuthoritativeAPI: authority,
			ProviderSpec: machinev1beta1.ProviderSpec{Value: p.spec(p.cluster, p.sizes[size])}}}
}

// machineSet is a Machine API MachineSet of the platform of size 0.
func (p platformLab) machineSet(name string, authority machinev1beta1.MachineAuthority, replicas int32) *machinev1beta1.MachineSet {
	sel := map[string]string{clusterLabel: p.cluster, "machine.openshift.io/cluster-api-machineset": name}
	return &machinev1beta1.MachineSet{ObjectMeta: metav1.ObjectMeta{Namespace: mapiNS, Name: name, Labels: map[string]string{clusterLabel: p.cluster}},
		Spec: machinev1beta1.MachineSetSpec{AuthoritativeAPI: authority, Replicas: ptr.To(replicas), Selector: metav1.LabelSelector{MatchLabels: sel},
			Template: machinev1beta1.MachineTemplateSpec{ObjectMeta: machinev1beta1.ObjectMeta{Labels: sel},
				Spec: machinev1beta1.MachineSpec{ProviderSpec: machinev1beta1.ProviderSpec{Value: p.spec(p.cluster, p.sizes[0])}}}}}
}

// infra reads the platform's object of kind (InfraMachine or InfraMachineTemplate) name.
func (l *uncontrolledLab) infra(ctx context.Context, p platformLab, template bool, name string) (*unstructured.Unstructured, error) {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(p.provider.InfraMachine)
	if template {
		u.SetGroupVersionKind(p.provider.InfraMachineTemplate)
	}
	return u, l.c.Get(ctx, client.ObjectKey{Namespace: capiNS, Name: name}, u)
}

// size reads the size an InfraMachine, or with template set an InfraMachineTemplate, names.
func (p platformLab) size(u *unstructured.Unstructured, template bool) string {
	path := append([]string{"spec"}, p.sizeField...)
	if template {
		path = append([]string{"spec", "template", "spec"}, p.sizeField...)
	}
	s, _, _ := unstructured.NestedString(u.Object, path...)
	return s
}

// admittedSpec is the spec the apiserver stores for obj: obj is created under another name
// in a server-side dry run, so CRD defaulting and admission apply and nothing is stored.
func (l *uncontrolledLab) admittedSpec(t *testing.T, obj client.Object) string {
	t.Helper()
	o := obj.DeepCopyObject().(client.Object)
	o.SetName("admission-check-" + o.GetName())
	if err := l.c.Create(context.Background(), o, client.DryRunAll); err != nil {
		t.Fatalf("the converter's %T is not admitted: %v", obj, err)
	}
	return specOf(t, o)
}

// specOf renders an object's spec as JSON.
func specOf(t *testing.T, o client.Object) string {
	t.Helper()
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(o)
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(u["spec"])
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// waitGone waits until none of the objects exists.
func (l *uncontrolledLab) waitGone(what string, objs ...client.Object) {
	l.e.Eventually(90*time.Second, what+" gone", func(ctx context.Context) (bool, string, error) {
		for _, o := range objs {
			err := l.c.Get(ctx, client.ObjectKeyFromObject(o), o)
			if err == nil {
				return false, fmt.Sprintf("%T %s remains (finalizers %v)", o, o.GetName(), o.GetFinalizers()), nil
			}
			if client.IgnoreNotFound(err) != nil {
				return false, err.Error(), nil
			}
		}
		return true, "", nil
	})
}
