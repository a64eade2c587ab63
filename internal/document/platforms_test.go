package document_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	configv1 "github.com/openshift/api/config/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"

	simv1 "github.com/machina-dev/machina/api/infrastructure/v1alpha1"
	"github.com/machina-dev/machina/internal/convert"
	"github.com/machina-dev/machina/internal/convert/providers/sim"
	"github.com/machina-dev/machina/internal/document"
	"github.com/machina-dev/machina/internal/provider"
)

// The "lab" platform exists only in this test: the simulated cloud under other names (its
// own group, kinds and providerSpec kind). Registering it is all it takes for document to
// decode and convert its manifests.
var labGV = schema.GroupVersion{Group: "infrastructure.lab.example", Version: "v1"}

const labSpecKind = "LabMachineProviderSpec"

// toLab renames the simulated cloud's API in a manifest to the lab platform's.
var toLab = strings.NewReplacer(
	simv1.GroupVersion.String(), labGV.String(),
	simv1.GroupVersion.Group, labGV.Group,
	sim.ProviderSpecKind, labSpecKind,
	"SimMachineTemplate", "LabMachineTemplate",
	"SimMachine", "LabMachine",
	"SimCluster", "LabCluster",
)

func labProvider() provider.Provider {
	p := provider.Sim()
	p.Name = "lab"
	p.ProviderSpecKinds = []string{labSpecKind}
	p.InfraMachine = labGV.WithKind("LabMachine")
	p.InfraMachineTemplate = labGV.WithKind("LabMachineTemplate")
	p.InfraCluster = labGV.WithKind("LabCluster")
	p.PlatformTypes = []configv1.PlatformType{"Lab"}
	p.AddToScheme = func(s *runtime.Scheme) error {
		s.AddKnownTypeWithName(p.InfraMachine, &simv1.SimMachine{})
		s.AddKnownTypeWithName(p.InfraMachineTemplate, &simv1.SimMachineTemplate{})
		s.AddKnownTypeWithName(p.InfraCluster, &simv1.SimCluster{})
		return nil
	}
	p.NewPlatform = func(region string) (convert.Platform, error) {
		sp, err := sim.New(region)
		if err != nil {
			return nil, err
		}
		return labPlatform{sp}, nil
	}
	return p
}

// labPlatform is the simulated cloud's conversion under the lab platform's names.
type labPlatform struct{ sim.Platform }

func (labPlatform) Name() string                             { return "lab" }
func (labPlatform) InfraMachineGVK() schema.GroupVersionKind { return labGV.WithKind("LabMachine") }
func (labPlatform) InfraMachineTemplateGVK() schema.GroupVersionKind {
	return labGV.WithKind("LabMachineTemplate")
}

func (p labPlatform) ToInfra(value *runtime.RawExtension, path *field.Path, r *convert.Report) (convert.InfraSpec, convert.MachineValues) {
	if value != nil && value.Raw != nil {
		value = &runtime.RawExtension{Raw: renameSpec(value.Raw, labGV.String(), labSpecKind, simv1.GroupVersion.String(), sim.ProviderSpecKind)}
	}
	return p.Platform.ToInfra(value, path, r)
}

func (p labPlatform) FromInfra(spec convert.InfraSpec, mv convert.MachineValues, paths convert.InfraPaths, r *convert.Report) *runtime.RawExtension {
	v := p.Platform.FromInfra(spec, mv, paths, r)
	if v != nil && v.Raw != nil {
		v.Raw = renameSpec(v.Raw, simv1.GroupVersion.String(), sim.ProviderSpecKind, labGV.String(), labSpecKind)
	}
	return v
}

// renameSpec rewrites a providerSpec value of apiVersion/kind from into one of to.
func renameSpec(raw []byte, fromAPIVersion, fromKind, toAPIVersion, toKind string) []byte {
	var m map[string]any
	if json.Unmarshal(raw, &m) != nil || m["apiVersion"] != fromAPIVersion || m["kind"] != fromKind {
		return raw
	}
	m["apiVersion"], m["kind"] = toAPIVersion, toKind
	b, err := json.Marshal(m)
	if err != nil {
		return raw
	}
	return b
}

func (p labPlatform) NewInfraMachine(spec convert.InfraSpec, providerID string) client.Object {
	o := p.Platform.NewInfraMachine(spec, providerID)
	o.GetObjectKind().SetGroupVersionKind(p.InfraMachineGVK())
	return o
}

func (p labPlatform) NewInfraMachineTemplate(spec convert.InfraSpec) client.Object {
	o := p.Platform.NewInfraMachineTemplate(spec)
	o.GetObjectKind().SetGroupVersionKind(p.InfraMachineTemplateGVK())
	return o
}

func (p labPlatform) SplitInfraMachine(obj client.Object, path *field.Path, r *convert.Report) (convert.InfraSpec, string, bool) {
	if obj.GetObjectKind().GroupVersionKind() != p.InfraMachineGVK() {
		return nil, "", false
	}
	return p.Platform.SplitInfraMachine(obj, path, r)
}

func (p labPlatform) SplitInfraMachineTemplate(obj client.Object, path *field.Path, r *convert.Report) (convert.InfraSpec, bool) {
	if obj.GetObjectKind().GroupVersionKind() != p.InfraMachineTemplateGVK() {
		return nil, false
	}
	return p.Platform.SplitInfraMachineTemplate(obj, path, r)
}

func labRegistry(t *testing.T) *provider.Registry {
	t.Helper()
	reg, err := provider.NewRegistry(provider.Sim(), provider.AWS(), labProvider())
	if err != nil {
		t.Fatal(err)
	}
	return reg
}

func decodeLab(t *testing.T, reg *provider.Registry, path string) []document.Document {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	docs, err := document.DecodeWith(strings.NewReader(toLab.Replace(string(b))), reg)
	if err != nil {
		t.Fatalf("%s renamed to the lab platform: %v", path, err)
	}
	return docs
}

// TestThirdPlatform converts the simulated cloud's fixtures renamed to a platform registered
// only here, both ways, and expects exactly the simulated cloud's golden output under the
// new names: document has no code of its own for any platform.
func TestThirdPlatform(t *testing.T) {
	reg := labRegistry(t)
	ctxDocs := decodeLab(t, reg, "testdata/sim/context.yaml")
	for _, fixture := range []string{"workers", "capi"} {
		t.Run(fixture, func(t *testing.T) {
			opts := document.Options{Namespaces: convert.OpenShiftNamespaces, Context: ctxDocs, Providers: reg}
			var out bytes.Buffer
			write := func(title string, res *document.Result) {
				out.WriteString("### " + title + ": report\n" + document.WriteReport(res) + "### " + title + ": objects\n")
				b, err := document.Marshal(res.Objects, "yaml")
				if err != nil {
					t.Fatal(err)
				}
				out.Write(b)
			}
			res, err := document.Convert(decodeLab(t, reg, filepath.Join("testdata", "sim", fixture+".yaml")), opts)
			if err != nil {
				t.Fatal(err)
			}
			write("converted", res)
			b, err := document.Marshal(res.Objects, "yaml")
			if err != nil {
				t.Fatal(err)
			}
			docs, err := document.DecodeWith(bytes.NewReader(b), reg)
			if err != nil {
				t.Fatalf("output does not decode: %v", err)
			}
			back, err := document.Convert(docs, opts)
			if err != nil {
				t.Fatal(err)
			}
			write("converted back", back)

			golden, err := os.ReadFile(filepath.Join("testdata", "sim", fixture+".golden"))
			if err != nil {
				t.Fatal(err)
			}
			if want := toLab.Replace(string(golden)); want != out.String() {
				t.Errorf("the lab platform's conversion differs from the simulated cloud's under its names:\n%s", out.String())
			}
			if !strings.Contains(out.String(), "kind: LabMachine") {
				t.Errorf("no LabMachine or LabMachineTemplate in the output:\n%s", out.String())
			}
		})
	}
}

func TestKnownKindsFollowTheRegistry(t *testing.T) {
	lab := strings.Join(document.KnownKinds(labRegistry(t)), "; ")
	if !strings.Contains(lab, "infrastructure.lab.example/v1 LabMachine, LabMachineTemplate, LabCluster") {
		t.Errorf("KnownKinds with the lab platform: %s", lab)
	}
	onlyLab, err := provider.NewRegistry(labProvider())
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Join(document.KnownKinds(onlyLab), "; ")
	if strings.Contains(got, "SimMachine") || strings.Contains(got, "AWSMachine") {
		t.Errorf("KnownKinds names unregistered platforms: %s", got)
	}
	// The built-in registry does not read the lab platform's kinds, and says what it reads.
	_, err = document.Decode(strings.NewReader("apiVersion: infrastructure.lab.example/v1\nkind: LabMachine\nmetadata: {name: a}\n"))
	var ie *document.InputError
	if !errors.As(err, &ie) || !strings.Contains(err.Error(), "unknown kind infrastructure.lab.example/v1 LabMachine") || !strings.Contains(err.Error(), "SimMachineTemplate") {
		t.Errorf("decoding a LabMachine with the built-in platforms: %v", err)
	}
}

const machineSet = `apiVersion: machine.openshift.io/v1beta1
kind: MachineSet
metadata:
  name: w
  namespace: openshift-machine-api
  labels: {machine.openshift.io/cluster-api-cluster: c1}
spec:
  template:
    spec:
      providerSpec:
        value: VALUE
`

const openStackInfrastructure = `apiVersion: config.openshift.io/v1
kind: Infrastructure
metadata: {name: cluster}
status: {infrastructureName: c1, platformStatus: {type: OpenStack}}
`

func convertString(t *testing.T, reg *provider.Registry, in string, opts document.Options) (*document.Result, error) {
	t.Helper()
	docs, err := document.DecodeWith(strings.NewReader(in), reg)
	if err != nil {
		t.Fatal(err)
	}
	opts.Providers = reg
	opts.Namespaces = convert.OpenShiftNamespaces
	return document.Convert(docs, opts)
}

// TestPlatformDetection covers how Convert picks the platform from the registry: by
// providerSpec kind, by the Infrastructure or the fields of a providerSpec without kind, by
// infrastructureRef; and that the input and the Infrastructure must agree.
func TestPlatformDetection(t *testing.T) {
	reg := labRegistry(t)
	builtin := provider.Builtin()
	for _, tc := range []struct {
		name    string
		reg     *provider.Registry
		in      string
		opts    document.Options
		wantErr string // "" for success
		want    string // in the output or the report when it succeeds
	}{{
		name: "lab providerSpec kind",
		reg:  reg,
		in:   strings.Replace(machineSet, "VALUE", `{apiVersion: infrastructure.lab.example/v1, kind: LabMachineProviderSpec, region: r1, instanceType: s1, image: i, userDataSecret: {name: u}}`, 1),
		want: "kind: LabMachineTemplate",
	}, {
		name:    "unknown providerSpec kind names the registered ones",
		reg:     reg,
		in:      strings.Replace(machineSet, "VALUE", `{kind: GCPMachineProviderSpec}`, 1),
		wantErr: `MachineSet openshift-machine-api/w: unknown providerSpec kind "GCPMachineProviderSpec"; machina converts AWSMachineProviderConfig, LabMachineProviderSpec and SimMachineProviderSpec`,
	}, {
		name: "kindless providerSpec with placement is AWS",
		reg:  builtin,
		in:   strings.Replace(machineSet, "VALUE", `{placement: {region: us-east-2}}`, 1),
		want: "kind: unset; read as AWSMachineProviderConfig",
	}, {
		name: "kindless providerSpec with a region is sim",
		reg:  builtin,
		in:   strings.Replace(machineSet, "VALUE", `{region: sim-east-3, instanceType: s1, image: i, userDataSecret: {name: u}}`, 1),
		want: "kind: SimMachineTemplate",
	}, {
		name: "kindless providerSpec with a flavor is OpenStack, which needs no region",
		reg:  builtin,
		in:   strings.Replace(machineSet, "VALUE", `{flavor: m1.large, image: rhcos, userDataSecret: {name: u}}`, 1),
		want: "kind: OpenStackMachineTemplate",
	}, {
		name: "GCP providerSpec kind, region from the providerSpec",
		reg:  builtin,
		in:   strings.Replace(machineSet, "VALUE", `{kind: GCPMachineProviderSpec, region: us-central1, zone: us-central1-a, machineType: n2-standard-4}`, 1),
		want: "spec.template.spec.providerSpec.value.serviceAccounts: Required value",
	}, {
		name: "kindless providerSpec with a machineType is GCP",
		reg:  builtin,
		in:   strings.Replace(machineSet, "VALUE", `{machineType: n2-standard-4, zone: us-central1-a}`, 1),
		opts: document.Options{Region: "us-central1"},
		want: "kind: unset; read as GCPMachineProviderSpec",
	}, {
		name:    "GCP input on a cluster the Infrastructure says is on OpenStack",
		reg:     builtin,
		in:      strings.Replace(machineSet, "VALUE", `{kind: GCPMachineProviderSpec, region: us-central1}`, 1) + "---\n" + openStackInfrastructure,
		wantErr: "the input is on gcp, but the Infrastructure object says the cluster runs on openstack",
	}, {
		name: "Azure providerSpec kind, location from the providerSpec",
		reg:  builtin,
		in: strings.Replace(machineSet, "VALUE", `{kind: AzureMachineProviderSpec, location: centralus, vmSize: Standard_D4s_v3, subnet: s, vnet: v, userDataSecret: {name: u},
          image: {publisher: redhat, offer: rh-ocp-worker, sku: rh-ocp-worker, version: "4.15", type: MarketplaceNoPlan},
          osDisk: {osType: Linux, diskSizeGB: 128, cachingType: ReadWrite}}`, 1),
		want: "kind: AzureMachineTemplate",
	}, {
		name: "kindless providerSpec with a vmSize is Azure",
		reg:  builtin,
		in:   strings.Replace(machineSet, "VALUE", `{vmSize: Standard_D4s_v3, location: eastus2}`, 1),
		want: "kind: unset; read as AzureMachineProviderSpec",
	}, {
		name:    "Azure input on a cluster the Infrastructure says is on OpenStack",
		reg:     builtin,
		in:      strings.Replace(machineSet, "VALUE", `{kind: AzureMachineProviderSpec, location: eastus}`, 1) + "---\n" + openStackInfrastructure,
		wantErr: "the input is on azure, but the Infrastructure object says the cluster runs on openstack",
	}, {
		name:    "an Azure Infrastructure names no region",
		reg:     builtin,
		in:      strings.Replace(machineSet, "VALUE", `{kind: AzureMachineProviderSpec}`, 1) + "---\n" + strings.Replace(openStackInfrastructure, "OpenStack", "Azure", 1),
		wantErr: "cannot tell the cluster's azure region: the cluster-wide objects given name no azure region; give --region to set it",
	}, {
		name: "PowerVS providerSpec kind, which needs no region",
		reg:  builtin,
		in:   strings.Replace(machineSet, "VALUE", `{kind: PowerVSMachineProviderConfig, serviceInstance: {type: ID, id: w}, image: {type: Name, name: rhcos}}`, 1),
		want: "spec.template.spec.providerSpec.value.network.type: Required value",
	}, {
		name: "kindless providerSpec with a keyPairName is PowerVS",
		reg:  builtin,
		in:   strings.Replace(machineSet, "VALUE", `{keyPairName: k}`, 1),
		want: "kind: unset; read as PowerVSMachineProviderConfig",
	}, {
		name: "vSphere providerSpec kind, which needs no region",
		reg:  builtin,
		in: strings.Replace(machineSet, "VALUE", `{kind: VSphereMachineProviderSpec, template: rhcos, numCPUs: 4, memoryMiB: 16384, diskGiB: 120, userDataSecret: {name: u},
          network: {devices: [{networkName: ci-vlan-1289}]}, workspace: {server: vcenter.ci.example.com, datacenter: dc}}`, 1),
		want: "kind: VSphereMachineTemplate",
	}, {
		name: "kindless providerSpec with a workspace is vSphere",
		reg:  builtin,
		in:   strings.Replace(machineSet, "VALUE", `{workspace: {server: vcenter.ci.example.com}}`, 1),
		want: "kind: unset; read as VSphereMachineProviderSpec",
	}, {
		name: "a vSphere Infrastructure reads a kindless providerSpec",
		reg:  builtin,
		in:   strings.Replace(machineSet, "VALUE", `{userDataSecret: {name: u}}`, 1) + "---\n" + strings.Replace(openStackInfrastructure, "OpenStack", "VSphere", 1),
		want: "spec.template.spec.providerSpec.value.template: Required value: the VM template to clone",
	}, {
		name:    "vSphere input on a cluster the Infrastructure says is on OpenStack",
		reg:     builtin,
		in:      strings.Replace(machineSet, "VALUE", `{kind: VSphereMachineProviderSpec, template: t}`, 1) + "---\n" + openStackInfrastructure,
		wantErr: "the input is on vsphere, but the Infrastructure object says the cluster runs on openstack",
	}, {
		name: "the Infrastructure's platform reads a kindless providerSpec",
		reg:  builtin,
		in:   strings.Replace(machineSet, "VALUE", `{image: rhcos, userDataSecret: {name: u}}`, 1) + "---\n" + openStackInfrastructure,
		want: "spec.template.spec.providerSpec.value.flavor: Required value: CAPO needs a flavor",
	}, {
		name:    "input on another platform than the Infrastructure",
		reg:     builtin,
		in:      strings.Replace(machineSet, "VALUE", `{kind: OpenstackProviderSpec, flavor: m1.large}`, 1) + "---\n" + strings.Replace(openStackInfrastructure, "OpenStack", "AWS", 1),
		wantErr: "the input is on openstack, but the Infrastructure object says the cluster runs on aws",
	}, {
		name:    "kindless providerSpec two platforms could read",
		reg:     reg,
		in:      strings.Replace(machineSet, "VALUE", `{region: r1}`, 1),
		wantErr: "the providerSpec value has no kind and could be on lab or sim; set its kind",
	}, {
		name:    "kindless providerSpec no platform reads",
		reg:     builtin,
		in:      strings.Replace(machineSet, "VALUE", `{instanceType: s1}`, 1),
		wantErr: `unknown providerSpec kind ""`,
	}, {
		name:    "infrastructureRef of a kind no platform provides",
		reg:     builtin,
		in:      "apiVersion: cluster.x-k8s.io/v1beta2\nkind: Machine\nmetadata: {name: m, namespace: openshift-cluster-api}\nspec:\n  clusterName: c1\n  infrastructureRef: {apiGroup: infrastructure.cluster.x-k8s.io, kind: DockerMachine, name: m}\n",
		opts:    document.Options{Region: "r1"},
		wantErr: "document 1: Machine openshift-cluster-api/m: spec.infrastructureRef: no platform provides infrastructure kind DockerMachine.infrastructure.cluster.x-k8s.io; machina converts AWSMachine, AWSMachineTemplate, AzureMachine, AzureMachineTemplate, GCPMachine, GCPMachineTemplate, OpenStackMachine, OpenStackMachineTemplate, IBMPowerVSMachine, IBMPowerVSMachineTemplate, SimMachine, SimMachineTemplate, VSphereMachine and VSphereMachineTemplate",
	}, {
		name:    "two platforms in one input",
		reg:     reg,
		in:      strings.Replace(machineSet, "VALUE", `{kind: LabMachineProviderSpec}`, 1) + "---\n" + strings.Replace(machineSet, "VALUE", `{kind: SimMachineProviderSpec}`, 1),
		wantErr: "document 2: mixes platforms (lab in document 1, sim here)",
	}, {
		name:    "no region: the message names every context kind",
		reg:     reg,
		in:      strings.Replace(machineSet, "VALUE", `{kind: LabMachineProviderSpec}`, 1),
		wantErr: "cannot tell the cluster's lab region: give --region, or --infrastructure with an Infrastructure, AWSCluster, LabCluster or SimCluster",
	}} {
		t.Run(tc.name, func(t *testing.T) {
			res, err := convertString(t, tc.reg, tc.in, tc.opts)
			if tc.wantErr != "" {
				var ie *document.InputError
				if !errors.As(err, &ie) || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("got %v, want an InputError containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			b, err := document.Marshal(res.Objects, "yaml")
			if err != nil {
				t.Fatal(err)
			}
			if out := string(b) + document.WriteReport(res); !strings.Contains(out, tc.want) {
				t.Errorf("output and report lack %q:\n%s", tc.want, out)
			}
		})
	}
}

// TestRegionSources checks the order of the region's sources and that an InfraCluster
// naming another region than the one chosen is refused, for the lab platform as for any.
func TestRegionSources(t *testing.T) {
	reg := labRegistry(t)
	in := strings.Replace(machineSet, "VALUE", `{apiVersion: infrastructure.lab.example/v1, kind: LabMachineProviderSpec, region: from-spec, instanceType: s1, image: i, userDataSecret: {name: u}}`, 1)
	labCluster := func(region string) []document.Document {
		docs, err := document.DecodeWith(strings.NewReader("apiVersion: infrastructure.lab.example/v1\nkind: LabCluster\nmetadata: {name: c1, namespace: openshift-cluster-api}\nspec: {region: "+region+"}\n"), reg)
		if err != nil {
			t.Fatal(err)
		}
		return docs
	}
	for _, tc := range []struct {
		name       string
		opts       document.Options
		wantRegion string
		wantErr    string
	}{
		{name: "from the providerSpec, noted", wantRegion: "from-spec"},
		{name: "from the InfraCluster", opts: document.Options{Context: labCluster("from-spec")}, wantRegion: "from-spec"},
		{name: "InfraCluster and --region disagree", opts: document.Options{Region: "from-flag", Context: labCluster("from-spec")}, wantErr: "context: the LabCluster's region from-spec differs from the region from-flag from --region"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, err := convertString(t, reg, in, tc.opts)
			if tc.wantErr != "" {
				if err == nil || err.Error() != tc.wantErr {
					t.Fatalf("got %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if res.Failed() {
				t.Fatalf("not converted:\n%s", document.WriteReport(res))
			}
			noted := strings.Contains(document.WriteReport(res), `note: cluster region "`+tc.wantRegion+`" taken from MachineSet`)
			if noted != (tc.opts.Context == nil) {
				t.Errorf("region note present: %v, want %v:\n%s", noted, tc.opts.Context == nil, document.WriteReport(res))
			}
		})
	}
}
