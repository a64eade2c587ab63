package manager_test

import (
	"context"
	"crypto/tls"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/machina-dev/machina/internal/lab/labtest"
	mmgr "github.com/machina-dev/machina/internal/manager"
)

// The manager's metrics endpoint, as installed: HTTPS only (TLS 1.2 or newer), every caller
// authenticated by the lab's real apiserver (TokenReview of a ServiceAccount token from the
// TokenRequest API) and authorized by it (SubjectAccessReview for "get" on the path). The
// manager runs as its ServiceAccount with only the generated roles, so this also proves
// config/rbac grants it the reviews.
func TestMetricsNeedAuthorizedToken(t *testing.T) {
	l := labtest.Start(t)
	ctx := context.Background()
	cs := kubernetes.NewForConfigOrDie(l.Config)
	admin, err := client.New(l.Config, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	const ns = "metrics-test"
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	tokens := map[string]string{}
	for sa, role := range map[string]string{"scraper": "machina-metrics-reader", "profiler": "machina-profiler", "stranger": ""} {
		tokens[sa] = serviceAccountToken(t, cs, ns, sa)
		if role != "" {
			bindClusterRole(t, admin, ns, sa, role)
		}
	}
	waitAllowed(t, admin, "system:serviceaccount:"+ns+":scraper", "/metrics")
	waitAllowed(t, admin, "system:serviceaccount:"+ns+":profiler", "/debug/pprof/heap")

	cfg, err := l.ManagerConfig()
	if err != nil {
		t.Fatal(err)
	}
	addr := freeAddr(t)
	mgr, err := mmgr.New(cfg, mmgr.Options{MetricsAddr: addr, Pprof: true, HealthProbeAddr: "0"})
	if err != nil {
		t.Fatal(err)
	}
	mctx, cancel := context.WithCancel(ctx)
	errc := make(chan error, 1)
	go func() { errc <- mgr.Start(mctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-errc; err != nil {
			t.Errorf("manager exit: %v", err)
		}
	})

	// The certificate is self-signed (no --metrics-cert-dir); what is checked here is who
	// may read, not the certificate's chain.
	httpsClient := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS12}}}
	base := "https://" + addr
	waitServing(t, httpsClient, base+"/metrics")

	for _, tc := range []struct {
		who, path string
		want      int
		body      string
	}{
		{"", "/metrics", http.StatusUnauthorized, "Unauthorized"},
		{"stranger", "/metrics", http.StatusForbidden, "Authorization denied"},
		{"scraper", "/metrics", http.StatusOK, "controller_runtime_"},
		{"scraper", "/debug/pprof/heap", http.StatusForbidden, "Authorization denied"},
		{"profiler", "/debug/pprof/heap", http.StatusOK, ""},
		{"profiler", "/metrics", http.StatusForbidden, "Authorization denied"},
	} {
		code, body := request(t, httpsClient, base+tc.path, tokens[tc.who])
		if code != tc.want || !strings.Contains(body, tc.body) {
			t.Errorf("%q GET %s: %d %.200q, want %d with %q", tc.who, tc.path, code, body, tc.want, tc.body)
		}
	}

	// Plain HTTP on the same port gets no metrics, even with a good token: the server answers
	// 400 or drops the connection.
	plain, err := http.NewRequest(http.MethodGet, "http://"+addr+"/metrics", nil)
	if err != nil {
		t.Fatal(err)
	}
	plain.Header.Set("Authorization", "Bearer "+tokens["scraper"])
	if resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(plain); err == nil {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest || strings.Contains(string(b), "controller_runtime_") {
			t.Errorf("plain HTTP: %d %.200q, want 400 without metrics", resp.StatusCode, b)
		}
	}
	// Neither does TLS older than 1.2.
	old := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS10, MaxVersion: tls.VersionTLS11}}}
	if resp, err := old.Get(base + "/metrics"); err == nil {
		resp.Body.Close()
		t.Errorf("a TLS 1.1 client was served: %s", resp.Status)
	}
}

func serviceAccountToken(t *testing.T, cs kubernetes.Interface, ns, name string) string {
	t.Helper()
	ctx := context.Background()
	if _, err := cs.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	tr, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, name, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: new(int64(3600))}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("TokenRequest for %s/%s: %v", ns, name, err)
	}
	return tr.Status.Token
}

func bindClusterRole(t *testing.T, c client.Client, ns, sa, role string) {
	t.Helper()
	b := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: ns + "-" + sa},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: sa, Namespace: ns}}}
	if err := c.Create(context.Background(), b); err != nil {
		t.Fatal(err)
	}
}

// waitAllowed waits until the apiserver's authorizer sees a new binding, so the manager's
// authorizer never caches an early denial.
func waitAllowed(t *testing.T, c client.Client, user, path string) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{User: user,
			Groups:                []string{"system:serviceaccounts", "system:authenticated"},
			NonResourceAttributes: &authorizationv1.NonResourceAttributes{Path: path, Verb: "get"}}}
		if err := c.Create(ctx, sar); err != nil {
			return false, err
		}
		return sar.Status.Allowed, nil
	})
	if err != nil {
		t.Fatalf("%s never allowed to get %s: %v", user, path, err)
	}
}

// waitServing waits until the endpoint answers at all (any status).
func waitServing(t *testing.T, c *http.Client, url string) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, 60*time.Second, true, func(context.Context) (bool, error) {
		resp, err := c.Get(url)
		if err != nil {
			return false, nil
		}
		resp.Body.Close()
		return true, nil
	})
	if err != nil {
		t.Fatalf("%s never answered: %v", url, err)
	}
}

func request(t *testing.T, c *http.Client, url, token string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}
