package lab_test

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/machina-dev/machina/internal/lab"
	"github.com/machina-dev/machina/internal/lab/labtest"
)

// TestFaults starts one lab with an audit log and injects every fault the lab offers into
// it, in turn: the audit log itself, a partition through a Proxy, etcd SIGKILLed, etcd's
// history compacted, and the kube-apiserver SIGKILLed.
func TestFaults(t *testing.T) {
	// Go's collector defaults here (the benchmarks' setting), the lab's own in
	// TestEveryKindCreateReadDelete; a restarted API server keeps them.
	l := labtest.Start(t, func(o *lab.Options) { o.AuditLog, o.GoGCDefaults = true, true })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	admin := clientset(t, l.Config)
	someone, err := l.UserConfig("someone", "system:masters")
	if err != nil {
		t.Fatal(err)
	}
	fromKubeconfig, err := clientcmd.BuildConfigFromFlags("", l.KubeconfigPath)
	if err != nil {
		t.Fatal(err)
	}
	var compacted string // a resourceVersion older than the compaction

	t.Run("AuditLog", func(t *testing.T) { testAuditLog(ctx, t, l, clientset(t, someone)) })
	t.Run("ProxyPartition", func(t *testing.T) { testProxyPartition(ctx, t, l, admin) })
	t.Run("RestartEtcd", func(t *testing.T) { testRestartEtcd(ctx, t, l, admin) })
	t.Run("CompactEtcd", func(t *testing.T) { compacted = testCompactEtcd(ctx, t, l, admin) })
	t.Run("RestartAPIServer", func(t *testing.T) {
		testRestartAPIServer(ctx, t, l, []*kubernetes.Clientset{admin, clientset(t, someone), clientset(t, fromKubeconfig)}, compacted)
		checkAPIServerGC(ctx, t, admin, true)
	})
}

func clientset(t *testing.T, cfg *rest.Config) *kubernetes.Clientset {
	t.Helper()
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

func configMap(name string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Data: map[string]string{"k": "v"}}
}

func create(ctx context.Context, t *testing.T, cs *kubernetes.Clientset, name string) *corev1.ConfigMap {
	t.Helper()
	cm, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, configMap(name), metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating ConfigMap %s: %v", name, err)
	}
	return cm
}

// testAuditLog: writes of a user are in the log under that user's name with their codes and
// times; reads are not; the lab's own lease writes are.
func testAuditLog(ctx context.Context, t *testing.T, l *lab.Lab, someone *kubernetes.Clientset) {
	if want := filepath.Join(l.Dir, "logs", "audit.log"); l.AuditLogPath() != want {
		t.Fatalf("AuditLogPath() = %q, want %q", l.AuditLogPath(), want)
	}
	cms := someone.CoreV1().ConfigMaps(ns)
	create(ctx, t, someone, "audited")
	if _, err := cms.Get(ctx, "audited", metav1.GetOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cms.Patch(ctx, "audited", types.MergePatchType, []byte(`{"data":{"k":"w"}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := cms.Delete(ctx, "audited", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	want := map[string]int{"create": 201, "patch": 200, "delete": 200}
	events := waitAudit(t, l, "someone's create, patch and delete of ConfigMap audited", func(e lab.AuditEvent) bool {
		return e.User == "someone" && e.Resource == "configmaps" && e.Name == "audited"
	}, len(want))
	for _, e := range events {
		if e.Namespace != ns || e.APIGroup != "" || e.Subresource != "" || want[e.Verb] != e.Code {
			t.Errorf("audit event %+v: want namespace %s, core group, code %d", e, ns, want[e.Verb])
		}
		if e.Received.IsZero() || e.Completed.Before(e.Received) {
			t.Errorf("audit event %+v: times out of order", e)
		}
	}
	all, err := lab.ReadAudit(l.AuditLogPath())
	if err != nil {
		t.Fatal(err)
	}
	mutating := []string{"create", "update", "patch", "delete", "deletecollection"}
	leases := 0
	for _, e := range all {
		if !slices.Contains(mutating, e.Verb) {
			t.Errorf("audit log records a %s (%+v); want only writes", e.Verb, e)
		}
		if e.Resource == "leases" && e.APIGroup == "coordination.k8s.io" {
			leases++
		}
	}
	if leases == 0 {
		t.Errorf("no lease write among %d audit events (kube-apiserver's identity lease)", len(all))
	}
}

// waitAudit waits until the audit log holds n events matching match, and returns them.
func waitAudit(t *testing.T, l *lab.Lab, what string, match func(lab.AuditEvent) bool, n int) []lab.AuditEvent {
	t.Helper()
	var got []lab.AuditEvent
	eventually(t, what+" in the audit log", func() bool {
		all, err := lab.ReadAudit(l.AuditLogPath())
		if err != nil {
			t.Fatal(err)
		}
		got = slices.DeleteFunc(all, func(e lab.AuditEvent) bool { return !match(e) })
		return len(got) >= n
	})
	return got
}

// testProxyPartition: a client through a Proxy fails while it is cut (Drop, then Stall) and
// works once healed; the write it attempted during the Stall never reaches the apiserver.
func testProxyPartition(ctx context.Context, t *testing.T, l *lab.Lab, admin *kubernetes.Clientset) {
	p, err := lab.NewProxy(strings.TrimPrefix(l.Config.Host, "https://"))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	through := clientset(t, lab.ProxiedConfig(l.Config, p))
	// Reachable within a few tries: the first request after a heal may still go out on the
	// pooled connection the heal closed (a broken pipe); the client dials anew for the next.
	reachable := func(when string) {
		t.Helper()
		var err error
		for range 5 {
			if _, err = through.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{}); err == nil {
				return
			}
			time.Sleep(200 * time.Millisecond)
		}
		t.Fatalf("%s: a GET through the proxy failed 5 times, the last: %v", when, err)
	}
	reachable("before any cut")
	for _, mode := range []lab.CutMode{lab.Drop, lab.Stall} {
		p.Cut(mode)
		name := "through-" + strings.ToLower(mode.String())
		cctx, ccancel := context.WithTimeout(ctx, 2*time.Second)
		_, err := through.CoreV1().ConfigMaps(ns).Create(cctx, configMap(name), metav1.CreateOptions{})
		ccancel()
		if err == nil {
			t.Fatalf("a create through the proxy succeeded during a %s", mode)
		}
		p.Heal()
		reachable("after healing a " + mode.String())
		if _, err := admin.CoreV1().ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("the create attempted during a %s reached the apiserver after the heal: %v", mode, err)
		}
	}
}

// testRestartEtcd: a restart whose port is still taken at first retries until it is free;
// objects written before the etcd SIGKILL are in etcd and served after it, and the apiserver
// takes writes again.
func testRestartEtcd(ctx context.Context, t *testing.T, l *lab.Lab, admin *kubernetes.Clientset) {
	create(ctx, t, admin, "before-etcd-restart")
	attempts := l.HoldPortOnRestart()
	if err := l.RestartEtcd(ctx); err != nil {
		t.Fatal(err)
	}
	if n, err := attempts(); err != nil || n != 2 {
		t.Errorf("RestartEtcd with its port held at first: %d attempts (holding it: %v), want 2", n, err)
	}
	if err := l.Failed(); err != nil {
		t.Fatalf("Failed() after RestartEtcd: %v", err)
	}
	var resp struct {
		Count string `json:"count"`
	}
	key := base64.StdEncoding.EncodeToString([]byte("/registry/configmaps/" + ns + "/before-etcd-restart"))
	if err := lab.EtcdPost(ctx, l.EtcdURL(), "/v3/kv/range", map[string]any{"key": key, "count_only": true}, &resp); err != nil {
		t.Fatal(err)
	}
	if resp.Count != "1" {
		t.Fatalf("etcd holds %q keys for the ConfigMap written before its SIGKILL, want 1", resp.Count)
	}
	if _, err := admin.CoreV1().ConfigMaps(ns).Get(ctx, "before-etcd-restart", metav1.GetOptions{}); err != nil {
		t.Fatalf("the ConfigMap written before the etcd restart: %v", err)
	}
	create(ctx, t, admin, "after-etcd-restart")
}

// testCompactEtcd compacts etcd and returns a resourceVersion older than the compaction: etcd
// refuses a watch from it as compacted, while the apiserver, whose watch cache still holds
// the events, serves it.
func testCompactEtcd(ctx context.Context, t *testing.T, l *lab.Lab, admin *kubernetes.Clientset) string {
	list, err := admin.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	old := list.ResourceVersion
	made := create(ctx, t, admin, "after-the-old-version")
	rev, err := l.CompactEtcd(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if made, _ := strconv.ParseInt(made.ResourceVersion, 10, 64); rev < made {
		t.Fatalf("CompactEtcd compacted to revision %d, before the last write's %d", rev, made)
	}
	oldRev, _ := strconv.ParseInt(old, 10, 64)
	if got := etcdWatchCompacted(ctx, t, l.EtcdURL(), "/registry/configmaps/", oldRev); got < rev {
		t.Errorf("etcd's watch from revision %d reported compaction at %d, want at least %d", oldRev, got, rev)
	}
	w, err := admin.CoreV1().ConfigMaps(ns).Watch(ctx, metav1.ListOptions{ResourceVersion: old})
	if err != nil {
		t.Fatalf("the apiserver refused a watch from %s, still in its watch cache: %v", old, err)
	}
	defer w.Stop()
	if ev := nextEvent(t, w); ev.Type != watch.Added || ev.Object.(*corev1.ConfigMap).Name != made.Name {
		t.Fatalf("the watch from %s first gave %s %v, want the ADDED of %s from the watch cache", old, ev.Type, ev.Object, made.Name)
	}
	return old
}

// etcdWatchCompacted watches prefix on etcd from rev through its gateway and returns the
// compaction revision etcd cancels the watch with; it fails the test if etcd does not.
func etcdWatchCompacted(ctx context.Context, t *testing.T, etcdURL, prefix string, rev int64) int64 {
	t.Helper()
	end := []byte(prefix)
	end[len(end)-1]++
	body := fmt.Sprintf(`{"create_request":{"key":%q,"range_end":%q,"start_revision":%d}}`,
		base64.StdEncoding.EncodeToString([]byte(prefix)), base64.StdEncoding.EncodeToString(end), rev)
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(wctx, http.MethodPost, etcdURL+"/v3/watch", strings.NewReader(body))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("etcd watch: %v", err)
	}
	defer resp.Body.Close()
	dec := json.NewDecoder(bufio.NewReader(resp.Body))
	for {
		var msg struct {
			Result struct {
				Canceled        bool   `json:"canceled"`
				CompactRevision string `json:"compact_revision"`
				CancelReason    string `json:"cancel_reason"`
			} `json:"result"`
		}
		if err := dec.Decode(&msg); err != nil {
			t.Fatalf("etcd's watch from revision %d was not cancelled as compacted: %v", rev, err)
		}
		if msg.Result.CompactRevision != "" && msg.Result.CompactRevision != "0" {
			got, _ := strconv.ParseInt(msg.Result.CompactRevision, 10, 64)
			return got
		}
	}
}

func nextEvent(t *testing.T, w watch.Interface) watch.Event {
	t.Helper()
	select {
	case ev, ok := <-w.ResultChan():
		if !ok {
			t.Fatal("the watch ended without an event")
		}
		return ev
	case <-time.After(10 * time.Second):
		t.Fatal("no watch event in 10 s")
	}
	return watch.Event{}
}

// testRestartAPIServer: after a SIGKILL and restart of the kube-apiserver, clients made
// before it (admin, a user's, the kubeconfig's) work, Failed reports nothing, objects are
// there, the audit log goes on, and a watch from before the compaction gets 410 Gone.
func testRestartAPIServer(ctx context.Context, t *testing.T, l *lab.Lab, clients []*kubernetes.Clientset, compacted string) {
	admin := clients[0]
	create(ctx, t, admin, "before-apiserver-restart")
	before := l.PIDs()
	if err := l.RestartAPIServer(ctx); err != nil {
		t.Fatal(err)
	}
	if err := l.Failed(); err != nil {
		t.Fatalf("Failed() after RestartAPIServer: %v", err)
	}
	if after := l.PIDs(); len(after) != len(before) || slices.Equal(after, before) {
		t.Errorf("PIDs %v before the restart, %v after: want as many, one new", before, after)
	}
	for i, cs := range clients {
		if _, err := cs.CoreV1().ConfigMaps(ns).Get(ctx, "before-apiserver-restart", metav1.GetOptions{}); err != nil {
			t.Errorf("client %d made before the restart: %v", i, err)
		}
	}
	create(ctx, t, clients[1], "after-apiserver-restart")
	waitAudit(t, l, "the create after the restart", func(e lab.AuditEvent) bool {
		return e.User == "someone" && e.Verb == "create" && e.Name == "after-apiserver-restart"
	}, 1)
	if compacted == "" {
		t.Skip("CompactEtcd gave no resourceVersion to watch from")
	}
	w, err := admin.CoreV1().ConfigMaps(ns).Watch(ctx, metav1.ListOptions{ResourceVersion: compacted})
	if err == nil {
		defer w.Stop()
		ev := nextEvent(t, w)
		status, ok := ev.Object.(*metav1.Status)
		if ev.Type != watch.Error || !ok {
			t.Fatalf("a watch from %s (compacted) gave %s %v, want 410 Gone", compacted, ev.Type, ev.Object)
		}
		err = apierrors.FromObject(status)
	}
	if !apierrors.IsResourceExpired(err) && !apierrors.IsGone(err) {
		t.Fatalf("a watch from %s (compacted) after the restart: %v, want 410 Gone", compacted, err)
	}
}

// TestReadAuditPartialLine: a half-written last line is skipped, a malformed earlier one is
// an error.
func TestReadAuditPartialLine(t *testing.T) {
	line := `{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"Metadata","stage":"ResponseComplete","verb":"update",` +
		`"user":{"username":"someone","groups":["system:masters"]},"objectRef":{"resource":"leases","namespace":"kube-system",` +
		`"name":"l","apiGroup":"coordination.k8s.io","apiVersion":"v1"},"responseStatus":{"metadata":{},"code":200},` +
		`"requestReceivedTimestamp":"2026-01-02T03:04:05.123456Z","stageTimestamp":"2026-01-02T03:04:05.223456Z"}`
	path := filepath.Join(t.TempDir(), "audit.log")
	if err := os.WriteFile(path, []byte(line+"\n"+line[:len(line)/2]), 0o600); err != nil {
		t.Fatal(err)
	}
	events, err := lab.ReadAudit(path)
	if err != nil {
		t.Fatal(err)
	}
	want := lab.AuditEvent{Verb: "update", User: "someone", Groups: []string{"system:masters"}, Resource: "leases", Namespace: "kube-system", Name: "l",
		APIGroup: "coordination.k8s.io", Code: 200,
		Received:  time.Date(2026, 1, 2, 3, 4, 5, 123456000, time.UTC),
		Completed: time.Date(2026, 1, 2, 3, 4, 5, 223456000, time.UTC)}
	if len(events) != 1 || !reflect.DeepEqual(events[0], want) {
		t.Fatalf("ReadAudit = %+v, want [%+v]", events, want)
	}
	if err := os.WriteFile(path, []byte(line[:10]+"\n"+line+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := lab.ReadAudit(path); err == nil || !strings.Contains(err.Error(), "line 1") {
		t.Fatalf("ReadAudit of a malformed first line: %v, want an error naming line 1", err)
	}
}
