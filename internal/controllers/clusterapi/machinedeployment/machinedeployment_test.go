package machinedeployment_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/machina-dev/machina/api/infrastructure/v1alpha1"
	"github.com/machina-dev/machina/internal/cloud/server"
	"github.com/machina-dev/machina/internal/controllers/clusterapi"
	ct "github.com/machina-dev/machina/internal/controllers/clusterapi/internal/capitest"
	"github.com/machina-dev/machina/internal/controllers/sim"
	"github.com/machina-dev/machina/internal/scheme"
	"github.com/machina-dev/machina/internal/testenv"
)

var env *testenv.Env

// One lab for every MachineDeployment behaviour; each subtest has its own MachineDeployment.
func TestMachineDeployment(t *testing.T) {
	env = testenv.Start(t, testenv.Options{Groups: clusterapi.GroupName + "," + sim.GroupName,
		Delays: server.Delays{Pending: 200 * time.Millisecond, ShuttingDown: 200 * time.Millisecond}})
	ct.SetupCluster(t, env)
	ct.NewTemplate(t, env, "small", "s1.small")
	ct.NewTemplate(t, env, "medium", "s1.medium")
	ct.NewTemplate(t, env, "small-b", "s1.small")

	t.Run("CreateScaleStatusAndPrinterColumns", testCreateAndScale)
	t.Run("RollingUpdateWithinSurgeAndUnavailable", testRollingUpdate)
	t.Run("ScaleDuringRollout", testScaleDuringRollout)
	t.Run("OnDelete", testOnDelete)
	t.Run("PauseAndResume", testPause)
	t.Run("RolloutAfter", testRolloutAfter)
	t.Run("RollbackByRevertingTheTemplate", testRollback)
	t.Run("InPlacePropagation", testInPlace)
	t.Run("Remediating", testRemediating)
	t.Run("ProvisioningLimit", testProvisioningLimit)
	t.Run("DeletionDeletesMachineSets", testDeletion)
}

// newMD builds (does not create) a MachineDeployment of the Cluster selecting md=name whose
// Machines clone the template.
func newMD(name string, replicas int32, template string) *clusterv1.MachineDeployment {
	labels := map[string]string{"md": name}
	return &clusterv1.MachineDeployment{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ct.NS},
		Spec: clusterv1.MachineDeploymentSpec{ClusterName: ct.Cluster, Replicas: ptr.To(replicas),
			Selector: metav1.LabelSelector{MatchLabels: labels},
			Template: clusterv1.MachineTemplateSpec{ObjectMeta: clusterv1.ObjectMeta{Labels: labels},
				Spec: clusterv1.MachineSpec{ClusterName: ct.Cluster, FailureDomain: "sim-east-1a",
					Bootstrap: clusterv1.Bootstrap{DataSecretName: ptr.To(ct.BootstrapData)},
					InfrastructureRef: clusterv1.ContractVersionedObjectReference{APIGroup: infrav1.GroupVersion.Group,
						Kind: "SimMachineTemplate", Name: template}}}}}
}

// rolling sets the RollingUpdate strategy.
func rolling(md *clusterv1.MachineDeployment, surge, unavailable intstr.IntOrString) {
	md.Spec.Rollout.Strategy = clusterv1.MachineDeploymentRolloutStrategy{Type: clusterv1.RollingUpdateMachineDeploymentStrategyType,
		RollingUpdate: clusterv1.MachineDeploymentRolloutStrategyRollingUpdate{MaxSurge: &surge, MaxUnavailable: &unavailable}}
}

func create(t *testing.T, e *testenv.Env, obj client.Object) {
	t.Helper()
	if err := e.Client.Create(context.Background(), obj); err != nil {
		t.Fatal(err)
	}
}

// describe formats a MachineDeployment's status for failure messages.
func describe(md *clusterv1.MachineDeployment) string {
	s := md.Status
	return fmt.Sprintf("gen %d/%d replicas %d ready %d available %d upToDate %d rev %s %s", s.ObservedGeneration, md.Generation,
		ptr.Deref(s.Replicas, -1), ptr.Deref(s.ReadyReplicas, -1), ptr.Deref(s.AvailableReplicas, -1), ptr.Deref(s.UpToDateReplicas, -1),
		md.Annotations[clusterv1.RevisionAnnotation], ct.Conds(s.Conditions))
}

// waitMD waits until the MachineDeployment satisfies ok.
func waitMD(t *testing.T, e *testenv.Env, md *clusterv1.MachineDeployment, what string, ok func(*clusterv1.MachineDeployment) bool) *clusterv1.MachineDeployment {
	t.Helper()
	got := &clusterv1.MachineDeployment{}
	e.Eventually(3*time.Minute, "MachineDeployment "+md.Name+": "+what, func(ctx context.Context) (bool, string, error) {
		if err := e.Client.Get(ctx, client.ObjectKeyFromObject(md), got); err != nil {
			return false, err.Error(), nil
		}
		return ok(got), describe(got), nil
	})
	return got
}

// settled: the status is of the current generation and every one of spec.replicas Machines
// is Ready, Available and up to date, with no other Machine left.
func settled(md *clusterv1.MachineDeployment) bool {
	s, n := md.Status, ptr.Deref(md.Spec.Replicas, 0)
	return s.ObservedGeneration == md.Generation && ptr.Deref(s.Replicas, -1) == n && ptr.Deref(s.ReadyReplicas, -1) == n &&
		ptr.Deref(s.AvailableReplicas, -1) == n && ptr.Deref(s.UpToDateReplicas, -1) == n &&
		meta.IsStatusConditionFalse(s.Conditions, clusterv1.MachineDeploymentRollingOutCondition)
}

func waitSettled(t *testing.T, e *testenv.Env, md *clusterv1.MachineDeployment) *clusterv1.MachineDeployment {
	t.Helper()
	return waitMD(t, e, md, "settled", settled)
}

// sets lists the MachineSets the MachineDeployment controls, by name.
func sets(t *testing.T, e *testenv.Env, md *clusterv1.MachineDeployment) []clusterv1.MachineSet {
	t.Helper()
	var list clusterv1.MachineSetList
	if err := e.Client.List(context.Background(), &list, client.InNamespace(ct.NS)); err != nil {
		t.Fatal(err)
	}
	var out []clusterv1.MachineSet
	for _, ms := range list.Items {
		if ref := metav1.GetControllerOf(&ms); ref != nil && ref.Kind == "MachineDeployment" && ref.Name == md.Name {
			out = append(out, ms)
		}
	}
	return out
}

// onlySet returns the MachineDeployment's one MachineSet, failing when it has another number.
func onlySet(t *testing.T, e *testenv.Env, md *clusterv1.MachineDeployment) clusterv1.MachineSet {
	t.Helper()
	got := sets(t, e, md)
	if len(got) != 1 {
		t.Fatalf("MachineDeployment %s has %d MachineSets, want 1: %v", md.Name, len(got), setNames(got))
	}
	return got[0]
}

// waitOneSet waits until the MachineDeployment has a single MachineSet (old ones deleted).
func waitOneSet(t *testing.T, e *testenv.Env, md *clusterv1.MachineDeployment) clusterv1.MachineSet {
	t.Helper()
	var out clusterv1.MachineSet
	e.Eventually(time.Minute, md.Name+": old MachineSets deleted", func(context.Context) (bool, string, error) {
		got := sets(t, e, md)
		if len(got) == 1 {
			out = got[0]
		}
		return len(got) == 1, fmt.Sprint(setNames(got)), nil
	})
	return out
}

func setNames(s []clusterv1.MachineSet) []string {
	var out []string
	for _, ms := range s {
		out = append(out, ms.Name+"@"+ms.Annotations[clusterv1.RevisionAnnotation])
	}
	return out
}

// machines lists the MachineDeployment's Machines (by the deployment-name label).
func machines(t *testing.T, e *testenv.Env, md *clusterv1.MachineDeployment) []clusterv1.Machine {
	t.Helper()
	var list clusterv1.MachineList
	if err := e.Client.List(context.Background(), &list, client.InNamespace(ct.NS),
		client.MatchingLabels{clusterv1.MachineDeploymentNameLabel: md.Name}); err != nil {
		t.Fatal(err)
	}
	return list.Items
}

// uids maps the Machines' names to their UIDs.
func uids(ms []clusterv1.Machine) map[string]string {
	out := map[string]string{}
	for _, m := range ms {
		out[m.Name] = string(m.UID)
	}
	return out
}

// clonedFrom checks every Machine's SimMachine was cloned from template.
func clonedFrom(t *testing.T, e *testenv.Env, ms []clusterv1.Machine, template string) {
	t.Helper()
	for _, m := range ms {
		sm := &infrav1.SimMachine{}
		if err := e.Client.Get(context.Background(), client.ObjectKey{Namespace: ct.NS, Name: m.Spec.InfrastructureRef.Name}, sm); err != nil {
			t.Fatal(err)
		}
		if got := sm.Annotations[clusterv1.TemplateClonedFromNameAnnotation]; got != template {
			t.Errorf("Machine %s cloned from %q, want %q", m.Name, got, template)
		}
	}
}

// patchMD applies mutate to the MachineDeployment as a user would.
func patchMD(t *testing.T, e *testenv.Env, md *clusterv1.MachineDeployment, mutate func(*clusterv1.MachineDeployment)) {
	t.Helper()
	ct.Patch(t, e, md, mutate)
}

// managerClient acts with the manager's identity: an admission policy keeps users from
// removing a paused annotation.
func managerClient(t *testing.T, e *testenv.Env) client.Client {
	t.Helper()
	cfg, err := e.Lab.ManagerConfig()
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// observer watches a MachineDeployment's Machines and records every moment the rolling
// update bounds are broken: more Machines (being deleted included) than maxTotal, or fewer
// Available Machines not being deleted than minAvailable.
type observer struct {
	mu         sync.Mutex
	state      map[string]clusterv1.Machine
	violations []string
	maxTotal   int
	minAvail   int
	peak       int
	stop       context.CancelFunc
	done       chan struct{}
}

func observe(t *testing.T, e *testenv.Env, md *clusterv1.MachineDeployment, maxTotal, minAvail int) *observer {
	t.Helper()
	wc, err := client.NewWithWatch(e.Lab.Config, client.Options{Scheme: scheme.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	o := &observer{state: map[string]clusterv1.Machine{}, maxTotal: maxTotal, minAvail: minAvail, stop: cancel, done: make(chan struct{})}
	sel := client.MatchingLabels{clusterv1.MachineDeploymentNameLabel: md.Name}
	var list clusterv1.MachineList
	if err := wc.List(ctx, &list, client.InNamespace(ct.NS), sel); err != nil {
		t.Fatal(err)
	}
	for _, m := range list.Items {
		o.state[m.Name] = m
	}
	o.check("initial list")
	go o.run(ctx, wc, sel, list.ResourceVersion)
	return o
}

func (o *observer) run(ctx context.Context, wc client.WithWatch, sel client.MatchingLabels, rv string) {
	defer close(o.done)
	for ctx.Err() == nil {
		var list clusterv1.MachineList
		w, err := wc.Watch(ctx, &list, client.InNamespace(ct.NS), sel, &client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: rv}})
		if err != nil {
			o.record(fmt.Sprintf("watch: %v", err))
			return
		}
		for ev := range w.ResultChan() {
			m, ok := ev.Object.(*clusterv1.Machine)
			if !ok {
				continue
			}
			rv = m.ResourceVersion
			o.mu.Lock()
			if ev.Type == watch.Deleted {
				delete(o.state, m.Name)
			} else {
				o.state[m.Name] = *m
			}
			o.mu.Unlock()
			o.check(fmt.Sprintf("%s %s", ev.Type, m.Name))
		}
		w.Stop()
	}
}

func (o *observer) record(v string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.violations = append(o.violations, v)
}

func (o *observer) check(after string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	avail := 0
	var why []string
	for _, m := range o.state {
		switch {
		case !m.DeletionTimestamp.IsZero():
			why = append(why, m.Name+" deleting")
		case meta.IsStatusConditionTrue(m.Status.Conditions, clusterv1.MachineAvailableCondition):
			avail++
		default:
			why = append(why, m.Name+" "+ct.Condition(m.Status.Conditions, clusterv1.MachineReadyCondition))
		}
	}
	o.peak = max(o.peak, len(o.state))
	if len(o.state) > o.maxTotal || avail < o.minAvail {
		o.violations = append(o.violations, fmt.Sprintf("after %s: %d Machines (at most %d), %d available (at least %d) %v",
			after, len(o.state), o.maxTotal, avail, o.minAvail, why))
	}
}

// finish stops the observer and fails the test on any violation.
func (o *observer) finish(t *testing.T) {
	t.Helper()
	o.stop()
	<-o.done
	o.mu.Lock()
	defer o.mu.Unlock()
	if len(o.violations) > 0 {
		t.Errorf("rolling update bounds broken %d time(s): %s", len(o.violations), strings.Join(o.violations[:min(5, len(o.violations))], "; "))
	}
	t.Logf("peak %d Machines (bound %d)", o.peak, o.maxTotal)
}

// table reads `kubectl get machinedeployments` as the API server prints it.
func table(t *testing.T, e *testenv.Env) *metav1.Table {
	t.Helper()
	hc, err := rest.HTTPClientFor(e.Lab.Config)
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequestWithContext(context.Background(), http.MethodGet,
		e.Lab.Config.Host+"/apis/cluster.x-k8s.io/v1beta2/namespaces/"+ct.NS+"/machinedeployments", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io")
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("table: %d %s %v", resp.StatusCode, body, err)
	}
	tb := &metav1.Table{}
	if err := json.Unmarshal(body, tb); err != nil {
		t.Fatal(err)
	}
	return tb
}

// row returns the printed cells of one MachineDeployment as strings, by column position.
func row(t *testing.T, e *testenv.Env, name string) (cols, cells []string) {
	t.Helper()
	tb := table(t, e)
	for _, c := range tb.ColumnDefinitions {
		cols = append(cols, c.Name)
	}
	for _, r := range tb.Rows {
		if len(r.Cells) > 0 && fmt.Sprint(r.Cells[0]) == name {
			for _, c := range r.Cells {
				cells = append(cells, fmt.Sprint(c))
			}
			return cols, cells
		}
	}
	t.Fatalf("no row for %s in %v", name, tb.Rows)
	return nil, nil
}

func hasReason(md *clusterv1.MachineDeployment, tp string, status metav1.ConditionStatus, reason string) bool {
	c := meta.FindStatusCondition(md.Status.Conditions, tp)
	return c != nil && c.Status == status && c.Reason == reason
}

func containsAll(have []string, want ...string) bool {
	for _, w := range want {
		if !slices.Contains(have, w) {
			return false
		}
	}
	return true
}
