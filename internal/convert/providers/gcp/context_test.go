package gcp

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
	capgv1 "sigs.k8s.io/cluster-api-provider-gcp/api/v1beta1"

	"github.com/machina-dev/machina/internal/convert"
	ct "github.com/machina-dev/machina/internal/convert/converttest"
)

func TestNewContext(t *testing.T) {
	infra := &configv1.Infrastructure{ObjectMeta: metav1.ObjectMeta{Name: "cluster"}}
	infra.Status.InfrastructureName = cluster
	if _, err := NewContext(infra); err == nil || !strings.Contains(err.Error(), "no GCP platform status") {
		t.Errorf("non-GCP Infrastructure: %v", err)
	}
	if _, err := NewContext(nil); err == nil {
		t.Error("nil Infrastructure accepted")
	}
	infra.Status.PlatformStatus = &configv1.PlatformStatus{Type: configv1.GCPPlatformType, GCP: &configv1.GCPPlatformStatus{ProjectID: project, Region: region}}
	c, err := NewContext(infra)
	if err != nil {
		t.Fatal(err)
	}
	p := c.Platform.(Platform)
	if c.ClusterName != cluster || p.Region != region || p.Project != project || p.Network != nil || p.credentialsSecret() != DefaultCredentialsSecret {
		t.Errorf("context %+v, platform %+v", c, p)
	}
	// The GCPCluster adds the network, in its host project when it has one.
	gc := &capgv1.GCPCluster{Spec: capgv1.GCPClusterSpec{Project: project, Region: region, Network: capgv1.NetworkSpec{Name: ptr.To("vpc"), HostProject: ptr.To("host")}}}
	if n := p.WithGCPCluster(gc).Network; n == nil || *n != (Network{Name: "vpc", Project: "host"}) {
		t.Errorf("shared VPC network %+v", n)
	}
	gc.Spec.Network = capgv1.NetworkSpec{}
	if n := p.WithGCPCluster(gc).Network; n == nil || *n != (Network{Name: "default", Project: project}) {
		t.Errorf("CAPG's default network %+v", n)
	}
	if _, err := New(""); err == nil {
		t.Error("a platform without a region")
	}
}

func TestZoneRegion(t *testing.T) {
	for zone, want := range map[string]string{"us-central1-a": "us-central1", "europe-west4-c": "europe-west4", "northamerica-northeast2-b": "northamerica-northeast2", "us-central1": "", "zone-a": "", "": ""} {
		if got := ZoneRegion(zone); got != want {
			t.Errorf("ZoneRegion(%q) = %q, want %q", zone, got, want)
		}
	}
}

// installerSpec is a worker providerSpec as the OpenShift installer writes it.
func installerSpec() *mapiv1.GCPMachineProviderSpec {
	return genProviderSpec(ct.New(7))
}

func toInfra(t *testing.T, p Platform, ps any) (*capgv1.GCPMachineSpec, convert.MachineValues, *convert.Report) {
	t.Helper()
	b, err := json.Marshal(ps)
	if err != nil {
		t.Fatal(err)
	}
	r := &convert.Report{}
	spec, mv := p.ToInfra(&runtime.RawExtension{Raw: b}, field.NewPath("v"), r)
	s, _ := spec.(*capgv1.GCPMachineSpec)
	return s, mv, r
}

// TestRefusals checks that every value CAPG cannot carry is an error naming its field, and
// that all of them are reported together.
func TestRefusals(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(*mapiv1.GCPMachineProviderSpec)
		want   []string
	}{
		{"other region and project", func(ps *mapiv1.GCPMachineProviderSpec) {
			ps.Region, ps.ProjectID, ps.Zone = "europe-west4", "other", "europe-west4-a"
		}, []string{"v.projectID", "v.region", "v.zone"}},
		{"what CAPG has no word for", func(ps *mapiv1.GCPMachineProviderSpec) {
			ps.DeletionProtection, ps.TargetPools, ps.RestartPolicy = true, []string{"api"}, mapiv1.RestartPolicyNever
		}, []string{"v.deletionProtection", "v.restartPolicy", "v.targetPools"}},
		{"network", func(ps *mapiv1.GCPMachineProviderSpec) {
			ps.NetworkInterfaces = append(ps.NetworkInterfaces, ps.NetworkInterfaces[0])
			ps.ServiceAccounts = nil
		}, []string{"v.networkInterfaces", "v.serviceAccounts"}},
		{"another network", func(ps *mapiv1.GCPMachineProviderSpec) { ps.NetworkInterfaces[0].Network = "other" }, []string{"v.networkInterfaces[0].network"}},
		{"another network project", func(ps *mapiv1.GCPMachineProviderSpec) { ps.NetworkInterfaces[0].ProjectID = "host" }, []string{"v.networkInterfaces[0].projectID"}},
		{"disks", func(ps *mapiv1.GCPMachineProviderSpec) {
			ps.Disks[0].AutoDelete, ps.Disks[0].Labels = false, map[string]string{"x": "y"}
			ps.Disks = append(ps.Disks, &mapiv1.GCPDisk{Image: "data", Type: "local-ssd", SizeGB: 0})
		}, []string{"v.disks[0].autoDelete", "v.disks[0].labels", "v.disks[1].autoDelete", "v.disks[1].image", "v.disks[1].sizeGb", "v.disks[1].type"}},
		{"no boot disk first", func(ps *mapiv1.GCPMachineProviderSpec) { ps.Disks[0].Boot = false }, []string{"v.disks[0].boot", "v.disks[0].image", "v.disks[0].sizeGb"}},
		{"metadata and labels", func(ps *mapiv1.GCPMachineProviderSpec) {
			ps.Metadata = []*mapiv1.GCPMetadata{{Key: "user-data"}, {Key: "a"}, {Key: "a"}}
			ps.Labels = map[string]string{"Team": "a"}
			ps.Disks[0].Labels = ps.Labels
		}, []string{"v.gcpMetadata[0].key", "v.gcpMetadata[2].key", "v.labels[Team]"}},
		{"scheduling", func(ps *mapiv1.GCPMachineProviderSpec) {
			ps.Preemptible, ps.ProvisioningModel, ps.RestartPolicy = true, ptr.To(mapiv1.GCPSpotInstance), mapiv1.RestartPolicyAlways
			ps.GPUs = []mapiv1.GCPGPUConfig{{Type: "a", Count: 1}, {Type: "b", Count: 1}}
		}, []string{"v.gpus", "v.provisioningModel", "v.restartPolicy"}},
		{"credentials and bootstrap data", func(ps *mapiv1.GCPMachineProviderSpec) {
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

// TestInstallerDefaults checks the representation changes that are only warnings: an image
// named without its project, a KMS key without project, no projectID, no credentials secret.
func TestInstallerDefaults(t *testing.T) {
	ps := installerSpec()
	ps.Disks[0].Image = "rhcos-9"
	ps.Disks[0].EncryptionKey = &mapiv1.GCPEncryptionKeyReference{KMSKey: &mapiv1.GCPKMSKeyReference{Name: "k", KeyRing: "r", Location: "global"}}
	ps.ProjectID, ps.CredentialsSecret, ps.APIVersion = "", nil, "gcpprovider.openshift.io/v1beta1"
	s, mv, r := toInfra(t, testPlatform, ps)
	if r.HasErrors() {
		t.Fatal(r.Errors)
	}
	if got := ptr.Deref(s.Image, ""); got != "projects/"+project+"/global/images/rhcos-9" {
		t.Errorf("image %q", got)
	}
	if got := s.RootDiskEncryptionKey.ManagedKey.KMSKeyName; got != "projects/"+project+"/locations/global/keyRings/r/cryptoKeys/k" {
		t.Errorf("key %q", got)
	}
	if mv.FailureDomain != ps.Zone || ptr.Deref(mv.DataSecretName, "") != ps.UserDataSecret.Name {
		t.Errorf("machine values %+v", mv)
	}
	var warned []string
	for _, w := range r.Warnings {
		warned = append(warned, w.Field)
	}
	want := []string{"v.apiVersion", "v.credentialsSecret", "v.disks[0].encryptionKey.kmsKey.projectID", "v.disks[0].image", "v.projectID"}
	if slices.Sort(warned); !slices.Equal(warned, want) {
		t.Errorf("warnings on %v, want %v", warned, want)
	}
}

// TestWithoutGCPCluster: offline without the GCPCluster the network is not checked (a
// warning), and nothing converts back (an error naming the spec).
func TestWithoutGCPCluster(t *testing.T) {
	p := testPlatform
	p.Network = nil
	s, mv, r := toInfra(t, p, installerSpec())
	if r.HasErrors() || len(r.Warnings) != 1 || r.Warnings[0].Field != "v.networkInterfaces[0]" {
		t.Fatalf("errors %v, warnings %v", r.Errors, r.Warnings)
	}
	back := &convert.Report{}
	p.FromInfra(s, mv, convert.InfraPaths{Infra: field.NewPath("GCPMachine", "spec"), Machine: field.NewPath("Machine", "spec")}, back)
	if got := ct.Fields(back.Errors); !slices.Equal(got, []string{"GCPMachine.spec"}) || !strings.Contains(back.Errors[0].Detail, "--infrastructure") {
		t.Errorf("converting back: %v", back.Errors)
	}
}

// TestClusterAPIRefusals checks the GCPMachine values the Machine API cannot carry.
func TestClusterAPIRefusals(t *testing.T) {
	s := genSpec(ct.New(3))
	s.AliasIPRanges = []capgv1.AliasIPRange{{IPCidrRange: "/24"}}
	s.Image = ptr.To("bare")
	s.RootDiskEncryptionKey = &capgv1.CustomerEncryptionKey{KeyType: capgv1.CustomerSuppliedKey, SuppliedKey: &capgv1.SuppliedKey{RawKey: []byte("k")}}
	s.AdditionalDisks = []capgv1.AttachedDiskSpec{{DeviceType: ptr.To(capgv1.LocalSsdDiskType), Size: ptr.To[int64](375)}}
	s.GuestAccelerators = []capgv1.Accelerator{{Type: "nvidia-tesla-t4", Count: 1}}
	s.AdditionalMetadata = []capgv1.MetadataItem{{Key: "user-data"}}
	r := &convert.Report{}
	paths := convert.InfraPaths{Infra: field.NewPath("s"), Machine: field.NewPath("m")}
	testPlatform.FromInfra(s, convert.MachineValues{}, paths, r)
	want := []string{"m.failureDomain", "s.additionalDisks[0].deviceType", "s.additionalMetadata[0].key", "s.aliasIPRanges", "s.guestAccelerators[0].type", "s.image", "s.rootDiskEncryptionKey.keyType"}
	if got := ct.Fields(r.Errors); !slices.Equal(got, want) {
		t.Errorf("errors on %v, want %v:\n%v", got, want, r.Errors)
	}
}
