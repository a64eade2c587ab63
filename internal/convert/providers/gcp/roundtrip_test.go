package gcp

import (
	"maps"
	"testing"

	mapiv1 "github.com/openshift/api/machine/v1beta1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
	capgv1 "sigs.k8s.io/cluster-api-provider-gcp/api/v1beta1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	"github.com/machina-dev/machina/internal/convert"
	ct "github.com/machina-dev/machina/internal/convert/converttest"
)

const (
	cluster = "ci-op-4f7v2-kx8qz"
	region  = "us-central1"
	project = "openshift-gce-devel"
	netName = cluster + "-network"
)

var testPlatform = Platform{Region: region, Project: project, Network: &Network{Name: netName, Project: project}, CredentialsSecret: DefaultCredentialsSecret}

var testCtx = convert.Context{ClusterName: cluster, Platform: testPlatform, Namespaces: convert.OpenShiftNamespaces}

var suite = ct.Suite[*mapiv1.GCPMachineProviderSpec, *capgv1.GCPMachineSpec]{
	Checker:            ct.Checker{Ctx: testCtx, DecodeProviderSpec: ct.DecodeJSON[mapiv1.GCPMachineProviderSpec]},
	ProviderSpec:       genProviderSpec,
	RandomProviderSpec: randomProviderSpec,
	ProviderID:         genProviderID,
	InfraSpec:          genSpec,
	RandomCAPIMachine:  randomCAPIMachine,
	FailureDomain:      genZone,
	MinAcceptedPercent: 5,
	ProviderSpecSeeds: []string{
		`{"apiVersion":"machine.openshift.io/v1beta1","kind":"GCPMachineProviderSpec","machineType":"n2-standard-4","region":"us-central1","zone":"us-central1-a","projectID":"openshift-gce-devel","canIPForward":false,"deletionProtection":false,"credentialsSecret":{"name":"gcp-cloud-credentials"},"userDataSecret":{"name":"worker-user-data"},"disks":[{"autoDelete":true,"boot":true,"image":"projects/rhcos-cloud/global/images/rhcos-9","labels":null,"sizeGb":128,"type":"pd-ssd"}],"networkInterfaces":[{"network":"ci-op-4f7v2-kx8qz-network","subnetwork":"ci-op-4f7v2-kx8qz-worker-subnet"}],"serviceAccounts":[{"email":"w@openshift-gce-devel.iam.gserviceaccount.com","scopes":["https://www.googleapis.com/auth/cloud-platform"]}],"tags":["ci-op-4f7v2-kx8qz-worker"]}`,
		`{"disks":[{"boot":false},{"boot":true,"image":"rhcos"}],"networkInterfaces":[{},{}],"gpus":[{"type":"x","count":0}]}`,
		`{"zone":"europe-west4-a","region":"us-east1","targetPools":["a"],"deletionProtection":true,"gcpMetadata":[{"key":"user-data"}]}`,
		`null`,
	},
}

// TestRoundTrip runs the shared round-trip properties (see converttest.Suite) on GCP objects.
func TestRoundTrip(t *testing.T) { suite.Run(t) }

// TestRoundTripSharedVPC runs them again on a cluster whose network lives in a host project:
// every interface names that project.
func TestRoundTripSharedVPC(t *testing.T) {
	s := suite
	p := testPlatform
	p.Network = &Network{Name: "shared-vpc", Project: "host-project-1"}
	s.Ctx.Platform = p
	shared := func(ps *mapiv1.GCPMachineProviderSpec) *mapiv1.GCPMachineProviderSpec {
		if len(ps.NetworkInterfaces) == 1 && ps.NetworkInterfaces[0] != nil && ps.NetworkInterfaces[0].Network == netName {
			ps.NetworkInterfaces[0].Network, ps.NetworkInterfaces[0].ProjectID = "shared-vpc", "host-project-1"
		}
		return ps
	}
	s.ProviderSpec = func(g *ct.Gen) *mapiv1.GCPMachineProviderSpec { return shared(genProviderSpec(g)) }
	s.RandomProviderSpec = func(g *ct.Gen) *mapiv1.GCPMachineProviderSpec { return shared(randomProviderSpec(g)) }
	s.Run(t)
}

func FuzzRoundTrip(f *testing.F) { suite.FuzzRoundTrip(f) }

func FuzzProviderSpecBytes(f *testing.F) { suite.FuzzProviderSpecBytes(f) }

func genZone(g *ct.Gen) string { return region + "-" + ct.Pick(g, "a", "b", "c", "f") }

func genProviderID(g *ct.Gen) string {
	return ct.Pick(g, "", "gce://"+project+"/"+genZone(g)+"/"+cluster+"-worker-"+g.Token())
}

// genLabels returns lower-case GCP labels, or none.
func genLabels(g *ct.Gen) map[string]string {
	if g.Maybe() {
		return nil
	}
	return map[string]string{"team": g.Token(), "cost-center": ct.Pick(g, "", "cc"+g.Token())}
}

func genKMSKey(g *ct.Gen) *mapiv1.GCPEncryptionKeyReference {
	return &mapiv1.GCPEncryptionKeyReference{
		KMSKey:               &mapiv1.GCPKMSKeyReference{Name: "key-" + g.Token(), KeyRing: "ring", ProjectID: ct.Pick(g, project, "kms-project"), Location: ct.Pick(g, "global", region)},
		KMSKeyServiceAccount: ct.Pick(g, "", "kms@"+project+".iam.gserviceaccount.com"),
	}
}

func genMetadata(g *ct.Gen) []*mapiv1.GCPMetadata {
	var out []*mapiv1.GCPMetadata
	for i, k := range []string{"serial-port-enable", "block-project-ssh-keys"}[:g.Intn(3)] {
		out = append(out, &mapiv1.GCPMetadata{Key: k, Value: ct.Pick(g, nil, ptr.To("true"), ptr.To(g.Token()+string(rune('a'+i))))})
	}
	return out
}

// genProviderSpec returns a GCPMachineProviderSpec in the form the converter accepts without
// warnings: the installer's, with optional extras.
func genProviderSpec(g *ct.Gen) *mapiv1.GCPMachineProviderSpec {
	labels := genLabels(g)
	ps := &mapiv1.GCPMachineProviderSpec{
		UserDataSecret:      &corev1.LocalObjectReference{Name: ct.Pick(g, "worker-user-data", g.Token())},
		CredentialsSecret:   &corev1.LocalObjectReference{Name: DefaultCredentialsSecret},
		CanIPForward:        g.Maybe(),
		Labels:              labels,
		Metadata:            genMetadata(g),
		ServiceAccounts:     []mapiv1.GCPServiceAccount{{Email: cluster + "-w@" + project + ".iam.gserviceaccount.com", Scopes: ct.Pick(g, nil, []string{cloudPlatformScope})}},
		Tags:                ct.Pick(g, nil, []string{cluster + "-worker"}, []string{cluster + "-worker", g.Token()}),
		MachineType:         ct.Pick(g, "n2-standard-4", "n1-standard-8", "e2-standard-2"),
		Region:              region,
		Zone:                genZone(g),
		ProjectID:           project,
		NetworkInterfaces:   []*mapiv1.GCPNetworkInterface{{Network: netName, Subnetwork: ct.Pick(g, "", cluster+"-worker-subnet"), PublicIP: g.Maybe()}},
		ConfidentialCompute: mapiv1.ConfidentialComputePolicy(ct.Pick(g, "", "Enabled", "Disabled", "AMDEncryptedVirtualizationNestedPaging")),
		OnHostMaintenance:   mapiv1.GCPHostMaintenanceType(ct.Pick(g, "", "Migrate", "Terminate")),
	}
	ps.APIVersion, ps.Kind = mapiv1.GroupVersion.String(), ProviderSpecKind
	boot := &mapiv1.GCPDisk{AutoDelete: true, Boot: true, SizeGB: ct.Pick[int64](g, 0, 128), Type: ct.Pick(g, "pd-ssd", "pd-balanced"),
		Image: "projects/rhcos-cloud/global/images/rhcos-" + g.Token(), Labels: maps.Clone(labels)}
	if g.Intn(3) == 0 {
		boot.EncryptionKey = genKMSKey(g)
	}
	ps.Disks = []*mapiv1.GCPDisk{boot}
	for i := g.Intn(3); i > 0; i-- {
		d := &mapiv1.GCPDisk{AutoDelete: true, SizeGB: 1 + g.Int63n(500), Type: ct.Pick(g, "pd-ssd", "pd-standard", "hyperdisk-balanced")}
		if boot.EncryptionKey != nil && g.Maybe() {
			k := *boot.EncryptionKey
			k.KMSKey = ptr.To(*k.KMSKey)
			d.EncryptionKey = &k
		}
		ps.Disks = append(ps.Disks, d)
	}
	switch g.Intn(3) {
	case 1:
		ps.Preemptible = true
	case 2:
		ps.ProvisioningModel = ptr.To(mapiv1.GCPSpotInstance)
	}
	if g.Maybe() {
		ps.ShieldedInstanceConfig = mapiv1.GCPShieldedInstanceConfig{SecureBoot: ct.Pick[mapiv1.SecureBootPolicy](g, "Enabled", "Disabled"),
			VirtualizedTrustedPlatformModule: ct.Pick[mapiv1.VirtualizedTrustedPlatformModulePolicy](g, "", "Enabled", "Disabled")}
	}
	if g.Maybe() {
		ps.GPUs = []mapiv1.GCPGPUConfig{{Type: "nvidia-tesla-t4", Count: int32(1 + g.Intn(4))}}
		ps.OnHostMaintenance = mapiv1.TerminateHostMaintenanceType
	}
	if g.Maybe() {
		ps.ResourceManagerTags = []mapiv1.ResourceManagerTag{{ParentID: "123456789012", Key: "env", Value: ct.Pick(g, "prod", "dev")}}
	}
	return ps
}

// randomProviderSpec is an arbitrary providerSpec, nudged half of the time towards values
// the converter accepts so both outcomes are exercised.
func randomProviderSpec(g *ct.Gen) *mapiv1.GCPMachineProviderSpec {
	var ps mapiv1.GCPMachineProviderSpec
	g.Fill.Fill(&ps)
	if g.Maybe() {
		return &ps
	}
	ok := genProviderSpec(g)
	for i := g.Intn(2); i >= 0; i-- {
		switch g.Intn(8) {
		case 0:
			ok.Disks = ct.Pick(g, ps.Disks, ok.Disks[:min(1, len(ok.Disks))], append(ok.Disks, &mapiv1.GCPDisk{SizeGB: g.Int63n(3), Type: "local-ssd"}))
		case 1:
			ok.NetworkInterfaces = ct.Pick(g, ps.NetworkInterfaces, []*mapiv1.GCPNetworkInterface{{Network: netName, ProjectID: ct.Pick(g, "", project, "other")}})
		case 2:
			ok.ServiceAccounts, ok.Metadata = ct.Pick(g, ok.ServiceAccounts, ps.ServiceAccounts), ct.Pick(g, ok.Metadata, ps.Metadata)
		case 3:
			ok.Region, ok.Zone, ok.ProjectID = ct.Pick(g, "", region, ps.Region), ct.Pick(g, ok.Zone, "europe-west4-a", ps.Zone), ct.Pick(g, "", project, ps.ProjectID)
		case 4:
			ok.GPUs, ok.Preemptible = ct.Pick(g, ok.GPUs, ps.GPUs), ps.Preemptible
			ok.RestartPolicy = ct.Pick(g, "", mapiv1.RestartPolicyAlways, mapiv1.RestartPolicyNever, ps.RestartPolicy)
		case 5:
			ok.ShieldedInstanceConfig, ok.ConfidentialCompute = ps.ShieldedInstanceConfig, ct.Pick(g, ok.ConfidentialCompute, ps.ConfidentialCompute)
		case 6:
			ok.Labels, ok.Tags, ok.TargetPools, ok.DeletionProtection = ct.Pick(g, ok.Labels, ps.Labels), ps.Tags, ct.Pick(g, nil, ps.TargetPools), ct.Pick(g, false, ps.DeletionProtection)
		case 7:
			ok.TypeMeta, ok.CredentialsSecret, ok.UserDataSecret = ct.Pick(g, ok.TypeMeta, ps.TypeMeta), ps.CredentialsSecret, ct.Pick(g, ok.UserDataSecret, ps.UserDataSecret)
		}
	}
	return ok
}

func genCAPGKey(g *ct.Gen) *capgv1.CustomerEncryptionKey {
	k := &capgv1.CustomerEncryptionKey{KeyType: capgv1.CustomerManagedKey,
		ManagedKey: &capgv1.ManagedKey{KMSKeyName: "projects/" + project + "/locations/global/keyRings/ring/cryptoKeys/k" + g.Token()}}
	if g.Maybe() {
		k.KMSKeyServiceAccount = ptr.To("kms@" + project + ".iam.gserviceaccount.com")
	}
	return k
}

// genSpec returns a GCPMachine spec in the form the converter accepts without warnings.
func genSpec(g *ct.Gen) *capgv1.GCPMachineSpec {
	s := &capgv1.GCPMachineSpec{
		InstanceType:          ct.Pick(g, "n2-standard-4", "e2-standard-8"),
		Image:                 ptr.To("projects/rhcos-cloud/global/images/rhcos-" + g.Token()),
		AdditionalLabels:      genLabels(g),
		AdditionalNetworkTags: ct.Pick(g, nil, []string{cluster + "-worker"}),
		RootDeviceSize:        ct.Pick[int64](g, 0, 128),
		RootDeviceType:        ptr.To(ct.Pick(g, capgv1.PdSsdDiskType, capgv1.PdStandardDiskType)),
		ServiceAccount:        &capgv1.ServiceAccount{Email: ct.Pick(g, "default", "w@"+project+".iam.gserviceaccount.com"), Scopes: []string{cloudPlatformScope}},
		IPForwarding:          ptr.To(ct.Pick(g, capgv1.IPForwardingEnabled, capgv1.IPForwardingDisabled)),
		Preemptible:           g.Maybe(),
	}
	for _, m := range genMetadata(g) {
		s.AdditionalMetadata = append(s.AdditionalMetadata, capgv1.MetadataItem{Key: m.Key, Value: m.Value})
	}
	if g.Maybe() {
		s.Subnet = ptr.To(cluster + "-worker-subnet")
	}
	if g.Maybe() {
		s.PublicIP = ptr.To(true)
	}
	if !s.Preemptible && g.Maybe() {
		s.ProvisioningModel = ptr.To(capgv1.ProvisioningModelSpot)
	}
	if g.Maybe() {
		s.OnHostMaintenance = ptr.To(ct.Pick(g, capgv1.HostMaintenancePolicyMigrate, capgv1.HostMaintenancePolicyTerminate))
	}
	if g.Maybe() {
		s.ConfidentialCompute = ptr.To(ct.Pick(g, capgv1.ConfidentialComputePolicyDisabled, capgv1.ConfidentialComputePolicyTDX))
	}
	if g.Maybe() {
		s.ShieldedInstanceConfig = &capgv1.GCPShieldedInstanceConfig{IntegrityMonitoring: capgv1.IntegrityMonitoringPolicyDisabled}
	}
	if g.Maybe() {
		s.RootDiskEncryptionKey = genCAPGKey(g)
	}
	for i := g.Intn(3); i > 0; i-- {
		d := capgv1.AttachedDiskSpec{DeviceType: ptr.To(capgv1.PdSsdDiskType), Size: ptr.To(1 + g.Int63n(100))}
		if s.RootDiskEncryptionKey != nil && g.Maybe() {
			d.EncryptionKey = s.RootDiskEncryptionKey.DeepCopy()
		}
		s.AdditionalDisks = append(s.AdditionalDisks, d)
	}
	if g.Maybe() {
		s.ResourceManagerTags = capgv1.ResourceManagerTags{{ParentID: "123456789012", Key: "env", Value: "prod"}}
	}
	return s
}

// randomCAPIMachine is an arbitrary Cluster API Machine and GCPMachine spec, each nudged most
// of the time towards values the converter accepts.
func randomCAPIMachine(g *ct.Gen) (*clusterv1.Machine, *capgv1.GCPMachineSpec, string) {
	var m clusterv1.Machine
	var spec capgv1.GCPMachineSpec
	g.Fill.Fill(&m)
	g.Fill.Fill(&spec)
	pid := genProviderID(g)
	if g.Intn(3) > 0 {
		m = *g.CAPIMachine(testCtx, pid)
		m.Spec.FailureDomain = ct.Pick(g, genZone(g), genZone(g), "")
	}
	if g.Intn(3) > 0 {
		ok := genSpec(g)
		switch g.Intn(6) {
		case 0:
			ok.Image, ok.ImageFamily, ok.RootDeviceType = spec.Image, spec.ImageFamily, spec.RootDeviceType
		case 1:
			ok.AdditionalDisks, ok.RootDiskEncryptionKey = spec.AdditionalDisks, spec.RootDiskEncryptionKey
		case 2:
			ok.ServiceAccount, ok.AdditionalMetadata = spec.ServiceAccount, spec.AdditionalMetadata
		case 3:
			ok.GuestAccelerators, ok.ProvisioningModel, ok.Preemptible = spec.GuestAccelerators, spec.ProvisioningModel, spec.Preemptible
		case 4:
			ok.AliasIPRanges, ok.Subnet, ok.PublicIP = spec.AliasIPRanges, spec.Subnet, spec.PublicIP
		case 5:
			ok.IPForwarding, ok.ShieldedInstanceConfig, ok.AdditionalLabels = spec.IPForwarding, spec.ShieldedInstanceConfig, spec.AdditionalLabels
		}
		spec = *ok
	}
	return &m, &spec, m.Spec.ProviderID
}
