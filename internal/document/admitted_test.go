package document_test

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	configv1 "github.com/openshift/api/config/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/json"
	"k8s.io/utils/ptr"
	capav1 "sigs.k8s.io/cluster-api-provider-aws/v2/api/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/machina-dev/machina/internal/convert"
	"github.com/machina-dev/machina/internal/convert/providers/aws"
	"github.com/machina-dev/machina/internal/document"
	"github.com/machina-dev/machina/internal/lab"
	"github.com/machina-dev/machina/internal/lab/labtest"
	"github.com/machina-dev/machina/internal/provider"
	"github.com/machina-dev/machina/internal/testenv"
)

func decode(t *testing.T, path string) []document.Document {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	docs, err := document.Decode(f)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return docs
}

// convertedFixtures converts every golden fixture of platform's directory from the Machine API
// to the Cluster API (with its own context when it has one) and returns the objects of those
// that convert.
func convertedFixtures(t *testing.T, platform string) []client.Object {
	t.Helper()
	dir := filepath.Join("testdata", platform)
	dirContext := decode(t, filepath.Join(dir, "context.yaml"))
	inputs, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var out []client.Object
	for _, in := range inputs {
		if strings.HasSuffix(in, "context.yaml") {
			continue
		}
		opts := document.Options{To: document.ToClusterAPI, Namespaces: convert.OpenShiftNamespaces, Context: dirContext}
		if own := strings.TrimSuffix(in, ".yaml") + ".context.yaml"; fileExists(own) {
			opts.Context = decode(t, own)
		}
		var mapi []document.Document
		for _, d := range decode(t, in) {
			if strings.HasPrefix(d.Object.GetObjectKind().GroupVersionKind().Group, "machine.openshift.io") {
				mapi = append(mapi, d)
			}
		}
		if len(mapi) == 0 {
			continue
		}
		res, err := document.Convert(mapi, opts)
		if err != nil {
			t.Fatalf("%s: %v", in, err)
		}
		out = append(out, res.Objects...)
	}
	return out
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// TestConvertedObjectsAreAdmittedAsIs creates the Cluster API objects converted from every AWS
// fixture in a lab whose apiserver has CAPA's and the Cluster API's CRDs and admission, and
// checks that what is stored is what the converter wrote: labels, annotations and spec. A
// difference means a sync would see its mirror differ from the admitted copy on every pass
// (and template names would churn).
func TestConvertedObjectsAreAdmittedAsIs(t *testing.T) {
	objs := convertedFixtures(t, "aws")
	if len(objs) < 10 {
		t.Fatalf("only %d converted objects; the fixtures no longer exercise conversion", len(objs))
	}
	l := labtest.Start(t)
	checkAdmittedAsIs(t, adminClient(t, l), objs)
}

// TestModulePlatformsConvertedObjectsAreAdmittedAsIs is TestConvertedObjectsAreAdmittedAsIs
// for the platforms whose CRDs the lab does not embed (GCP, Azure, PowerVS, vSphere): one lab gets
// their CRDs from the modules go.mod pins, and the objects converted from every fixture of
// each must be stored as the converter wrote them.
func TestModulePlatformsConvertedObjectsAreAdmittedAsIs(t *testing.T) {
	l := labtest.Start(t)
	c := adminClient(t, l)
	for _, p := range []provider.Provider{provider.GCP(), provider.Azure(), provider.PowerVS(), provider.VSphere()} {
		t.Run(p.Name, func(t *testing.T) {
			objs := convertedFixtures(t, p.Name)
			if len(objs) < 4 {
				t.Fatalf("only %d converted objects; the fixtures no longer exercise conversion", len(objs))
			}
			testenv.InstallProviderCRDs(t, l, p)
			checkAdmittedAsIs(t, c, objs)
		})
	}
}

// checkAdmittedAsIs creates each object and compares what is stored with what was sent.
func checkAdmittedAsIs(t *testing.T, c client.Client, objs []client.Object) {
	t.Helper()
	ctx := context.Background()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: convert.OpenShiftNamespaces.ClusterAPI}}
	if err := c.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	for _, want := range objs {
		kind := want.GetObjectKind().GroupVersionKind().Kind
		t.Run(kind+"/"+want.GetName(), func(t *testing.T) {
			sent := want.DeepCopyObject().(client.Object)
			if err := c.Create(ctx, sent); err != nil {
				t.Fatalf("not admitted: %v", err)
			}
			got := want.DeepCopyObject().(client.Object)
			if err := c.Get(ctx, client.ObjectKeyFromObject(want), got); err != nil {
				t.Fatal(err)
			}
			if !equality.Semantic.DeepEqual(want.GetLabels(), got.GetLabels()) || !equality.Semantic.DeepEqual(want.GetAnnotations(), got.GetAnnotations()) {
				t.Errorf("metadata changed on admission:\nconverted: %v %v\nstored:    %v %v", want.GetLabels(), want.GetAnnotations(), got.GetLabels(), got.GetAnnotations())
			}
			if w, g := specJSON(t, want), specJSON(t, got); w != g {
				t.Errorf("spec changed on admission:\nconverted: %s\nstored:    %s", w, g)
			}
		})
	}
}

// TestContextFromTheCluster builds the AWS conversion context the sync uses from a lab's
// objects: the region and ipFamily from the Infrastructure, the control-plane load balancers
// from the AWSCluster the Cluster references, the label patterns from the settings; and
// without a Cluster, a context whose load balancers are unknown rather than an error.
func TestContextFromTheCluster(t *testing.T) {
	l := labtest.Start(t)
	c := adminClient(t, l)
	ctx := context.Background()
	ns := convert.OpenShiftNamespaces.ClusterAPI
	settings := provider.Settings{Namespaces: convert.OpenShiftNamespaces, AdditionalSyncMachineLabels: []*regexp.Regexp{regexp.MustCompile(`^spotInstance$`)}}
	mustCreate(t, c, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	infra := &configv1.Infrastructure{ObjectMeta: metav1.ObjectMeta{Name: "cluster"}}
	mustCreate(t, c, infra)
	infra.Status = configv1.InfrastructureStatus{InfrastructureName: "ci-op-7x2kq-abcde",
		ControlPlaneTopology: configv1.HighlyAvailableTopologyMode, InfrastructureTopology: configv1.HighlyAvailableTopologyMode, PlatformStatus: &configv1.PlatformStatus{
			Type: configv1.AWSPlatformType, AWS: &configv1.AWSPlatformStatus{Region: "us-east-1", IPFamily: configv1.DualStackIPv4Primary}}}
	if err := c.Status().Update(ctx, infra); err != nil {
		t.Fatal(err)
	}

	cc, err := provider.ContextWith(ctx, c, provider.AWS(), settings)
	if err != nil {
		t.Fatalf("without a Cluster: %v", err)
	}
	p := cc.Platform.(aws.Platform)
	if p.Region != "us-east-1" || p.IPFamily != configv1.DualStackIPv4Primary || p.ControlPlaneLoadBalancers != nil || len(cc.AdditionalSyncMachineLabels) != 1 {
		t.Fatalf("without a Cluster: %+v, %d label patterns", p, len(cc.AdditionalSyncMachineLabels))
	}

	mustCreate(t, c, &capav1.AWSCluster{ObjectMeta: metav1.ObjectMeta{Name: "ci-op-7x2kq-abcde", Namespace: ns}, Spec: capav1.AWSClusterSpec{Region: "us-east-1",
		ControlPlaneLoadBalancer:          &capav1.AWSLoadBalancerSpec{Name: ptr.To("ci-op-7x2kq-abcde-int"), LoadBalancerType: capav1.LoadBalancerTypeNLB},
		SecondaryControlPlaneLoadBalancer: &capav1.AWSLoadBalancerSpec{Name: ptr.To("ci-op-7x2kq-abcde-ext"), LoadBalancerType: capav1.LoadBalancerTypeNLB}}})
	mustCreate(t, c, &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: "ci-op-7x2kq-abcde", Namespace: ns}, Spec: clusterv1.ClusterSpec{
		InfrastructureRef: clusterv1.ContractVersionedObjectReference{APIGroup: capav1.GroupVersion.Group, Kind: "AWSCluster", Name: "ci-op-7x2kq-abcde"}}})
	cc, err = provider.ContextWith(ctx, c, provider.AWS(), settings)
	if err != nil {
		t.Fatalf("with the AWSCluster: %v", err)
	}
	lbs := cc.Platform.(aws.Platform).ControlPlaneLoadBalancers
	if lbs == nil || lbs.String() != "ci-op-7x2kq-abcde-int (network), ci-op-7x2kq-abcde-ext (network)" {
		t.Fatalf("with the AWSCluster: load balancers %v", lbs)
	}
}

func adminClient(t *testing.T, l *lab.Lab) client.Client {
	t.Helper()
	cfg, err := l.UserConfig("admin", "system:masters")
	if err != nil {
		t.Fatal(err)
	}
	s, err := provider.Builtin().Scheme()
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.New(cfg, client.Options{Scheme: s})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func mustCreate(t *testing.T, c client.Client, o client.Object) {
	t.Helper()
	if err := c.Create(context.Background(), o); err != nil {
		t.Fatalf("creating %T %s: %v", o, o.GetName(), err)
	}
}

// specJSON renders an object's spec, the part the converter owns.
func specJSON(t *testing.T, o client.Object) string {
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
