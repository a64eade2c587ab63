package authorityhook_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/machina-dev/machina/internal/authorityhook"
	"github.com/machina-dev/machina/internal/lab/labtest"
	mmgr "github.com/machina-dev/machina/internal/manager"
	"github.com/machina-dev/machina/internal/scheme"
)

// webhookSvc is how config/default's apiserver reaches the replicas, and the name it checks
// their certificate against.
var webhookSvc = &admissionregistrationv1.ServiceReference{Namespace: "machina-system", Name: "machina-webhook", Port: ptr.To[int32](443)}

const svcName = "machina-webhook.machina-system.svc"

// Two replicas of the manager, with leader election, each serving the webhook, against one
// lab and as the manager's own identity (so with the generated RBAC). A lab has no Service
// routing, so the pieces are tested: through a Service, both replicas serve a certificate the
// registered caBundle verifies, and the registration is put back when deleted or edited; in
// URL mode the registered URL is the leader's and follows the next leader.
func TestWebhookReplicas(t *testing.T) {
	l := labtest.Start(t)
	cfg, err := l.ManagerConfig()
	if err != nil {
		t.Fatal(err)
	}
	admin, err := client.New(l.Config, client.Options{Scheme: scheme.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	t.Run("Service", func(t *testing.T) { testServiceReplicas(t, cfg, admin) })
	t.Run("URL", func(t *testing.T) { testURLReplicas(t, cfg, admin) })
}

func testServiceReplicas(t *testing.T, cfg *rest.Config, admin client.Client) {
	ctx := context.Background()
	a, b := startReplica(t, cfg, "webhook-svc", webhookSvc), startReplica(t, cfg, "webhook-svc", webhookSvc)
	ca := registeredCA(t, admin, nil)
	bothServe(t, ca, []string{svcName, "127.0.0.1"}, a, b)

	if err := admin.Delete(ctx, &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: authorityhook.ConfigurationName}}); err != nil {
		t.Fatal(err)
	}
	if got := registeredCA(t, admin, nil); !bytes.Equal(got, ca) {
		t.Error("the configuration put back after its deletion has another caBundle")
	}

	vwc := getConfiguration(ctx, t, admin)
	vwc.Webhooks[0].FailurePolicy = ptr.To(admissionregistrationv1.Ignore)
	vwc.Webhooks[1].ClientConfig.CABundle = []byte("not a CA")
	if err := admin.Update(ctx, vwc); err != nil {
		t.Fatal(err)
	}
	poll(t, 30*time.Second, "the edited configuration put back", func() (bool, string) {
		vwc := getConfiguration(ctx, t, admin)
		ok := ptr.Deref(vwc.Webhooks[0].FailurePolicy, "") == admissionregistrationv1.Fail &&
			bytes.Equal(vwc.Webhooks[1].ClientConfig.CABundle, ca)
		return ok, fmt.Sprintf("failurePolicy %s, caBundle %.20q", ptr.Deref(vwc.Webhooks[0].FailurePolicy, ""), vwc.Webhooks[1].ClientConfig.CABundle)
	})

	// The CA's Secret deleted: a replica makes a new CA, both serve certificates of it, and
	// it is registered.
	if err := admin.Delete(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "machina-system", Name: authorityhook.CASecretName}}); err != nil {
		t.Fatal(err)
	}
	renewed := registeredCA(t, admin, func(got []byte) bool { return !bytes.Equal(got, ca) })
	bothServe(t, renewed, []string{svcName}, a, b)
	a.stop(t)
	b.stop(t)
}

func testURLReplicas(t *testing.T, cfg *rest.Config, admin client.Client) {
	a, b := startReplica(t, cfg, "webhook-url", nil), startReplica(t, cfg, "webhook-url", nil)
	byAddr := map[string]*replica{a.addr: a, b.addr: b}
	leader := registeredReplica(t, admin, byAddr, "")
	ca := registeredCA(t, admin, nil)
	bothServe(t, ca, []string{"127.0.0.1"}, a, b)
	leader.stop(t)
	next := registeredReplica(t, admin, byAddr, leader.addr)
	if next == leader {
		t.Fatal("the stopped leader's URL is still registered")
	}
	t.Logf("URL moved from the stopped leader %s to %s", leader.addr, next.addr)
}

// replica is one manager process's worth: a manager running the webhook with leader election.
type replica struct {
	addr   string
	cancel context.CancelFunc
	done   chan error
}

func startReplica(t *testing.T, cfg *rest.Config, leaseID string, svc *admissionregistrationv1.ServiceReference) *replica {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	group := mmgr.Group{Name: authorityhook.GroupName, Setup: func(mgr ctrl.Manager, _ mmgr.Env) error {
		return authorityhook.Setup(mgr, authorityhook.Namespaces{MachineAPI: mapiNS, ClusterAPI: capiNS},
			authorityhook.Options{ListenAddr: addr, Service: svc, Recheck: 500 * time.Millisecond})
	}}
	mgr, err := mmgr.New(cfg, mmgr.Options{MetricsAddr: "0", HealthProbeAddr: "0",
		LeaderElection: true, LeaderElectionNamespace: "machina-system", LeaderElectionID: leaseID,
		LeaseDuration: 4 * time.Second, RenewDeadline: 2 * time.Second, RetryPeriod: 500 * time.Millisecond,
		Groups: []mmgr.Group{group}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &replica{addr: addr, cancel: cancel, done: make(chan error, 1)}
	go func() { r.done <- mgr.Start(ctx) }()
	t.Cleanup(func() { r.stop(t) })
	return r
}

// stop stops the replica as a SIGTERM would: it releases its Lease.
func (r *replica) stop(t *testing.T) {
	if r.cancel == nil {
		return
	}
	r.cancel()
	r.cancel = nil
	select {
	case err := <-r.done:
		if err != nil {
			t.Errorf("replica %s: %v", r.addr, err)
		}
	case <-time.After(30 * time.Second):
		t.Errorf("replica %s did not stop within 30s", r.addr)
	}
}

// bothServe: a TLS client that trusts only ca (as the apiserver does with the caBundle)
// completes a handshake with each replica, for each of names the apiserver may check.
func bothServe(t *testing.T, ca []byte, names []string, rs ...*replica) {
	t.Helper()
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(ca) {
		t.Fatalf("the registered caBundle holds no certificate: %q", ca)
	}
	for _, r := range rs {
		poll(t, 30*time.Second, "replica "+r.addr+" serving a certificate of the registered CA", func() (bool, string) {
			err := handshake(r.addr, roots, names)
			return err == nil, fmt.Sprint(err)
		})
	}
}

func handshake(addr string, roots *x509.CertPool, names []string) error {
	d := &net.Dialer{Timeout: 5 * time.Second}
	for _, name := range names {
		conn, err := tls.DialWithDialer(d, "tcp", addr, &tls.Config{RootCAs: roots, ServerName: name, MinVersion: tls.VersionTLS12})
		if err != nil {
			return fmt.Errorf("as %s: %w", name, err)
		}
		_ = conn.Close()
	}
	return nil
}

// registeredCA waits until the configuration exists with one caBundle in all its webhooks that
// accept says is the one wanted (any when nil), and returns it.
func registeredCA(t *testing.T, admin client.Client, accept func([]byte) bool) []byte {
	t.Helper()
	var ca []byte
	poll(t, 30*time.Second, "the configuration registered with one caBundle", func() (bool, string) {
		vwc := &admissionregistrationv1.ValidatingWebhookConfiguration{}
		if err := admin.Get(context.Background(), client.ObjectKey{Name: authorityhook.ConfigurationName}, vwc); err != nil {
			return false, err.Error()
		}
		ca = vwc.Webhooks[0].ClientConfig.CABundle
		for _, w := range vwc.Webhooks {
			if !bytes.Equal(w.ClientConfig.CABundle, ca) {
				return false, "webhooks with different caBundles"
			}
		}
		return len(ca) > 0 && (accept == nil || accept(ca)), fmt.Sprintf("caBundle %.40q", ca)
	})
	return ca
}

// registeredReplica waits until every webhook's URL is that of one of rs other than the one
// at not, and returns it.
func registeredReplica(t *testing.T, admin client.Client, rs map[string]*replica, not string) *replica {
	t.Helper()
	var found *replica
	poll(t, 60*time.Second, "the configuration pointing at a replica other than "+not, func() (bool, string) {
		vwc := getConfiguration(context.Background(), t, admin)
		var hosts []string
		for _, w := range vwc.Webhooks {
			u := ptr.Deref(w.ClientConfig.URL, "")
			host, _, _ := strings.Cut(strings.TrimPrefix(u, "https://"), "/")
			hosts = append(hosts, host)
		}
		found = rs[hosts[0]]
		for _, h := range hosts {
			if h != hosts[0] {
				return false, fmt.Sprintf("URLs of several hosts: %v", hosts)
			}
		}
		return found != nil && hosts[0] != not, fmt.Sprintf("URLs to %v", hosts)
	})
	return found
}

func getConfiguration(ctx context.Context, t *testing.T, admin client.Client) *admissionregistrationv1.ValidatingWebhookConfiguration {
	t.Helper()
	vwc := &admissionregistrationv1.ValidatingWebhookConfiguration{}
	if err := admin.Get(ctx, client.ObjectKey{Name: authorityhook.ConfigurationName}, vwc); err != nil {
		t.Fatalf("ValidatingWebhookConfiguration %s: %v", authorityhook.ConfigurationName, err)
	}
	return vwc
}

// poll checks cond every 100 ms until it holds, failing with what it last said after timeout.
func poll(t *testing.T, timeout time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	var last string
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		ok, desc := cond()
		last = desc
		return ok, nil
	})
	if err != nil {
		t.Fatalf("%s: not within %s (last: %s)", what, timeout, last)
	}
}
