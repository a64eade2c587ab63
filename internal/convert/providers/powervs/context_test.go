package powervs

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	configv1 "github.com/openshift/api/config/v1"
	mapiv1 "github.com/openshift/api/machine/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
	capibmv1 "sigs.k8s.io/cluster-api-provider-ibmcloud/api/powervs/v1beta3"

	"github.com/machina-dev/machina/internal/convert"
	ct "github.com/machina-dev/machina/internal/convert/converttest"
)

func TestNewContext(t *testing.T) {
	infra := &configv1.Infrastructure{ObjectMeta: metav1.ObjectMeta{Name: "cluster"}}
	if _, err := NewContext(infra, nil); err == nil {
		t.Error("an Infrastructure without infrastructureName accepted")
	}
	infra.Status.InfrastructureName = cluster
	infra.Status.PlatformStatus = &configv1.PlatformStatus{Type: configv1.PowerVSPlatformType, PowerVS: &configv1.PowerVSPlatformStatus{Region: "dal", Zone: "dal10"}}
	c, err := NewContext(infra, nil)
	if err != nil {
		t.Fatal(err)
	}
	p := c.Platform.(Platform)
	if c.ClusterName != cluster || p.ServiceInstanceName != "" || p.credentialsSecret() != DefaultCredentialsSecret {
		t.Errorf("without the IBMPowerVSCluster: context %+v, platform %+v", c, p)
	}
	// The IBMPowerVSCluster names the workspace, or CAPIBM derives it from its name.
	pc := &capibmv1.IBMPowerVSCluster{ObjectMeta: metav1.ObjectMeta{Name: cluster}, Spec: capibmv1.IBMPowerVSClusterSpec{
		ServiceInstance: &capibmv1.IBMPowerVSResourceReference{Name: ptr.To(workspace)}}}
	if c, err = NewContext(infra, pc); err != nil || c.Platform.(Platform).ServiceInstanceName != workspace {
		t.Errorf("with the IBMPowerVSCluster: %+v, %v", c.Platform, err)
	}
	pc.Spec.ServiceInstance = &capibmv1.IBMPowerVSResourceReference{ID: ptr.To(workspaceID)}
	if got := ServiceInstanceNameOf(pc); got != cluster+"-serviceInstance" {
		t.Errorf("a workspace given by ID: machines without one go to %q", got)
	}
	if _, err := FromIBMPowerVSCluster(nil); err == nil {
		t.Error("a platform from no IBMPowerVSCluster")
	}
}

// installerSpec is a worker providerSpec as the OpenShift installer writes it.
func installerSpec() *mapiv1.PowerVSMachineProviderConfig {
	ps := genProviderSpec(ct.New(7))
	ps.ServiceInstance = mapiv1.PowerVSResource{Type: mapiv1.PowerVSResourceTypeName, Name: ptr.To(workspace)}
	ps.Image = mapiv1.PowerVSResource{Type: mapiv1.PowerVSResourceTypeName, Name: ptr.To("rhcos-" + cluster)}
	ps.Network = mapiv1.PowerVSResource{Type: mapiv1.PowerVSResourceTypeRegEx, RegEx: ptr.To("^DHCPSERVER.*" + cluster + ".*_Private$")}
	ps.SystemType, ps.ProcessorType, ps.Processors, ps.MemoryGiB = "s922", mapiv1.PowerVSProcessorTypeShared, intstr.FromString("0.5"), 32
	return ps
}

func toInfra(t *testing.T, p Platform, ps any) (*capibmv1.IBMPowerVSMachineSpec, convert.MachineValues, *convert.Report) {
	t.Helper()
	b, err := json.Marshal(ps)
	if err != nil {
		t.Fatal(err)
	}
	r := &convert.Report{}
	spec, mv := p.ToInfra(&runtime.RawExtension{Raw: b}, field.NewPath("v"), r)
	s, _ := spec.(*capibmv1.IBMPowerVSMachineSpec)
	return s, mv, r
}

// TestRefusals checks that every value CAPIBM cannot carry is an error naming its field, and
// that all of them are reported together.
func TestRefusals(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(*mapiv1.PowerVSMachineProviderConfig)
		want   []string
	}{
		{"another workspace by name", func(ps *mapiv1.PowerVSMachineProviderConfig) { ps.ServiceInstance.Name = ptr.To("other-power-iaas") },
			[]string{"v.serviceInstance.name"}},
		{"workspace and image by regular expression", func(ps *mapiv1.PowerVSMachineProviderConfig) {
			ps.ServiceInstance = mapiv1.PowerVSResource{Type: mapiv1.PowerVSResourceTypeRegEx, RegEx: ptr.To(".*")}
			ps.Image = mapiv1.PowerVSResource{Type: mapiv1.PowerVSResourceTypeRegEx, RegEx: ptr.To("rhcos-.*")}
		}, []string{"v.image.type", "v.serviceInstance.type"}},
		{"references without their identifier", func(ps *mapiv1.PowerVSMachineProviderConfig) {
			ps.Image = mapiv1.PowerVSResource{Type: mapiv1.PowerVSResourceTypeID, Name: ptr.To("rhcos")}
			ps.Network = mapiv1.PowerVSResource{Name: ptr.To("net")}
			ps.ServiceInstance = mapiv1.PowerVSResource{Type: "Tag"}
		}, []string{"v.image.id", "v.network.type", "v.serviceInstance.type"}},
		{"load balancers", func(ps *mapiv1.PowerVSMachineProviderConfig) {
			ps.LoadBalancers = []mapiv1.LoadBalancerReference{{Name: cluster + "-loadbalancer-int", Type: mapiv1.ApplicationLoadBalancerType}}
		}, []string{"v.loadBalancers"}},
		{"sizes CAPIBM refuses", func(ps *mapiv1.PowerVSMachineProviderConfig) {
			ps.SystemType, ps.ProcessorType, ps.Processors, ps.MemoryGiB = "e880", "Burst", intstr.FromString("0.1"), 1
		}, []string{"v.memoryGiB", "v.processorType", "v.processors", "v.systemType"}},
		{"processors not a number", func(ps *mapiv1.PowerVSMachineProviderConfig) { ps.Processors = intstr.FromString("half") }, []string{"v.processors"}},
		{"no key pair", func(ps *mapiv1.PowerVSMachineProviderConfig) { ps.KeyPairName = "" }, []string{"v.keyPairName"}},
		{"credentials and bootstrap data", func(ps *mapiv1.PowerVSMachineProviderConfig) {
			ps.CredentialsSecret.Name, ps.UserDataSecret = "mine", nil
		}, []string{"v.credentialsSecret.name", "v.userDataSecret.name"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ps := installerSpec()
			tc.change(ps)
			_, _, r := toInfra(t, testPlatform, ps)
			if got := ct.Fields(r.Errors); !slices.Equal(got, tc.want) {
				t.Errorf("errors on %v, want %v:\n%v", got, tc.want, r.Errors)
			}
		})
	}
}

// TestMachineAPIDefaults checks that what the Machine API's webhook would default is written
// explicitly (warnings), that spellings the Machine API reads case-insensitively are
// normalised, and that identifiers the type does not name are dropped.
func TestMachineAPIDefaults(t *testing.T) {
	ps := installerSpec()
	ps.SystemType, ps.ProcessorType, ps.Processors, ps.MemoryGiB = "", "", intstr.IntOrString{}, 0
	ps.CredentialsSecret, ps.APIVersion = nil, ""
	ps.Image.ID = ptr.To("ignored")
	s, mv, r := toInfra(t, testPlatform, ps)
	if r.HasErrors() {
		t.Fatal(r.Errors)
	}
	if s.SystemType != "s922" || s.ProcessorType != capibmv1.PowerVSProcessorTypeShared || s.Processors != intstr.FromString("0.5") || s.MemoryGiB != 32 ||
		s.Image.ID != nil || ptr.Deref(s.Image.Name, "") != "rhcos-"+cluster || ptr.Deref(mv.DataSecretName, "") != "worker-user-data" {
		t.Errorf("spec %+v, machine values %+v", s, mv)
	}
	want := []string{"v.apiVersion", "v.credentialsSecret", "v.image.id", "v.memoryGiB", "v.processorType", "v.processors", "v.systemType"}
	if got := ct.Fields(r.Warnings); !slices.Equal(got, want) {
		t.Errorf("warnings on %v, want %v", got, want)
	}

	ps = installerSpec()
	ps.SystemType, ps.ProcessorType, ps.Processors = "E980", "dedicated", intstr.IntOrString{}
	s, _, r = toInfra(t, testPlatform, ps)
	if r.HasErrors() || s.SystemType != "e980" || s.ProcessorType != capibmv1.PowerVSProcessorTypeDedicated || s.Processors != intstr.FromInt32(1) {
		t.Errorf("errors %v, spec %+v", r.Errors, s)
	}
}

// TestWithoutCluster: offline without the IBMPowerVSCluster a workspace given by name is not
// checked (a warning), and a Cluster API Machine without a workspace cannot convert back.
func TestWithoutCluster(t *testing.T) {
	p := testPlatform
	p.ServiceInstanceName = ""
	s, mv, r := toInfra(t, p, installerSpec())
	if got := ct.Fields(r.Warnings); r.HasErrors() || !slices.Equal(got, []string{"v.serviceInstance.name"}) {
		t.Fatalf("errors %v, warnings %v", r.Errors, r.Warnings)
	}
	s.ServiceInstance = nil
	paths := convert.InfraPaths{Infra: field.NewPath("IBMPowerVSMachine", "spec"), Machine: field.NewPath("Machine", "spec")}
	back := &convert.Report{}
	p.FromInfra(s, mv, paths, back)
	if got := ct.Fields(back.Errors); !slices.Equal(got, []string{"IBMPowerVSMachine.spec.serviceInstance"}) || !strings.Contains(back.Errors[0].Detail, "--infrastructure") {
		t.Errorf("converting back: %v", back.Errors)
	}
	// With the cluster known, the IBMPowerVSCluster's workspace is written by name.
	back = &convert.Report{}
	raw := testPlatform.FromInfra(s, mv, paths, back)
	var out mapiv1.PowerVSMachineProviderConfig
	if err := json.Unmarshal(raw.Raw, &out); err != nil || back.HasErrors() || ptr.Deref(out.ServiceInstance.Name, "") != workspace {
		t.Errorf("converting back with the cluster: %v, %v, %+v", err, back.Errors, out.ServiceInstance)
	}
}

// TestClusterAPIRefusals checks the IBMPowerVSMachine values the Machine API cannot carry.
func TestClusterAPIRefusals(t *testing.T) {
	s := genSpec(ct.New(3))
	s.ServiceInstance = &capibmv1.IBMPowerVSResourceReference{Name: ptr.To("elsewhere")}
	s.ImageRef = capibmv1.ImageReference{Name: "rhcos-import"}
	s.Network = capibmv1.IBMPowerVSResourceReference{ID: ptr.To("n"), Name: ptr.To("n")}
	s.SSHKey, s.SystemType, s.ProcessorType, s.Processors, s.MemoryGiB = "", "e880", "burst", intstr.FromString("0"), 1
	r := &convert.Report{}
	paths := convert.InfraPaths{Infra: field.NewPath("s"), Machine: field.NewPath("m")}
	testPlatform.FromInfra(s, convert.MachineValues{FailureDomain: "dal10"}, paths, r)
	want := []string{"m.failureDomain", "s.imageRef.name", "s.memoryGiB", "s.network", "s.processorType", "s.processors", "s.serviceInstance.name", "s.sshKey", "s.systemType"}
	if got := ct.Fields(r.Errors); !slices.Equal(got, want) {
		t.Errorf("errors on %v, want %v:\n%v", got, want, r.Errors)
	}

	// An image by regular expression, which CAPIBM cannot boot, and no network.
	s = genSpec(ct.New(4))
	s.Image = &capibmv1.IBMPowerVSResourceReference{RegEx: ptr.To("rhcos-.*")}
	s.Network = capibmv1.IBMPowerVSResourceReference{}
	r = &convert.Report{}
	testPlatform.FromInfra(s, convert.MachineValues{}, paths, r)
	if got := ct.Fields(r.Errors); !slices.Equal(got, []string{"s.image.regex", "s.network"}) {
		t.Errorf("errors on %v:\n%v", got, r.Errors)
	}
}

// TestClusterAPIDefaults: CAPIBM's defaults are written explicitly going back (warnings).
func TestClusterAPIDefaults(t *testing.T) {
	s := genSpec(ct.New(5))
	s.SystemType, s.ProcessorType, s.Processors, s.MemoryGiB = "", "", intstr.IntOrString{}, 0
	r := &convert.Report{}
	raw := testPlatform.FromInfra(s, convert.MachineValues{DataSecretName: ptr.To("worker-user-data")}, convert.InfraPaths{Infra: field.NewPath("s"), Machine: field.NewPath("m")}, r)
	var ps mapiv1.PowerVSMachineProviderConfig
	if err := json.Unmarshal(raw.Raw, &ps); err != nil || r.HasErrors() {
		t.Fatal(err, r.Errors)
	}
	if ps.SystemType != "s922" || ps.ProcessorType != mapiv1.PowerVSProcessorTypeShared || ps.Processors != intstr.FromString("0.25") || ps.MemoryGiB != 2 ||
		ps.CredentialsSecret.Name != DefaultCredentialsSecret || ps.UserDataSecret.Name != "worker-user-data" {
		t.Errorf("providerSpec %+v", ps)
	}
	if got, want := ct.Fields(r.Warnings), []string{"s.memoryGiB", "s.processorType", "s.processors", "s.systemType"}; !slices.Equal(got, want) {
		t.Errorf("warnings on %v, want %v", got, want)
	}
}
