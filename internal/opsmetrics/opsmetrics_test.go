package opsmetrics

import (
	"context"
	"errors"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/machina-dev/machina/internal/authority"
	"github.com/machina-dev/machina/internal/scheme"
)

const mapiNS, capiNS = "openshift-machine-api", "openshift-cluster-api"

func mapiMachine(name, phase string, spec, status machinev1beta1.MachineAuthority, synced corev1.ConditionStatus) *machinev1beta1.Machine {
	m := &machinev1beta1.Machine{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: mapiNS}}
	m.Spec.AuthoritativeAPI = spec
	m.Status.AuthoritativeAPI = status
	if phase != "" {
		m.Status.Phase = ptr.To(phase)
	}
	if synced != "" {
		m.Status.Conditions = []machinev1beta1.Condition{{Type: authority.SynchronizedCondition, Status: synced, Reason: map[corev1.ConditionStatus]string{
			corev1.ConditionTrue: "ResourceSynchronized", corev1.ConditionFalse: "ConversionFailed"}[synced]}}
	}
	return m
}

func capiMachine(name, phase string) *clusterv1.Machine {
	m := &clusterv1.Machine{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: capiNS}}
	m.Status.Phase = phase
	return m
}

// A pure unit: the collector's arithmetic over a fixed set of objects.
func TestCollector(t *testing.T) {
	objs := []client.Object{
		mapiMachine("a", "Running", machinev1beta1.MachineAuthorityMachineAPI, machinev1beta1.MachineAuthorityMachineAPI, corev1.ConditionTrue),
		mapiMachine("b", "Running", machinev1beta1.MachineAuthorityClusterAPI, machinev1beta1.MachineAuthorityMachineAPI, corev1.ConditionTrue),
		mapiMachine("c", "Provisioning", machinev1beta1.MachineAuthorityClusterAPI, machinev1beta1.MachineAuthorityClusterAPI, corev1.ConditionTrue),
		mapiMachine("d", "", "", "", corev1.ConditionFalse),
		capiMachine("a", "Running"), capiMachine("c", "Provisioning"), capiMachine("cp-0", "Running"),
		&machinev1beta1.MachineSet{ObjectMeta: metav1.ObjectMeta{Name: "s", Namespace: mapiNS},
			Spec:   machinev1beta1.MachineSetSpec{AuthoritativeAPI: machinev1beta1.MachineAuthorityClusterAPI},
			Status: machinev1beta1.MachineSetStatus{AuthoritativeAPI: machinev1beta1.MachineAuthorityMachineAPI}},
		&machinev1beta1.MachineHealthCheck{ObjectMeta: metav1.ObjectMeta{Name: "h", Namespace: mapiNS,
			Annotations: map[string]string{authority.MHCAuthoritativeAPIAnnotation: "MachineAPI"}}},
		// Objects in other namespaces are not counted.
		&machinev1beta1.Machine{ObjectMeta: metav1.ObjectMeta{Name: "elsewhere", Namespace: "default"}},
	}
	c := fake.NewClientBuilder().WithScheme(scheme.Scheme).WithObjects(objs...).Build()
	col := &collector{src: &Source{Reader: c, MachineAPINamespace: mapiNS, ClusterAPINamespace: capiNS}}
	want := `
# HELP machina_machines Machines by API (machine.openshift.io or cluster.x-k8s.io), phase and authoritative API. A Cluster API Machine's authority is its Machine API mirror's; one without a mirror counts as ClusterAPI.
# TYPE machina_machines gauge
machina_machines{api="cluster.x-k8s.io",authority="ClusterAPI",phase="Provisioning"} 1
machina_machines{api="cluster.x-k8s.io",authority="ClusterAPI",phase="Running"} 1
machina_machines{api="cluster.x-k8s.io",authority="MachineAPI",phase="Running"} 1
machina_machines{api="machine.openshift.io",authority="ClusterAPI",phase="Provisioning"} 1
machina_machines{api="machine.openshift.io",authority="MachineAPI",phase="Running"} 2
machina_machines{api="machine.openshift.io",authority="Undecided",phase="None"} 1
# HELP machina_migrations_pending Machine API resources whose requested authority (spec.authoritativeAPI) differs from their current one, by kind.
# TYPE machina_migrations_pending gauge
machina_migrations_pending{kind="Machine"} 1
machina_migrations_pending{kind="MachineHealthCheck"} 0
machina_migrations_pending{kind="MachineSet"} 1
# HELP machina_sync_not_synchronized Machine API resources whose Synchronized condition is False, by kind and reason (for example ConversionFailed).
# TYPE machina_sync_not_synchronized gauge
machina_sync_not_synchronized{kind="Machine",reason="ConversionFailed"} 1
`
	if err := testutil.CollectAndCompare(col, strings.NewReader(want), "machina_machines", "machina_migrations_pending", "machina_sync_not_synchronized"); err != nil {
		t.Fatal(err)
	}
}

// The collector is in controller-runtime's registry exactly while its manager runs, so
// managers started one after another in a process (tests, restarts) each export their own.
func TestCollectorRegisteredWhileRunning(t *testing.T) {
	exported := func() bool {
		mfs, err := metrics.Registry.Gather()
		if err != nil {
			t.Fatal(err)
		}
		return slices.ContainsFunc(mfs, func(mf *dto.MetricFamily) bool { return mf.GetName() == "machina_opsmetrics_list_errors" })
	}
	c := fake.NewClientBuilder().WithScheme(scheme.Scheme).Build()
	for round := range 2 {
		col := &collector{src: &Source{Reader: c, MachineAPINamespace: mapiNS, ClusterAPINamespace: capiNS}}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- col.Start(ctx) }()
		if err := wait.PollUntilContextTimeout(context.Background(), 10*time.Millisecond, 10*time.Second, true,
			func(context.Context) (bool, error) { return exported(), nil }); err != nil {
			t.Fatalf("round %d: not exported while running", round)
		}
		cancel()
		if err := <-done; err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		if exported() {
			t.Fatalf("round %d: still exported after its manager stopped", round)
		}
	}
}

func capiMachineSet(name, cluster string, paused bool) *clusterv1.MachineSet {
	s := &clusterv1.MachineSet{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: capiNS}}
	s.Spec.ClusterName = cluster
	if paused {
		s.Annotations = map[string]string{clusterv1.PausedAnnotation: ""}
	}
	return s
}

func mapiMachineSet(name string, status machinev1beta1.MachineAuthority) *machinev1beta1.MachineSet {
	return &machinev1beta1.MachineSet{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: mapiNS},
		Status: machinev1beta1.MachineSetStatus{AuthoritativeAPI: status}}
}

// A pair counts as both active only when the Machine API copy's status says MachineAPI and
// the Cluster API copy is paused neither by its annotation nor by its Cluster.
func TestBothActive(t *testing.T) {
	mapi, capi := machinev1beta1.MachineAuthorityMachineAPI, machinev1beta1.MachineAuthorityClusterAPI
	migrating := machinev1beta1.MachineAuthorityMigrating
	pausedMirror := func(m *clusterv1.Machine) *clusterv1.Machine {
		m.Annotations = map[string]string{clusterv1.PausedAnnotation: ""}
		return m
	}
	inCluster := func(m *clusterv1.Machine, cluster string) *clusterv1.Machine {
		m.Spec.ClusterName = cluster
		return m
	}
	objs := []client.Object{
		&clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: "live", Namespace: capiNS}},
		&clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: "frozen", Namespace: capiNS}, Spec: clusterv1.ClusterSpec{Paused: ptr.To(true)}},
		// Both active: the Machine API owns it and its mirror is not paused.
		mapiMachine("both", "Running", mapi, mapi, ""), inCluster(capiMachine("both", "Running"), "live"),
		// Healthy: the mirror is paused by its annotation, or by its Cluster.
		mapiMachine("mirror", "Running", mapi, mapi, ""), pausedMirror(capiMachine("mirror", "Running")),
		mapiMachine("frozen", "Running", mapi, mapi, ""), inCluster(capiMachine("frozen", "Running"), "frozen"),
		// Healthy: the Cluster API owns it, or it is mid-handover (both gates closed on the
		// Machine API side).
		mapiMachine("capi", "Running", capi, capi, ""), capiMachine("capi", "Running"),
		mapiMachine("moving", "Running", capi, migrating, ""), capiMachine("moving", "Running"),
		// Healthy: no mirror on either side.
		mapiMachine("alone", "Running", mapi, mapi, ""), capiMachine("cp-0", "Running"),
		mapiMachineSet("both", mapi), capiMachineSet("both", "live", false),
		mapiMachineSet("mirror", mapi), capiMachineSet("mirror", "live", true),
		mapiMachineSet("capi", capi), capiMachineSet("capi", "live", false),
		mapiMachineSet("frozen", mapi), capiMachineSet("frozen", "frozen", false),
	}
	c := fake.NewClientBuilder().WithScheme(scheme.Scheme).WithObjects(objs...).Build()
	if got, want := bothActive(t, c), map[string]float64{"Machine": 1, "MachineSet": 1}; !maps.Equal(got, want) {
		t.Errorf("machina_authority_both_active = %v, want %v", got, want)
	}
}

// Healthy pairs still export a 0 per kind, so an alert on the gauge tells "none" from
// "not measured"; a kind whose copies could not all be listed is left out.
func TestBothActiveZeroWhenHealthy(t *testing.T) {
	c := fake.NewClientBuilder().WithScheme(scheme.Scheme).Build()
	if got, want := bothActive(t, c), map[string]float64{"Machine": 0, "MachineSet": 0}; !maps.Equal(got, want) {
		t.Errorf("machina_authority_both_active = %v, want %v", got, want)
	}
	failing := interceptor.NewClient(c, interceptor.Funcs{List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
		if _, sets := list.(*clusterv1.MachineSetList); sets {
			return errors.New("no MachineSet CRD")
		}
		return c.List(ctx, list, opts...)
	}})
	if got, want := bothActive(t, failing), map[string]float64{"Machine": 0}; !maps.Equal(got, want) {
		t.Errorf("with MachineSets unlisted: machina_authority_both_active = %v, want %v", got, want)
	}
}

// bothActive collects once from reader and returns machina_authority_both_active by kind.
func bothActive(t *testing.T, reader client.Reader) map[string]float64 {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(&collector{src: &Source{Reader: reader, MachineAPINamespace: mapiNS, ClusterAPINamespace: capiNS}})
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != "machina_authority_both_active" {
			continue
		}
		for _, m := range mf.GetMetric() {
			got[m.GetLabel()[0].GetValue()] = m.GetGauge().GetValue()
		}
	}
	return got
}
