package admission_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/machina-dev/machina/config/admission"
	"github.com/machina-dev/machina/config/crd"
	"github.com/machina-dev/machina/internal/lab"
	"github.com/machina-dev/machina/internal/lab/labtest"
	"github.com/machina-dev/machina/internal/provider"
	"github.com/machina-dev/machina/internal/testenv"
)

// The policies that keep machina's paused Cluster API mirrors machina's, and the suffix their
// rules give an InfraMachine kind's resource.
var mirrorPolicies = map[string]string{"machina-capi-mirror-writes": "", "machina-mirror-status": "/status"}

// infraResources lists a platform's InfraMachine and InfraMachineTemplate resources (the
// plural the apiserver guesses from the kind, as every provider's CRD names it).
func infraResources(p provider.Provider) []schema.GroupVersionResource {
	var out []schema.GroupVersionResource
	for _, gvk := range []schema.GroupVersionKind{p.InfraMachine, p.InfraMachineTemplate} {
		gvr, _ := meta.UnsafeGuessKindToResource(gvk)
		out = append(out, gvr)
	}
	return out
}

// policyInfraRules returns the infrastructure resources a policy's UPDATE rules match, keyed
// as group/version/resource.
func policyInfraRules(t *testing.T, name string) map[string]bool {
	t.Helper()
	objs, err := admission.Objects()
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		if o.GetKind() != "ValidatingAdmissionPolicy" || o.GetName() != name {
			continue
		}
		rules, _, _ := unstructured.NestedSlice(o.Object, "spec", "matchConstraints", "resourceRules")
		out := map[string]bool{}
		for _, r := range rules {
			rule, _ := r.(map[string]any)
			groups, _, _ := unstructured.NestedStringSlice(rule, "apiGroups")
			versions, _, _ := unstructured.NestedStringSlice(rule, "apiVersions")
			resources, _, _ := unstructured.NestedStringSlice(rule, "resources")
			ops, _, _ := unstructured.NestedStringSlice(rule, "operations")
			if !strings.Contains(strings.Join(ops, ","), "UPDATE") {
				continue
			}
			for _, g := range groups {
				if !strings.HasPrefix(g, "infrastructure.") {
					continue
				}
				for _, v := range versions {
					for _, res := range resources {
						out[g+"/"+v+"/"+res] = true
					}
				}
			}
		}
		return out
	}
	t.Fatalf("no ValidatingAdmissionPolicy %s", name)
	return nil
}

// TestPauseAcksCoverEveryPlatform: a provider that acknowledges a pause by an annotation, or
// whose pause an operator acknowledges with machina.dev/provider-paused, must be able to write
// it on a paused InfraMachine mirror, or a handover away from the Cluster API never goes on.
func TestPauseAcksCoverEveryPlatform(t *testing.T) {
	objs, err := admission.Objects()
	if err != nil {
		t.Fatal(err)
	}
	acks := ""
	for _, o := range objs {
		if o.GetKind() != "ValidatingAdmissionPolicy" || o.GetName() != "machina-capi-mirror-writes" {
			continue
		}
		vars, _, _ := unstructured.NestedSlice(o.Object, "spec", "variables")
		for _, v := range vars {
			if m, _ := v.(map[string]any); m["name"] == "pauseAcks" {
				acks, _ = m["expression"].(string)
			}
		}
	}
	if acks == "" {
		t.Fatal("machina-capi-mirror-writes has no pauseAcks variable")
	}
	for _, p := range provider.Builtin().All() {
		if p.PauseAckAnnotation != "" && !strings.Contains(acks, "'"+p.PauseAckAnnotation+"'") {
			t.Errorf("platform %s acknowledges a pause by removing %s, which the mirror policy refuses", p.Name, p.PauseAckAnnotation)
		}
		if p.PauseAckByOperator && !strings.Contains(acks, "'machina.dev/provider-paused'") {
			t.Errorf("platform %s's pause is acknowledged by an operator's machina.dev/provider-paused, which the mirror policy refuses", p.Name)
		}
	}
}

// TestMirrorPoliciesCoverEveryPlatform: adding a platform to internal/provider is one package,
// so the mirror policies are checked against the registry: every platform's InfraMachine and
// InfraMachineTemplate (and their status) are protected, and the policies name no
// infrastructure resource the registry does not know.
func TestMirrorPoliciesCoverEveryPlatform(t *testing.T) {
	want := map[string]string{}
	for _, p := range provider.Builtin().All() {
		for _, gvr := range infraResources(p) {
			want[gvr.Group+"/"+gvr.Version+"/"+gvr.Resource] = p.Name
		}
	}
	for policy, suffix := range mirrorPolicies {
		got := policyInfraRules(t, policy)
		for key, platform := range want {
			if !got[key+suffix] {
				t.Errorf("%s does not match %s (platform %s): its mirrors can be edited by anyone", policy, key+suffix, platform)
			}
		}
		for key := range got {
			if _, known := want[strings.TrimSuffix(key, suffix)]; !known {
				t.Errorf("%s matches %s, which no platform of the registry has", policy, key)
			}
		}
	}
}

// infraSample is, for one platform, the smallest InfraMachine spec its CRD admits and a field
// of it with another admissible value.
type infraSample struct {
	spec  map[string]any
	field string
	other any
}

// infraSamples holds a sample for every platform of the registry; a platform without one
// fails TestInfraMirrorsOfEveryPlatform.
var infraSamples = map[string]infraSample{
	"sim":       {spec: map[string]any{"instanceType": "s1.small", "image": "sim-rhcos-9"}, field: "instanceType", other: "s1.large"},
	"aws":       {spec: map[string]any{"instanceType": "m5.large"}, field: "instanceType", other: "m6i.large"},
	"openstack": {spec: map[string]any{"flavor": "m1.large", "image": map[string]any{"filter": map[string]any{"name": "rhcos"}}}, field: "flavor", other: "m1.xlarge"},
	"gcp":       {spec: map[string]any{"instanceType": "n2-standard-4"}, field: "instanceType", other: "n2-standard-8"},
	"azure":     {spec: map[string]any{"vmSize": "Standard_D4s_v3", "osDisk": map[string]any{"osType": "Linux"}}, field: "vmSize", other: "Standard_D8s_v3"},
	"powervs":   {spec: map[string]any{"network": map[string]any{"name": "ocp-net"}, "memoryGiB": int64(32)}, field: "memoryGiB", other: int64(64)},
	"vsphere": {spec: map[string]any{"template": "rhcos", "numCPUs": int64(4),
		"network": map[string]any{"devices": []any{map[string]any{"networkName": "vm-network"}}}}, field: "numCPUs", other: int64(8)},
}

// TestInfraMirrorsOfEveryPlatform sends the writes a mirror refuses to the paused
// InfraMachine and InfraMachineTemplate mirrors of every platform of the registry, as a
// cluster administrator (refused) and as machina's controller identity (accepted). The lab
// embeds the simulated provider's and AWS's CRDs; the other platforms' come from the modules
// go.mod pins.
func TestInfraMirrorsOfEveryPlatform(t *testing.T) {
	l := labtest.Shared(t)
	installMissingInfraCRDs(t, l)
	admin := clientAs(t, l, "alice", nil, "system:masters")
	machina := clientAs(t, l, lab.ManagerUser, nil, "system:masters")
	for _, p := range provider.Builtin().All() {
		t.Run(p.Name, func(t *testing.T) {
			sample, ok := infraSamples[p.Name]
			if !ok {
				t.Fatalf("no InfraMachine sample for platform %s: add one to infraSamples", p.Name)
			}
			testInfraMirror(t, admin, machina, p.InfraMachine, sample, []string{"spec"})
			testInfraMirror(t, admin, machina, p.InfraMachineTemplate, sample, []string{"spec", "template", "spec"})
		})
	}
}

// installMissingInfraCRDs installs the CRDs of the platforms config/crd does not embed.
func installMissingInfraCRDs(t *testing.T, l *lab.Lab) {
	t.Helper()
	embedded, err := crd.All()
	if err != nil {
		t.Fatal(err)
	}
	have := map[schema.GroupKind]bool{}
	for _, c := range embedded {
		have[schema.GroupKind{Group: c.Spec.Group, Kind: c.Spec.Names.Kind}] = true
	}
	for _, p := range provider.Builtin().All() {
		if !have[p.InfraMachine.GroupKind()] {
			testenv.InstallProviderCRDs(t, l, p)
		}
	}
}

// testInfraMirror creates a paused mirror of kind gvk as machina, whose spec (at specPath) is
// the sample, and checks who may change its spec, unpause it and write its status.
func testInfraMirror(t *testing.T, admin, machina client.Client, gvk schema.GroupVersionKind, sample infraSample, specPath []string) {
	ctx := context.Background()
	name := strings.ToLower(gvk.Kind) + "-mirror"
	obj := &unstructured.Unstructured{}
	obj.SetGroupVersionKind(gvk)
	obj.SetNamespace(ns)
	obj.SetName(name)
	obj.SetAnnotations(map[string]string{"cluster.x-k8s.io/paused": "", "machina.dev/mirror-of": "Machine/" + name})
	spec := map[string]any{}
	for k, v := range sample.spec {
		spec[k] = v
	}
	isMachine := len(specPath) == 1
	if isMachine {
		spec["providerID"] = "sample://" + name
	}
	if err := unstructured.SetNestedField(obj.Object, spec, specPath...); err != nil {
		t.Fatal(err)
	}
	if err := machina.Create(ctx, obj); err != nil {
		t.Fatalf("%s: %v", gvk.Kind, err)
	}
	fresh := func(c client.Client) *unstructured.Unstructured {
		x := &unstructured.Unstructured{}
		x.SetGroupVersionKind(gvk)
		if err := c.Get(ctx, client.ObjectKeyFromObject(obj), x); err != nil {
			t.Fatal(err)
		}
		return x
	}
	edited := func(c client.Client) *unstructured.Unstructured {
		x := fresh(c)
		_ = unstructured.SetNestedField(x.Object, sample.other, append(append([]string{}, specPath...), sample.field)...)
		return x
	}
	const forbidden = "is a paused mirror of an authoritative Machine API resource"
	// A policy matches a newly served resource a moment after its CRD is established.
	waitDenied(t, func() error { return admin.Update(ctx, edited(admin), client.DryRunAll) })
	expectDenied(t, admin.Update(ctx, edited(admin)), "spec: Forbidden: "+gvk.Kind+" "+name+" "+forbidden)
	unpaused := fresh(admin)
	unpaused.SetAnnotations(map[string]string{"machina.dev/mirror-of": "Machine/" + name})
	expectDenied(t, admin.Update(ctx, unpaused), "metadata.annotations[cluster.x-k8s.io/paused]: Forbidden: only the migration controller unpauses a mirror")
	if isMachine {
		status := fresh(admin)
		_ = unstructured.SetNestedSlice(status.Object, []any{map[string]any{"type": "InternalIP", "address": "10.0.0.9"}}, "status", "addresses")
		expectDenied(t, admin.Status().Update(ctx, status), "status: Forbidden: "+gvk.Kind+" "+name+" "+forbidden)
	}
	if err := machina.Update(ctx, edited(machina)); err != nil {
		t.Fatalf("machina must be able to change its mirror %s: %v", gvk.Kind, err)
	}
	unpaused = fresh(machina)
	unpaused.SetAnnotations(map[string]string{"machina.dev/mirror-of": "Machine/" + name})
	if err := machina.Update(ctx, unpaused); err != nil {
		t.Fatalf("machina must be able to unpause its mirror %s: %v", gvk.Kind, err)
	}
}

// waitDenied retries a dry-run write until the apiserver refuses it (30 seconds at most).
func waitDenied(t *testing.T, write func() error) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for write() == nil {
		if time.Now().After(deadline) {
			t.Fatal("the mirror policy never refused the write")
		}
		time.Sleep(200 * time.Millisecond)
	}
}
