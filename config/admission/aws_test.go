package admission_test

import (
	"context"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	configv1 "github.com/openshift/api/config/v1"
	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/machina-dev/machina/internal/lab"
	"github.com/machina-dev/machina/internal/lab/labtest"
)

// awsSpec is a minimal AWS providerSpec; extra replaces fields (nil deletes one).
func awsSpec(extra map[string]any) map[string]any {
	v := map[string]any{"apiVersion": "machine.openshift.io/v1beta1", "kind": "AWSMachineProviderConfig",
		"ami": map[string]any{"id": "ami-0a8f3c6e2b1d94f57"}, "placement": map[string]any{"region": "us-east-1", "availabilityZone": "us-east-1a"}}
	for k, x := range extra {
		if x == nil {
			delete(v, k)
		} else {
			v[k] = x
		}
	}
	return v
}

func machineSetDecoded(ms *machinev1beta1.MachineSet) map[string]any {
	var v map[string]any
	_ = json.Unmarshal(ms.Spec.Template.Spec.ProviderSpec.Value.Raw, &v)
	return v
}

// asJSON normalises a value through JSON, so literals compare with decoded objects.
func asJSON(t *testing.T, v any) any {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var out any
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

func expectField(t *testing.T, ps map[string]any, field string, want any) {
	t.Helper()
	if got, w := asJSON(t, ps[field]), asJSON(t, want); !reflect.DeepEqual(got, w) {
		t.Errorf("%s = %v, want %v", field, got, w)
	}
}

var installerRoot = map[string]any{"ebs": map[string]any{"volumeSize": 120, "volumeType": "gp3", "encrypted": true}}

// TestAWSProviderSpecAdmission sends AWS providerSpecs to the real kube-apiserver as three
// identities: dana, a platform engineer who may only manage Machines and MachineSets; an
// administrator who writes the Infrastructure; machina's controller identity, whose mirrors
// must stay exactly as converted.
func TestAWSProviderSpecAdmission(t *testing.T) {
	l := labtest.Shared(t)
	ctx := context.Background()
	admin := clientAs(t, l, "root", nil, "system:masters")
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "aws-machine-editor"}, Rules: []rbacv1.PolicyRule{{
		APIGroups: []string{"machine.openshift.io"}, Resources: []string{"machines", "machinesets"},
		Verbs: []string{"get", "list", "watch", "create", "update", "patch", "delete"}}}}
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "dana-aws-machine-editor"},
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "aws-machine-editor"},
		Subjects: []rbacv1.Subject{{Kind: "User", Name: "dana", APIGroup: "rbac.authorization.k8s.io"}}}
	for _, o := range []client.Object{role, binding} {
		if err := admin.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	w := &warnings{}
	dana := clientAs(t, l, "dana", w)
	machina := clientAs(t, l, lab.ManagerUser, nil, "system:masters")

	// Policies and RBAC become active a moment after they are created: wait until the
	// defaults are applied and the value and required checks refuse.
	deadline := time.Now().Add(30 * time.Second)
	for {
		probe := machine("probe", awsSpec(nil))
		err := dana.Create(ctx, probe, client.DryRunAll)
		badValue := dana.Create(ctx, machine("probe", awsSpec(map[string]any{"networkInterfaceType": "X"})), client.DryRunAll)
		noAMI := dana.Create(ctx, machine("probe", awsSpec(map[string]any{"ami": nil})), client.DryRunAll)
		if err == nil && decoded(probe)["metadataServiceOptions"] != nil && badValue != nil && noAMI != nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("policies never became active: %v", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	w.take()

	t.Run("DefaultsAsOpenShiftInstalls", func(t *testing.T) { testAWSDefaults(t, dana, w) })
	t.Run("RootDeviceCompleted", func(t *testing.T) { testAWSRootDevice(t, dana) })
	t.Run("MirrorsKeptAsConverted", func(t *testing.T) { testAWSMirrorsKept(t, dana, machina) })
	t.Run("RequiredRefused", func(t *testing.T) { testAWSRequired(t, dana) })
	t.Run("ValuesRefused", func(t *testing.T) { testAWSValues(t, dana) })
	t.Run("UnknownFieldsWarned", func(t *testing.T) { testAWSUnknownFields(t, dana, w) })
	// Last: once the Infrastructure names a region, a missing region is no longer refused.
	t.Run("RegionFromInfrastructure", func(t *testing.T) { testAWSRegion(t, admin, dana) })
}

func testAWSDefaults(t *testing.T, dana client.Client, w *warnings) {
	ctx := context.Background()
	m := machine("aws-defaults", awsSpec(nil))
	if err := dana.Create(ctx, m); err != nil {
		t.Fatal(err)
	}
	v := decoded(m)
	expectField(t, v, "instanceType", "m5.large")
	expectField(t, v, "credentialsSecret", map[string]any{"name": "aws-cloud-credentials"})
	expectField(t, v, "userDataSecret", map[string]any{"name": "worker-user-data"})
	expectField(t, v, "blockDevices", []any{installerRoot})
	expectField(t, v, "metadataServiceOptions", map[string]any{"authentication": "Optional"})
	if ws := w.take(); len(ws) != 0 {
		t.Errorf("unexpected warnings: %v", ws)
	}

	// The user's own choices are kept.
	own := machine("aws-own", awsSpec(map[string]any{"instanceType": "m6i.xlarge",
		"metadataServiceOptions": map[string]any{"authentication": "Required"}, "credentialsSecret": map[string]any{"name": "mine"}}))
	if err := dana.Create(ctx, own); err != nil {
		t.Fatal(err)
	}
	v = decoded(own)
	expectField(t, v, "instanceType", "m6i.xlarge")
	expectField(t, v, "metadataServiceOptions", map[string]any{"authentication": "Required"})
	expectField(t, v, "credentialsSecret", map[string]any{"name": "mine"})

	// A MachineSet's template is defaulted the same way.
	l := map[string]string{"set": "aws-defaults"}
	ms := machineSet("aws-defaults", l, l, awsSpec(map[string]any{"metadataServiceOptions": map[string]any{}}))
	if err := dana.Create(ctx, ms); err != nil {
		t.Fatal(err)
	}
	v = machineSetDecoded(ms)
	expectField(t, v, "instanceType", "m5.large")
	expectField(t, v, "blockDevices", []any{installerRoot})
	expectField(t, v, "metadataServiceOptions", map[string]any{"authentication": "Optional"})
}

func testAWSRootDevice(t *testing.T, dana client.Client) {
	ctx := context.Background()
	data := map[string]any{"deviceName": "/dev/sdb", "ebs": map[string]any{"volumeSize": 50, "volumeType": "st1"}}
	// Only a data volume: the installer's root volume goes first.
	m := machine("aws-data-only", awsSpec(map[string]any{"blockDevices": []any{data}}))
	if err := dana.Create(ctx, m); err != nil {
		t.Fatal(err)
	}
	expectField(t, decoded(m), "blockDevices", []any{installerRoot, data})
	// A root device without size and type is completed where it is; its encryption stays the user's.
	m = machine("aws-root-partial", awsSpec(map[string]any{"blockDevices": []any{data, map[string]any{"ebs": map[string]any{"encrypted": false}}}}))
	if err := dana.Create(ctx, m); err != nil {
		t.Fatal(err)
	}
	expectField(t, decoded(m), "blockDevices", []any{data, map[string]any{"ebs": map[string]any{"encrypted": false, "volumeSize": 120, "volumeType": "gp3"}}})
	// A complete root device is left alone.
	root := map[string]any{"ebs": map[string]any{"volumeSize": 200, "volumeType": "io1", "iops": 3000}}
	m = machine("aws-root-own", awsSpec(map[string]any{"blockDevices": []any{root}}))
	if err := dana.Create(ctx, m); err != nil {
		t.Fatal(err)
	}
	expectField(t, decoded(m), "blockDevices", []any{root})
}

// testAWSMirrorsKept: machina's writes are not defaulted, and a user's change that leaves the
// providerSpec alone (a label on a mirror) does not default it either.
func testAWSMirrorsKept(t *testing.T, dana, machina client.Client) {
	ctx := context.Background()
	spec := awsSpec(map[string]any{"instanceType": "m6i.large", "credentialsSecret": map[string]any{"name": "aws-cloud-credentials"},
		"userDataSecret": map[string]any{"name": "worker-user-data"}})
	m := machine("aws-mirror", spec)
	m.Spec.AuthoritativeAPI = machinev1beta1.MachineAuthorityClusterAPI
	if err := machina.Create(ctx, m); err != nil {
		t.Fatal(err)
	}
	if v := decoded(m); !reflect.DeepEqual(asJSON(t, v), asJSON(t, spec)) {
		t.Fatalf("machina's write was changed: %v, want %v", v, spec)
	}
	got := &machinev1beta1.Machine{}
	if err := dana.Get(ctx, client.ObjectKeyFromObject(m), got); err != nil {
		t.Fatal(err)
	}
	got.Labels = map[string]string{"team": "blue"}
	if err := dana.Update(ctx, got); err != nil {
		t.Fatal(err)
	}
	if v := decoded(got); !reflect.DeepEqual(asJSON(t, v), asJSON(t, spec)) {
		t.Fatalf("a label change rewrote the providerSpec: %v, want %v", v, spec)
	}
}

func testAWSRequired(t *testing.T, dana client.Client) {
	ctx := context.Background()
	const p = "spec.providerSpec.value"
	expectDenied(t, dana.Create(ctx, machine("aws-noami", awsSpec(map[string]any{"ami": nil}))),
		p+".ami: Required value: an AMI by id or filters")
	expectDenied(t, dana.Create(ctx, machine("aws-arn", awsSpec(map[string]any{"ami": map[string]any{"arn": "arn:aws:ec2:us-east-1::image/ami-1"}}))),
		p+`.ami.arn: Invalid value: "arn:aws:ec2:us-east-1::image/ami-1": EC2 launches an AMI by ID; give ami.id or ami.filters instead`)
	expectDenied(t, dana.Create(ctx, machine("aws-notype", awsSpec(map[string]any{"instanceType": ""}))),
		p+".instanceType: Required value: an EC2 instance type")
	// No Infrastructure names the region yet.
	expectDenied(t, dana.Create(ctx, machine("aws-noregion", awsSpec(map[string]any{"placement": nil}))),
		p+".placement.region: Required value: the AWS region, for example us-east-1")
	l := map[string]string{"set": "aws-noami"}
	expectDenied(t, dana.Create(ctx, machineSet("aws-noami", l, l, awsSpec(map[string]any{"ami": nil}))),
		"spec.template.spec.providerSpec.value.ami: Required value")
}

func testAWSValues(t *testing.T, dana client.Client) {
	ctx := context.Background()
	const p = "spec.providerSpec.value"
	dev := func(ebs map[string]any) map[string]any { return map[string]any{"ebs": ebs} }
	cases := []struct {
		name  string
		extra map[string]any
		want  string
	}{
		{"imds", map[string]any{"metadataServiceOptions": map[string]any{"authentication": "required"}},
			p + `.metadataServiceOptions.authentication: Unsupported value: "required": supported values: "Required", "Optional"`},
		{"nic", map[string]any{"networkInterfaceType": "SRIOV"}, p + `.networkInterfaceType: Unsupported value: "SRIOV"`},
		{"tenancy", map[string]any{"placement": map[string]any{"region": "us-east-1", "tenancy": "shared"}},
			p + `.placement.tenancy: Unsupported value: "shared": supported values: "default", "dedicated", "host"`},
		{"host", map[string]any{"placement": map[string]any{"region": "us-east-1", "host": map[string]any{"affinity": "AnyAvailable"}}},
			p + ".placement.host: Forbidden: a dedicated host is only used with placement.tenancy host"},
		{"zone", map[string]any{"placement": map[string]any{"region": "us-east-1", "availabilityZone": "us-west-2a"}},
			p + `.placement.availabilityZone: Invalid value: "us-west-2a": the zone must be in region us-east-1`},
		{"market", map[string]any{"marketType": "Reserved"}, p + `.marketType: Unsupported value: "Reserved"`},
		{"block", map[string]any{"marketType": "CapacityBlock"}, p + ".capacityReservationId: Required value"},
		{"spot", map[string]any{"marketType": "OnDemand", "spotMarketOptions": map[string]any{}},
			p + ".spotMarketOptions: Forbidden: spot options cannot be combined with marketType OnDemand"},
		{"reservation", map[string]any{"capacityReservationId": "res-1"}, p + `.capacityReservationId: Invalid value: "res-1": a capacity reservation ID starts with cr-`},
		{"partition", map[string]any{"placementGroupName": "pg", "placementGroupPartition": 9}, p + ".placementGroupPartition: Invalid value: 9: partitions are numbered 1 to 7"},
		{"partition-group", map[string]any{"placementGroupPartition": 2}, p + ".placementGroupName: Required value"},
		{"subnet", map[string]any{"subnet": map[string]any{"id": "subnet-1", "filters": []any{map[string]any{"name": "tag:Name", "values": []any{"x"}}}}},
			p + ".subnet: Invalid value: give one of id, arn or filters"},
		{"security-group", map[string]any{"securityGroups": []any{map[string]any{"id": "sg-1"}, map[string]any{"id": "sg-2", "arn": "arn:x"}}},
			p + ".securityGroups[1]: Invalid value: give one of id, arn or filters"},
		{"two-roots", map[string]any{"blockDevices": []any{dev(map[string]any{"volumeSize": 120}), dev(map[string]any{"volumeSize": 50})}},
			p + ".blockDevices: Invalid value: 2 devices without a deviceName: only the root device has none"},
		{"volume-type", map[string]any{"blockDevices": []any{dev(map[string]any{"volumeSize": 120, "volumeType": "gp4"})}},
			p + `.blockDevices[0].ebs.volumeType: Unsupported value: "gp4"`},
		{"iops", map[string]any{"blockDevices": []any{map[string]any{"deviceName": "/dev/sdb", "ebs": map[string]any{"volumeSize": 100, "volumeType": "io2"}}}},
			// The installer's root volume is put first, so the data volume is the second device.
			p + ".blockDevices[1].ebs.iops: Required value: io2 volumes need provisioned IOPS"},
		{"throughput", map[string]any{"blockDevices": []any{dev(map[string]any{"volumeSize": 120, "volumeType": "gp2", "throughputMib": 250})}},
			p + ".blockDevices[0].ebs.throughputMib: Forbidden: only gp3 volumes take a throughput"},
		{"instance-type", map[string]any{"instanceType": "m6i xlarge"}, p + `.instanceType: Invalid value: "m6i xlarge"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			expectDenied(t, dana.Create(ctx, machine("aws-"+tc.name, awsSpec(tc.extra)), client.DryRunAll), tc.want)
		})
	}
	// Valid values of the same fields pass.
	ok := awsSpec(map[string]any{"networkInterfaceType": "EFA", "marketType": "CapacityBlock", "capacityReservationId": "cr-0123",
		"placement": map[string]any{"region": "us-east-1", "availabilityZone": "us-east-1b", "tenancy": "host",
			"host": map[string]any{"affinity": "AnyAvailable"}},
		"placementGroupName": "pg", "placementGroupPartition": 3,
		"blockDevices": []any{dev(map[string]any{"volumeSize": 120, "volumeType": "gp3", "throughputMib": 250}),
			map[string]any{"deviceName": "/dev/sdb", "ebs": map[string]any{"volumeSize": 100, "volumeType": "io2", "iops": 4000}}}})
	if err := dana.Create(ctx, machine("aws-valid", ok), client.DryRunAll); err != nil {
		t.Fatalf("valid values refused: %v", err)
	}
}

func testAWSUnknownFields(t *testing.T, dana client.Client, w *warnings) {
	ctx := context.Background()
	w.take()
	m := machine("aws-typos", awsSpec(map[string]any{"hostPlacement": map[string]any{},
		"placement":    map[string]any{"region": "us-east-1", "zone": "us-east-1a"},
		"blockDevices": []any{map[string]any{"ebs": map[string]any{"volumeSize": 120, "size": 100}}}}))
	if err := dana.Create(ctx, m); err != nil {
		t.Fatal(err)
	}
	ws := strings.Join(w.take(), "\n")
	for _, want := range []string{
		`spec.providerSpec.value: unknown field(s) "hostPlacement" will be ignored by the AWSMachineProviderConfig provider`,
		`spec.providerSpec.value.placement: unknown field(s) "zone"`,
		`spec.providerSpec.value.blockDevices[0].ebs: unknown field(s) "size"`,
	} {
		if !strings.Contains(ws, want) {
			t.Errorf("warnings %q do not say %q", ws, want)
		}
	}
	if err := dana.Create(ctx, machine("aws-no-typos", awsSpec(nil)), client.DryRunAll); err != nil {
		t.Fatal(err)
	}
	if ws := w.take(); len(ws) != 0 {
		t.Errorf("a clean providerSpec was warned about: %v", ws)
	}
}

func testAWSRegion(t *testing.T, admin, dana client.Client) {
	ctx := context.Background()
	createInfrastructure(t, t, admin, "lab-x7k2p",
		configv1.PlatformStatus{Type: configv1.AWSPlatformType, AWS: &configv1.AWSPlatformStatus{Region: "us-east-1"}})
	// The policy sees the Infrastructure a moment after it changes.
	deadline := time.Now().Add(30 * time.Second)
	for {
		probe := machine("aws-region", awsSpec(map[string]any{"placement": nil}))
		err := dana.Create(ctx, probe, client.DryRunAll)
		if err == nil {
			expectField(t, decoded(probe), "placement", map[string]any{"region": "us-east-1"})
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("region never defaulted: %v", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	m := machine("aws-zone-only", awsSpec(map[string]any{"placement": map[string]any{"availabilityZone": "us-east-1c"}}))
	if err := dana.Create(ctx, m); err != nil {
		t.Fatal(err)
	}
	expectField(t, decoded(m), "placement", map[string]any{"region": "us-east-1", "availabilityZone": "us-east-1c"})
}
