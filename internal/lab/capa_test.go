package lab_test

import (
	"context"
	"net/http"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	capav1 "sigs.k8s.io/cluster-api-provider-aws/v2/api/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/machina-dev/machina/internal/cloud/cloudtest"
	"github.com/machina-dev/machina/internal/cloud/ec2"
	"github.com/machina-dev/machina/internal/lab"
	"github.com/machina-dev/machina/internal/lab/labtest"
	"github.com/machina-dev/machina/internal/scheme"
)

// startCAPA starts the upstream CAPA controller against l and the cloud's EC2 front, and
// stops it when the test ends. The first run on a machine builds it (about ten minutes).
func startCAPA(t *testing.T, l *lab.Lab, front *ec2.Front, namespace string) *lab.CAPA {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Minute)
	defer cancel()
	capa, err := l.StartCAPA(ctx, lab.CAPAOptions{EC2URL: front.URL(), Region: front.Region(), Namespace: namespace,
		Progress: testLogWriter{t}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			if b, err := os.ReadFile(capa.LogPath); err == nil {
				t.Logf("--- %s ---\n%s", capa.LogPath, tailLines(string(b), 60))
			}
		}
		capa.Stop()
	})
	return capa
}

func tailLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

type testLogWriter struct{ t testing.TB }

func (w testLogWriter) Write(p []byte) (int, error) {
	w.t.Log(string(p))
	return len(p), nil
}

// TestCAPAStartsAsItself starts the upstream CAPA controller in a lab: it becomes ready, it
// authenticates as its own ServiceAccount identity with only the rights of CAPA's
// config/rbac, it writes with them (the AWSClusterControllerIdentity it creates), its
// webhooks are registered and answer, and Stop removes them.
func TestCAPAStartsAsItself(t *testing.T) {
	l := labtest.Start(t)
	cloud := cloudtest.Start(t, cloudtest.WithEC2(ec2.Options{}))
	capa := startCAPA(t, l, cloud.Server.EC2(), "")
	ctx := context.Background()

	resp, err := http.Get(capa.HealthURL)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("%s: HTTP %d", capa.HealthURL, resp.StatusCode)
	}

	// The identity CAPA's kubeconfig carries, as kube-apiserver sees it.
	cfg, err := clientcmd.BuildConfigFromFlags("", capa.KubeconfigPath)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	review, err := cs.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if u := review.Status.UserInfo; u.Username != lab.CAPAUser || slices.Contains(u.Groups, "system:masters") {
		t.Fatalf("CAPA authenticates as %s %v, want %s without system:masters", u.Username, u.Groups, lab.CAPAUser)
	}

	c, err := client.New(l.Config, client.Options{Scheme: scheme.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		group, resource, verb string
		allowed               bool
	}{
		{capav1.GroupVersion.Group, "awsmachines", "patch", true},
		{"cluster.x-k8s.io", "machines", "watch", true},
		{"", "secrets", "get", true},
		{"rbac.authorization.k8s.io", "clusterrolebindings", "create", false},
		{"machine.openshift.io", "machines", "list", false},
		{"", "nodes", "delete", false},
	} {
		sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User: review.Status.UserInfo.Username, Groups: review.Status.UserInfo.Groups,
			ResourceAttributes: &authorizationv1.ResourceAttributes{Group: tc.group, Resource: tc.resource, Verb: tc.verb},
		}}
		if err := c.Create(ctx, sar); err != nil {
			t.Fatal(err)
		}
		if sar.Status.Allowed != tc.allowed {
			t.Errorf("CAPA may %s %s.%s: %v, want %v (%s)", tc.verb, tc.resource, tc.group, sar.Status.Allowed, tc.allowed, sar.Status.Reason)
		}
	}

	// Its webhooks answer: CAPA's AWSCluster defaulting fills identityRef in.
	ac := &capav1.AWSCluster{ObjectMeta: metav1.ObjectMeta{Name: "webhooked", Namespace: "default"},
		Spec: capav1.AWSClusterSpec{Region: cloud.Server.EC2().Region()}}
	if err := c.Create(ctx, ac); err != nil {
		t.Fatal(err)
	}
	if ac.Spec.IdentityRef == nil || ac.Spec.IdentityRef.Name != "default" {
		t.Errorf("CAPA's AWSCluster webhook did not default identityRef: %+v", ac.Spec.IdentityRef)
	}

	// CAPA writes with its own rights: for the AWSCluster, its identity creator makes the
	// default identity.
	waitFor(t, 2*time.Minute, "CAPA creates AWSClusterControllerIdentity default", func(ctx context.Context) (bool, error) {
		err := c.Get(ctx, client.ObjectKey{Name: "default"}, &capav1.AWSClusterControllerIdentity{})
		return err == nil, client.IgnoreNotFound(err)
	})

	// Stopped, CAPA leaves no webhook registered that nobody serves.
	capa.Stop()
	plain := &capav1.AWSCluster{ObjectMeta: metav1.ObjectMeta{Name: "plain", Namespace: "default"},
		Spec: capav1.AWSClusterSpec{Region: cloud.Server.EC2().Region()}}
	if err := c.Create(ctx, plain); err != nil {
		t.Fatalf("creating an AWSCluster after CAPA stopped: %v", err)
	}
	if plain.Spec.IdentityRef != nil {
		t.Errorf("a webhook of the stopped CAPA still defaulted identityRef")
	}
	if err := l.Failed(); err != nil {
		t.Errorf("the lab reports a failed component after CAPA's Stop: %v", err)
	}
}

// TestStartCAPARefusesBadOptions: options --service-endpoints cannot carry are refused
// before anything is built or started, with an error naming the field.
func TestStartCAPARefusesBadOptions(t *testing.T) {
	var l lab.Lab
	for _, tc := range []struct {
		opts  lab.CAPAOptions
		field string
	}{
		{lab.CAPAOptions{Region: "us-east-1"}, "CAPAOptions.EC2URL"},
		{lab.CAPAOptions{EC2URL: "127.0.0.1:9", Region: "us-east-1"}, "CAPAOptions.EC2URL"},
		{lab.CAPAOptions{EC2URL: "ftp://127.0.0.1:9", Region: "us-east-1"}, "CAPAOptions.EC2URL"},
		{lab.CAPAOptions{EC2URL: "http://127.0.0.1:9/?a=b", Region: "us-east-1"}, "CAPAOptions.EC2URL"},
		{lab.CAPAOptions{EC2URL: "http://127.0.0.1:9"}, "CAPAOptions.Region"},
		{lab.CAPAOptions{EC2URL: "http://127.0.0.1:9", Region: "us-east-1:ec2"}, "CAPAOptions.Region"},
	} {
		_, err := l.StartCAPA(context.Background(), tc.opts)
		if err == nil || !strings.Contains(err.Error(), tc.field) {
			t.Errorf("StartCAPA(%+v) = %v, want an error naming %s", tc.opts, err, tc.field)
		}
	}
}

// TestStartCAPAFailsWhole: a CAPA that exits while starting (here: a flag it refuses) makes
// StartCAPA fail with CAPA's own words, and leaves nothing behind: no webhook registration
// kube-apiserver would call, no component the lab reports failed, the lab still usable.
func TestStartCAPAFailsWhole(t *testing.T) {
	l := labtest.Start(t)
	cloud := cloudtest.Start(t, cloudtest.WithEC2(ec2.Options{}))
	front := cloud.Server.EC2()
	ctx := context.Background()
	opts := lab.WithCAPAExtraArgs(lab.CAPAOptions{EC2URL: front.URL(), Region: front.Region()}, "--no-such-flag")
	capa, err := l.StartCAPA(ctx, opts)
	if err == nil {
		capa.Stop()
		t.Fatal("StartCAPA with a flag CAPA refuses succeeded")
	}
	if capa != nil || !strings.Contains(err.Error(), "CAPA") || !strings.Contains(err.Error(), "no-such-flag") {
		t.Errorf("StartCAPA = %v, %v; want nil and an error quoting CAPA's complaint", capa, err)
	}
	c, err := client.New(l.Config, client.Options{Scheme: scheme.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	mutating := &admissionregistrationv1.MutatingWebhookConfigurationList{}
	validating := &admissionregistrationv1.ValidatingWebhookConfigurationList{}
	for _, list := range []client.ObjectList{mutating, validating} {
		if err := c.List(ctx, list); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range append(names(mutating.Items), names(validating.Items)...) {
		if strings.HasPrefix(name, "capa-") {
			t.Errorf("webhook configuration %s left registered after a failed start", name)
		}
	}
	if err := l.Failed(); err != nil {
		t.Errorf("the lab reports a failed component after StartCAPA cleaned up: %v", err)
	}
	ac := &capav1.AWSCluster{ObjectMeta: metav1.ObjectMeta{Name: "after", Namespace: "default"},
		Spec: capav1.AWSClusterSpec{Region: front.Region()}}
	if err := c.Create(ctx, ac); err != nil {
		t.Errorf("creating an AWSCluster after the failed start: %v", err)
	}
}

func names[T any, P interface {
	*T
	GetName() string
}](items []T) []string {
	out := make([]string, 0, len(items))
	for i := range items {
		out = append(out, P(&items[i]).GetName())
	}
	return out
}

func waitFor(t *testing.T, timeout time.Duration, what string, cond func(ctx context.Context) (bool, error)) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, timeout, true, cond)
	if err != nil {
		t.Fatalf("waiting until %s: %v", what, err)
	}
}
