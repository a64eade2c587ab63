package migration_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	_ "github.com/machina-dev/machina/internal/controllers/clusterapi"
	_ "github.com/machina-dev/machina/internal/controllers/machineapi"
	"github.com/machina-dev/machina/internal/controllers/migration"
	_ "github.com/machina-dev/machina/internal/controllers/sim"
	_ "github.com/machina-dev/machina/internal/controllers/sync"
	"github.com/machina-dev/machina/internal/mapicond"
	"github.com/machina-dev/machina/internal/testenv"
)

var env *testenv.Env

func machine(name, region, zone string) *machinev1beta1.Machine {
	return &machinev1beta1.Machine{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "openshift-machine-api",
		Labels: map[string]string{"machine.openshift.io/cluster-api-cluster": "lab"}},
		Spec: machinev1beta1.MachineSpec{ProviderSpec: machinev1beta1.ProviderSpec{Value: testenv.SimProviderSpec(region, zone, "s1.medium")}}}
}

func getBoth(ctx context.Context, e *testenv.Env, name string) (*machinev1beta1.Machine, *clusterv1.Machine, error) {
	m, c := &machinev1beta1.Machine{}, &clusterv1.Machine{}
	if err := e.Client.Get(ctx, client.ObjectKey{Namespace: "openshift-machine-api", Name: name}, m); err != nil {
		return nil, nil, err
	}
	if err := e.Client.Get(ctx, client.ObjectKey{Namespace: "openshift-cluster-api", Name: name}, c); err != nil {
		return m, nil, err
	}
	return m, c, nil
}

func request(t *testing.T, e *testenv.Env, name string, to machinev1beta1.MachineAuthority) {
	t.Helper()
	m, _, err := getBoth(context.Background(), e, name)
	if m == nil {
		t.Fatal(err)
	}
	base := m.DeepCopy()
	m.Spec.AuthoritativeAPI = to
	if err := e.Client.Patch(context.Background(), m, client.MergeFrom(base)); err != nil {
		t.Fatal(err)
	}
}

func cond(m *machinev1beta1.Machine, t machinev1beta1.ConditionType) string {
	c := mapicond.Get(m.Status.Conditions, t)
	if c == nil {
		return "<none>"
	}
	return fmt.Sprintf("%s/%s: %s", c.Status, c.Reason, c.Message)
}

func instancesCreated(t *testing.T, e *testenv.Env) int64 {
	t.Helper()
	s, err := e.Cloud.Stats(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return s.InstancesCreated
}

// TestMigration runs the migration controllers in one lab for both platforms (see
// platformCase): the handover subtests run once per platform (sim, aws) as nested subtests.
// The scenarios that need the Cluster API side to launch instances (scaling under the
// Cluster API, a launch in flight) run in TestOwnLab instead, where aws has the real CAPA
// (capaStandIn launches nothing).
func TestMigration(t *testing.T) {
	t.Parallel() // a lab of its own, beside the package's other labs (see TestOwnLab)
	env = testenv.Start(t, testenv.Options{Groups: "machineapi,aws,sync,migration,clusterapi,sim", EC2: true})
	env.SeedCluster("lab")
	env.ServeAWSMachines("us-east-1")
	startCAPAStandIn(env)
	for _, c := range []struct {
		name string
		f    func(*testing.T, platformCase)
	}{
		{"MachineToClusterAPIAndBack", testRoundTrip},
		{"RefusedWhenNotSynchronized", testRefused},
		{"RollbackWhileMigratingAfterCrash", testRollback},
		{"ManyHandoversLaunchNothing", testManyHandoversLaunchNothing},
		{"MachineSetHandover_InfraMachinePausedAndFinalizerMoved_TemplatesPruned", testHandover},
		{"MachineSetWaitsForUnmirroredMachine", testSetWaitsForUnmirrored},
		{"OrphanedClusterAPICopyAdoptedByMirror", testOrphanAdopted},
		{"ScaleFromZeroSurvivesMigration", testScaleFromZeroSurvivesMigration},
		{"NoReadyFlapAtHandover", testNoReadyFlapAtHandover},
	} {
		t.Run(c.name, func(t *testing.T) { eachPlatform(t, c.f) })
	}
}

func testRoundTrip(t *testing.T, pc platformCase) {
	e := env.For(t)
	ctx := context.Background()
	name := pc.name("mover")
	if err := e.Client.Create(ctx, pc.machine(name, 0)); err != nil {
		t.Fatal(err)
	}
	var providerID string
	e.Eventually(90*time.Second, "Running under the Machine API and synchronised", func(ctx context.Context) (bool, string, error) {
		m, c, err := getBoth(ctx, e, name)
		if err != nil {
			return false, err.Error(), nil
		}
		ok := m.Status.Phase != nil && *m.Status.Phase == "Running" && c.Status.Phase == "Running" &&
			m.Status.SynchronizedGeneration == m.Generation && mapicond.IsTrue(m.Status.Conditions, "Synchronized")
		if m.Spec.ProviderID != nil {
			providerID = *m.Spec.ProviderID
		}
		return ok, fmt.Sprintf("phase %v capi %q %s", m.Status.Phase, c.Status.Phase, cond(m, "Synchronized")), nil
	})
	created := instancesCreated(t, e)

	request(t, e, name, machinev1beta1.MachineAuthorityClusterAPI)
	defer func() {
		// A request on synchronised copies is no cause for a warning, even while the sync
		// catches up with the generation the request itself made.
		if w := warnings(context.Background(), t, e, name, migration.NotSynchronizedReason); len(w) > 0 {
			t.Errorf("warnings on a migration of synchronised copies: %v", w)
		}
	}()
	e.Eventually(90*time.Second, "authority moved to Cluster API", func(ctx context.Context) (bool, string, error) {
		m, c, err := getBoth(ctx, e, name)
		if err != nil {
			return false, err.Error(), nil
		}
		_, paused := c.Annotations[clusterv1.PausedAnnotation]
		return m.Status.AuthoritativeAPI == machinev1beta1.MachineAuthorityClusterAPI && !paused &&
				controllerutil.ContainsFinalizer(c, clusterv1.MachineFinalizer) &&
				!controllerutil.ContainsFinalizer(m, machinev1beta1.MachineFinalizer),
			fmt.Sprintf("status %q paused %v finalizers mapi %v capi %v %s", m.Status.AuthoritativeAPI, paused, m.Finalizers, c.Finalizers,
				cond(m, migration.MigrationCondition)), nil
	})
	// The Cluster API controllers take over the same instance and report it back.
	e.Eventually(90*time.Second, "Cluster API runs the same instance", func(ctx context.Context) (bool, string, error) {
		m, c, err := getBoth(ctx, e, name)
		if err != nil {
			return false, err.Error(), nil
		}
		infra := &unstructured.Unstructured{}
		infra.SetGroupVersionKind(pc.provider.InfraMachine)
		if err := e.Client.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: c.Spec.InfrastructureRef.Name}, infra); err != nil {
			return false, err.Error(), nil
		}
		infraID, _, _ := unstructured.NestedString(infra.Object, "spec", "providerID")
		provisioned := ptr.Deref(c.Status.Initialization.InfrastructureProvisioned, false)
		return provisioned && infraID == providerID && c.Spec.ProviderID == providerID && c.Status.NodeRef.Name != "" &&
				m.Status.Phase != nil && *m.Status.Phase == "Running",
			fmt.Sprintf("infrastructure provisioned %v %s providerID %q capi phase %q conds %v", provisioned, infra.GetKind(), infraID, c.Status.Phase, c.Status.Conditions), nil
	})
	if n := instancesCreated(t, e); n != created {
		t.Fatalf("handing over created %d instance(s)", n-created)
	}
	m, _, _ := getBoth(ctx, e, name)
	if c := mapicond.Get(m.Status.Conditions, migration.MigrationCondition); c == nil || c.Reason != migration.CompletedReason {
		t.Errorf("AuthorityMigration condition: %s", cond(m, migration.MigrationCondition))
	}

	// And back.
	request(t, e, name, machinev1beta1.MachineAuthorityMachineAPI)
	e.Eventually(90*time.Second, "authority back with the Machine API", func(ctx context.Context) (bool, string, error) {
		m, c, err := getBoth(ctx, e, name)
		if err != nil {
			return false, err.Error(), nil
		}
		_, paused := c.Annotations[clusterv1.PausedAnnotation]
		return m.Status.AuthoritativeAPI == machinev1beta1.MachineAuthorityMachineAPI && paused &&
				controllerutil.ContainsFinalizer(m, machinev1beta1.MachineFinalizer) &&
				!controllerutil.ContainsFinalizer(c, clusterv1.MachineFinalizer),
			fmt.Sprintf("status %q paused %v finalizers mapi %v capi %v %s", m.Status.AuthoritativeAPI, paused, m.Finalizers, c.Finalizers,
				cond(m, migration.MigrationCondition)), nil
	})
	time.Sleep(3 * time.Second) // a few resyncs of both families
	if n := instancesCreated(t, e); n != created {
		t.Fatalf("the round trip created %d instance(s)", n-created)
	}
	m, _, _ = getBoth(ctx, e, name)
	if *m.Status.Phase != "Running" || *m.Spec.ProviderID != providerID {
		t.Errorf("after the round trip: phase %v providerID %v", *m.Status.Phase, *m.Spec.ProviderID)
	}
}

func testRefused(t *testing.T, pc platformCase) {
	e := env.For(t)
	ctx := context.Background()
	name := pc.name("stuck")
	m := pc.machine(name, 0)
	m.Spec.ProviderSpec.Value = pc.unconvertible
	if err := e.Client.Create(ctx, m); err != nil {
		t.Fatal(err)
	}
	// Authority is decided first (a request made before that would make it Cluster
	// API-authoritative from birth), and the conversion failure is known.
	e.Eventually(60*time.Second, "decided and not synchronised", func(ctx context.Context) (bool, string, error) {
		m := &machinev1beta1.Machine{}
		if err := e.Client.Get(ctx, client.ObjectKey{Namespace: "openshift-machine-api", Name: name}, m); err != nil {
			return false, err.Error(), nil
		}
		c := mapicond.Get(m.Status.Conditions, "Synchronized")
		return m.Status.AuthoritativeAPI == machinev1beta1.MachineAuthorityMachineAPI && c != nil && c.Status == "False", cond(m, "Synchronized"), nil
	})
	request(t, e, name, machinev1beta1.MachineAuthorityClusterAPI)
	e.Eventually(60*time.Second, "refused with the reason", func(ctx context.Context) (bool, string, error) {
		m := &machinev1beta1.Machine{}
		if err := e.Client.Get(ctx, client.ObjectKey{Namespace: "openshift-machine-api", Name: name}, m); err != nil {
			return false, err.Error(), nil
		}
		c := mapicond.Get(m.Status.Conditions, migration.MigrationCondition)
		return c != nil && c.Reason == migration.NotSynchronizedReason && m.Status.AuthoritativeAPI == machinev1beta1.MachineAuthorityMachineAPI,
			cond(m, migration.MigrationCondition), nil
	})
	// The pending request is exported for alerting until the Machine is deleted.
	e.Eventually(30*time.Second, "the pending migration is exported", func(context.Context) (bool, string, error) {
		n := pendingSeries(t, name)
		return n == 1, fmt.Sprintf("%d series", n), nil
	})
	if err := e.Client.Delete(ctx, &machinev1beta1.Machine{ObjectMeta: metav1.ObjectMeta{Namespace: "openshift-machine-api", Name: name}}); err != nil {
		t.Fatal(err)
	}
	e.Eventually(90*time.Second, "the deleted Machine's pending migration is no longer exported", func(ctx context.Context) (bool, string, error) {
		m := &machinev1beta1.Machine{}
		err := e.Client.Get(ctx, client.ObjectKey{Namespace: "openshift-machine-api", Name: name}, m)
		n := pendingSeries(t, name)
		return apierrors.IsNotFound(err) && n == 0, fmt.Sprintf("%d series, get: %v; finalizers %v phase %v error %v",
			n, err, m.Finalizers, ptr.Deref(m.Status.Phase, ""), ptr.Deref(m.Status.ErrorMessage, "")), nil
	})
}

// pendingSeries counts the machina_migration_pending_seconds series of a resource name in
// this process's metrics registry (the test's manager runs in-process).
func pendingSeries(t *testing.T, name string) int {
	t.Helper()
	mfs, err := ctrlmetrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, mf := range mfs {
		if mf.GetName() != "machina_migration_pending_seconds" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "name" && l.GetValue() == name {
					n++
				}
			}
		}
	}
	return n
}

// warnings lists the Warning events recorded about a Machine API Machine with a reason.
func warnings(ctx context.Context, t *testing.T, e *testenv.Env, name, reason string) []string {
	t.Helper()
	var evs corev1.EventList
	if err := e.Client.List(ctx, &evs, client.InNamespace("openshift-machine-api")); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, ev := range evs.Items {
		if ev.InvolvedObject.Name == name && ev.Type == corev1.EventTypeWarning && ev.Reason == reason {
			out = append(out, ev.Message)
		}
	}
	return out
}

func testRollback(t *testing.T, pc platformCase) {
	e := env.For(t)
	ctx := context.Background()
	name := pc.name("undo")
	if err := e.Client.Create(ctx, pc.machine(name, 1)); err != nil {
		t.Fatal(err)
	}
	e.Eventually(90*time.Second, "synchronised", func(ctx context.Context) (bool, string, error) {
		m, _, err := getBoth(ctx, e, name)
		if err != nil {
			return false, err.Error(), nil
		}
		return mapicond.IsTrue(m.Status.Conditions, "Synchronized") && m.Status.SynchronizedGeneration == m.Generation, cond(m, "Synchronized"), nil
	})
	// The manager dies just after marking the Machine Migrating; the user then asks to go
	// back. The restarted controllers work from the objects alone.
	e.StopManager()
	m, _, _ := getBoth(ctx, e, name)
	base := m.DeepCopy()
	m.Status.AuthoritativeAPI = machinev1beta1.MachineAuthorityMigrating
	m.Status.SynchronizedAPI = machinev1beta1.MachineAPISynchronized
	if err := e.Client.Status().Patch(ctx, m, client.MergeFrom(base)); err != nil {
		t.Fatal(err)
	}
	e.StartManager()
	e.Eventually(60*time.Second, "rolled back", func(ctx context.Context) (bool, string, error) {
		m, _, err := getBoth(ctx, e, name)
		if err != nil {
			return false, err.Error(), nil
		}
		c := mapicond.Get(m.Status.Conditions, migration.MigrationCondition)
		return m.Status.AuthoritativeAPI == machinev1beta1.MachineAuthorityMachineAPI && c != nil && c.Reason == migration.RolledBackReason &&
			controllerutil.ContainsFinalizer(m, machinev1beta1.MachineFinalizer), cond(m, migration.MigrationCondition), nil
	})
}

// Machines are never reconciled by both families at once: across many handovers of a running
// Machine, neither side ever asks the cloud for an instance.
func testManyHandoversLaunchNothing(t *testing.T, pc platformCase) {
	e := env.For(t)
	ctx := context.Background()
	name := pc.name("pingpong")
	if err := e.Client.Create(ctx, pc.machine(name, 2)); err != nil {
		t.Fatal(err)
	}
	e.Eventually(90*time.Second, "running and synchronised", func(ctx context.Context) (bool, string, error) {
		m, c, err := getBoth(ctx, e, name)
		if err != nil {
			return false, err.Error(), nil
		}
		return m.Status.Phase != nil && *m.Status.Phase == "Running" && c.Status.Phase == "Running" &&
			m.Status.SynchronizedGeneration == m.Generation, fmt.Sprint(m.Status.Phase), nil
	})
	before, err := e.Cloud.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 4; i++ {
		for _, to := range []machinev1beta1.MachineAuthority{machinev1beta1.MachineAuthorityClusterAPI, machinev1beta1.MachineAuthorityMachineAPI} {
			request(t, e, name, to)
			e.Eventually(90*time.Second, fmt.Sprintf("handover %d to %s", i, to), func(ctx context.Context) (bool, string, error) {
				m, _, err := getBoth(ctx, e, name)
				if err != nil {
					return false, err.Error(), nil
				}
				return m.Status.AuthoritativeAPI == to && mapicond.IsTrue(m.Status.Conditions, "Synchronized") &&
					m.Status.Phase != nil && *m.Status.Phase == "Running", cond(m, migration.MigrationCondition), nil
			})
		}
	}
	after, err := e.Cloud.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if runs := after.Operations["RunInstances"].Calls - before.Operations["RunInstances"].Calls; runs != 0 ||
		after.InstancesCreated != before.InstancesCreated {
		t.Fatalf("8 handovers made %d RunInstances calls and created %d instances", runs, after.InstancesCreated-before.InstancesCreated)
	}
}

// TestMain runs three of the package's labs at a time (testenv.Main).
func TestMain(m *testing.M) { testenv.Main(m, 3) }
