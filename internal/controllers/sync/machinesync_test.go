package sync_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	_ "github.com/machina-dev/machina/internal/controllers/machineapi"
	_ "github.com/machina-dev/machina/internal/controllers/sync"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"

	corev1 "k8s.io/api/core/v1"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/machina-dev/machina/internal/authority"
	"github.com/machina-dev/machina/internal/manager"
	"github.com/machina-dev/machina/internal/mapicond"
	"github.com/machina-dev/machina/internal/provider"
	"github.com/machina-dev/machina/internal/testenv"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
)

const (
	mapiNS  = manager.DefaultMachineAPINamespace
	capiNS  = manager.DefaultClusterAPINamespace
	cluster = "lab"
)

var env *testenv.Env

func seedCluster(t *testing.T, e *testenv.Env) { e.SeedCluster(cluster) }

func getMAPI(ctx context.Context, e *testenv.Env, name string) (*machinev1beta1.Machine, error) {
	m := &machinev1beta1.Machine{}
	return m, e.Client.Get(ctx, client.ObjectKey{Namespace: mapiNS, Name: name}, m)
}

func getCAPI(ctx context.Context, e *testenv.Env, name string) (*clusterv1.Machine, error) {
	m := &clusterv1.Machine{}
	return m, e.Client.Get(ctx, client.ObjectKey{Namespace: capiNS, Name: name}, m)
}

func synchronized(m *machinev1beta1.Machine) string {
	c := mapicond.Get(m.Status.Conditions, authority.SynchronizedCondition)
	if c == nil {
		return "<none>"
	}
	return fmt.Sprintf("%s/%s: %s", c.Status, c.Reason, c.Message)
}

func waitSynchronized(t *testing.T, e *testenv.Env, name string) *machinev1beta1.Machine {
	t.Helper()
	var m *machinev1beta1.Machine
	e.Eventually(60*time.Second, name+" Synchronized", func(ctx context.Context) (bool, string, error) {
		var err error
		if m, err = getMAPI(ctx, e, name); err != nil {
			return false, err.Error(), nil
		}
		return mapicond.IsTrue(m.Status.Conditions, authority.SynchronizedCondition) && m.Status.SynchronizedGeneration > 0,
			synchronized(m), nil
	})
	return m
}

// TestSync runs the sync controllers in one lab for both platforms (see platform). Every
// subtest about Machines and MachineSets — whose conversion, InfraMachine and
// InfraMachineTemplate mirrors, pause and finalizers depend on the platform — runs once per
// platform (sim, aws) as nested subtests, on objects told apart by name prefix. The Machine API
// side of both platforms is provisioned by its real actuator (the simulated provider's, and the
// AWS actuator of group "aws" through the simulated cloud's EC2 front). No Cluster API core
// controller runs in this suite, so no Cluster's infrastructure is ever provisioned and the
// simulated provider's SimMachine controller (group "sim") launches nothing: nothing writes an
// InfraMachine's provider fields here; the migration suite, which needs them on AWS,
// writes them from the test. The MachineHealthCheck subtests involve no platform and run once.
func TestSync(t *testing.T) {
	t.Parallel() // its own lab, beside TestAutoscalerOnMirrors'
	env = testenv.Start(t, testenv.Options{Groups: "machineapi,sim,aws,sync", EC2: true})
	seedCluster(t, env)
	env.ServeAWSMachines("us-east-1")
	perPlatform := func(f func(*testing.T, platform)) func(*testing.T) {
		return func(t *testing.T) { eachPlatform(t, f) }
	}
	for _, c := range []struct {
		name string
		f    func(*testing.T, platform)
	}{
		{"MachineAPIAuthoritativeNoMirror_CreatesPausedMirror", testMirrorCreated},
		{"UnconvertibleField_SynchronizedFalseNoPartialWrites", testUnconvertible},
		{"ClusterAPIAuthoritativeNoMirror_CreatesUnpausedCopy", testClusterAPIFromBirth},
		{"MachineAPIControllersDecideAuthority_SyncHeld", testGateDecidesWhileSyncHeld},
		{"ActiveClusterAPIMachineNotMirror_LeftAloneConflictReported", testActiveCAPIMachineNotMirror},
		{"ActiveClusterAPIMachineSetNotMirror_LeftAloneConflictReported", testActiveCAPIMachineSetNotMirror},
		{"MachineAPICopyDeletedBesideNotMirror_ClusterAPIResourceKept", testDeletedBesideNotMirror},
		{"PausedMirrorFirst_SpecMachineAPIIsAuthoritative", testPausedMirrorFirst},
		{"CAPIMirrorDeletedWhileMachineAPIAuthoritative_Recreated", testCAPIDeletedRecreated},
		{"NonAuthoritativeStandaloneMAPIDeleted_CAPIRemains", testStandaloneMAPIDeleted},
		{"MachineSetMirror_TemplatesByHash_CascadingDelete", testMachineSetMirror},
		{"NonAuthoritativeMachineSetDeleted_CAPIKeepsRunning", testNonAuthoritativeMachineSetDeleted},
		{"ClusterAPIAuthoritativeMachineSetDeleted_MachineAPIMachinesKeepRunning", testClusterAPIMachineSetDeletedMachinesKept},
		{"PausedMachineSetMirrorDeleted_RecreatedMachinesKept", testMachineSetMirrorDeleted},
		{"OwnedDeletionsAndSteadyState", testOwnedDeletionsAndSteadyState},
		{"DeletionFinalizers_NeverStuck", testDeletionFinalizers},
		{"LeftoverInfraMachineOfSameName_NotAdopted", testLeftoverInfraNotAdopted},
		{"LabelAnnotationRemoval_Machine", testMetadataRemovalMachine},
		{"LabelAnnotationRemoval_MachineSet", testMetadataRemovalMachineSet},
		{"AutoscalerReplicasMirrored", testAutoscalerReplicas},
		{"ClusterAPIAuthoritativeWithMirror_MachineAPITakesClusterAPISpec", testClusterAPIWithMirror},
		{"ClusterAPIMachineSetFirst_SyncFinalizerOnBothDeletionCarried", testClusterAPIMachineSetFirst},
		{"CAPIMachineAlone_NothingUnlessItsMachineSetIsMirrored", testCAPIMachineAlone},
		{"TemplateSaysClusterAPI_MachinesBornClusterAPIWithUnpausedMirrors", testTemplateClusterAPI},
		{"ClusterAPIAuthoritativeMachineSet_TemplateWrittenFirst_MissingTemplateReported", testTemplateBeforeMachineSet},
		{"PausedClusterAPICopyAtPairing_Unpaused_LaterPauseKept", testPausedAtPairing},
	} {
		t.Run(c.name, perPlatform(c.f))
	}
	t.Run("PausedMachineHealthCheckMirrorDeleted_Recreated", testMHCMirrorDeleted)
	t.Run("MachineHealthCheckMirror", testMHCMirror)
	t.Run("MachineHealthCheckClusterAPIOnlyFeatureLeftOut", testMHCClusterAPIOnlyFeatureReported)
	t.Run("MachineHealthCheckLeftoverPausedMirror", testMHCLeftoverPausedMirror)
	t.Run("ClusterAPIAuthoritativeMachineHealthCheckDeleted_MachineAPICopyDeleted", testMHCClusterAPIAuthoritativeDeleted)
	t.Run("LabelAnnotationRemoval_MachineHealthCheck", testMetadataRemovalMHC)
}

func testMirrorCreated(t *testing.T, p platform) {
	e := env.For(t)
	ctx := context.Background()
	name := p.name("mirror")
	m := p.machine(name, "", p.zones[1], p.types[1])
	if err := e.Client.Create(ctx, m); err != nil {
		t.Fatal(err)
	}
	m = waitSynchronized(t, e, name)
	if m.Status.AuthoritativeAPI != machinev1beta1.MachineAuthorityMachineAPI || m.Status.SynchronizedGeneration != m.Generation {
		t.Errorf("authority %q synchronizedGeneration %d generation %d", m.Status.AuthoritativeAPI, m.Status.SynchronizedGeneration, m.Generation)
	}
	capi, err := getCAPI(ctx, e, name)
	if err != nil {
		t.Fatal(err)
	}
	if _, paused := capi.Annotations[clusterv1.PausedAnnotation]; !paused || !controllerutil.ContainsFinalizer(capi, authority.SyncFinalizer) {
		t.Errorf("mirror must be paused and carry the sync finalizer: %v %v", capi.Annotations, capi.Finalizers)
	}
	if capi.Spec.ClusterName != cluster || capi.Spec.FailureDomain != p.zones[1] || capi.Spec.InfrastructureRef.Kind != p.provider.InfraMachine.Kind {
		t.Errorf("mirror spec %+v", capi.Spec)
	}
	im, err := p.infraMachine(ctx, e, name)
	if err != nil {
		t.Fatal(err)
	}
	if _, paused := im.GetAnnotations()[clusterv1.PausedAnnotation]; !paused || instanceTypeOf(im, false) != p.types[1] {
		t.Errorf("%s mirror: %v instance type %q", p.provider.InfraMachine.Kind, im.GetAnnotations(), instanceTypeOf(im, false))
	}
	// No sync finalizer on the InfraMachine (its Machine carries the deletion); the sync's mark
	// tells admission it is a mirror.
	if im.GetAnnotations()[authority.MirrorOfAnnotation] != "Machine/"+name || controllerutil.ContainsFinalizer(im, authority.SyncFinalizer) {
		t.Errorf("%s mirror must be marked %s=Machine/%s, without the sync finalizer: %v %v", p.provider.InfraMachine.Kind,
			authority.MirrorOfAnnotation, name, im.GetAnnotations(), im.GetFinalizers())
	}

	// Status flows from the authoritative side once the Machine API has provisioned it.
	e.Eventually(90*time.Second, "status mirrored", func(ctx context.Context) (bool, string, error) {
		capi, err := getCAPI(ctx, e, name)
		if err != nil {
			return false, err.Error(), nil
		}
		// The FAILURE DOMAIN and UP-TO-DATE columns read status.failureDomain and the UpToDate
		// condition, as for a Machine the Cluster API runs.
		upToDate := meta.IsStatusConditionTrue(capi.Status.Conditions, clusterv1.MachineUpToDateCondition)
		return capi.Status.Phase == "Running" && capi.Status.NodeRef.Name != "" && capi.Spec.ProviderID != "" &&
				capi.Status.FailureDomain == p.zones[1] && upToDate,
			fmt.Sprintf("phase %q node %q providerID %q failureDomain %q UpToDate %v", capi.Status.Phase, capi.Status.NodeRef.Name,
				capi.Spec.ProviderID, capi.Status.FailureDomain, upToDate), nil
	})

	// Users cannot edit the paused copy (admission refuses); drift that gets past admission
	// (here written by a kube-system identity, which the policy lets through) is overwritten.
	capi, _ = getCAPI(ctx, e, name)
	base := capi.DeepCopy()
	capi.Spec.FailureDomain = p.zones[2]
	if err := e.Client.Patch(ctx, capi, client.MergeFrom(base)); err == nil || !strings.Contains(err.Error(), "paused mirror") {
		t.Fatalf("an administrator's edit of a paused mirror must be refused: %v", err)
	}
	driftCfg, err := e.Lab.UserConfig("system:serviceaccount:kube-system:drifter", "system:masters")
	if err != nil {
		t.Fatal(err)
	}
	drifter, err := client.New(driftCfg, client.Options{Scheme: e.Client.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	if err := drifter.Patch(ctx, capi, client.MergeFrom(base)); err != nil {
		t.Fatal(err)
	}
	e.Eventually(30*time.Second, "drift overwritten", func(ctx context.Context) (bool, string, error) {
		capi, err := getCAPI(ctx, e, name)
		if err != nil {
			return false, err.Error(), nil
		}
		return capi.Spec.FailureDomain == p.zones[1], capi.Spec.FailureDomain, nil
	})

	// Deleting the authoritative Machine API copy deletes the mirror too, once the instance is gone.
	m, _ = getMAPI(ctx, e, name)
	if err := e.Client.Delete(ctx, m); err != nil {
		t.Fatal(err)
	}
	e.Eventually(90*time.Second, "both copies gone", func(ctx context.Context) (bool, string, error) {
		_, errM := getMAPI(ctx, e, name)
		_, errC := getCAPI(ctx, e, name)
		_, errI := p.infraMachine(ctx, e, name)
		return apierrors.IsNotFound(errM) && apierrors.IsNotFound(errC) && apierrors.IsNotFound(errI),
			fmt.Sprintf("mapi: %v capi: %v infra: %v", errM, errC, errI), nil
	})
}

func testUnconvertible(t *testing.T, p platform) {
	e := env.For(t)
	ctx := context.Background()
	name := p.name("elsewhere")
	m := p.machine(name, "", p.zones[0], p.types[1])
	m.Spec.ProviderSpec.Value = p.unconvertible
	if err := e.Client.Create(ctx, m); err != nil {
		t.Fatal(err)
	}
	e.Eventually(60*time.Second, "Synchronized=False naming the field", func(ctx context.Context) (bool, string, error) {
		m, err := getMAPI(ctx, e, name)
		if err != nil {
			return false, err.Error(), nil
		}
		c := mapicond.Get(m.Status.Conditions, authority.SynchronizedCondition)
		return c != nil && c.Status == corev1.ConditionFalse && c.Reason == authority.ConversionFailedReason &&
			strings.Contains(c.Message, p.unconvertibleField), synchronized(m), nil
	})
	if _, err := getCAPI(ctx, e, name); !apierrors.IsNotFound(err) {
		t.Fatalf("a Cluster API copy was written for an unconvertible Machine: %v", err)
	}
	if _, err := p.infraMachine(ctx, e, name); !apierrors.IsNotFound(err) {
		t.Fatalf("a %s was written for an unconvertible Machine: %v", p.provider.InfraMachine.Kind, err)
	}
	m, _ = getMAPI(ctx, e, name)
	_ = e.Client.Delete(ctx, m)
}

func testClusterAPIFromBirth(t *testing.T, p platform) {
	e := env.For(t)
	ctx := context.Background()
	name := p.name("born-capi")
	if err := e.Client.Create(ctx, p.machine(name, machinev1beta1.MachineAuthorityClusterAPI, p.zones[1], p.types[1])); err != nil {
		t.Fatal(err)
	}
	e.Eventually(60*time.Second, "unpaused Cluster API copy and InfraMachine", func(ctx context.Context) (bool, string, error) {
		capi, err := getCAPI(ctx, e, name)
		if err != nil {
			return false, err.Error(), nil
		}
		im, err := p.infraMachine(ctx, e, name)
		if err != nil {
			return false, err.Error(), nil
		}
		_, paused := capi.Annotations[clusterv1.PausedAnnotation]
		_, infraPaused := im.GetAnnotations()[clusterv1.PausedAnnotation]
		return !paused && !infraPaused, fmt.Sprintf("annotations %v, %s %v", capi.Annotations, im.GetKind(), im.GetAnnotations()), nil
	})
	m, err := getMAPI(ctx, e, name)
	if err != nil {
		t.Fatal(err)
	}
	if m.Status.AuthoritativeAPI != machinev1beta1.MachineAuthorityClusterAPI {
		t.Fatalf("status.authoritativeAPI %q", m.Status.AuthoritativeAPI)
	}
	if controllerutil.ContainsFinalizer(m, machinev1beta1.MachineFinalizer) || m.Spec.ProviderID != nil {
		t.Fatalf("the Machine API controller acted on a Cluster API-authoritative Machine: %v %v", m.Finalizers, m.Spec.ProviderID)
	}
	t.Run("MachineAPICopyShowsInstance", func(t *testing.T) { testInstanceShownOnMAPICopy(t, e, p, name) })
}

// testInstanceShownOnMAPICopy: once the Cluster API provider records an instance on the
// InfraMachine (written here: no provider runs in this lab), the Machine API copy shows what
// the platform's Machine API actuator would record — the instance type, region and zone
// labels, the instance-state annotation and the providerStatus — so `oc get machines` reads
// TYPE, REGION, ZONE and STATE for a Machine born in the Cluster API too, and its
// InstanceExists condition goes from False (InstanceNotCreated) to True once the Cluster API
// Machine names the instance.
func testInstanceShownOnMAPICopy(t *testing.T, e *testenv.Env, p platform, name string) {
	ctx := context.Background()
	const instanceID = "i-0c0ffee0c0ffee001"
	e.Eventually(30*time.Second, "InstanceExists=False before an instance", func(ctx context.Context) (bool, string, error) {
		m, err := getMAPI(ctx, e, name)
		if err != nil {
			return false, err.Error(), nil
		}
		c := mapicond.Get(m.Status.Conditions, machinev1beta1.InstanceExistsCondition)
		return c != nil && c.Status == corev1.ConditionFalse && c.Reason == machinev1beta1.InstanceNotCreatedReason, fmt.Sprintf("%+v", c), nil
	})
	im := p.emptyInfraMachine()
	im.SetNamespace(capiNS)
	im.SetName(name)
	spec := fmt.Sprintf(`{"spec":{"providerID":"%s:///%s/%s"}}`, p.provider.Name, p.zones[1], instanceID)
	if p.provider.Name == provider.AWS().Name {
		spec = fmt.Sprintf(`{"spec":{"providerID":"aws:///%s/%s","instanceID":%q}}`, p.zones[1], instanceID, instanceID)
	}
	if err := e.Client.Patch(ctx, im, client.RawPatch(types.MergePatchType, []byte(spec))); err != nil {
		t.Fatal(err)
	}
	if err := e.Client.Status().Patch(ctx, im, client.RawPatch(types.MergePatchType, []byte(`{"status":{"instanceState":"running"}}`))); err != nil {
		t.Fatal(err)
	}
	// The provider's record reaches the Cluster API Machine (its controller does not run here).
	providerID := fmt.Sprintf("%s:///%s/%s", p.provider.Name, p.zones[1], instanceID)
	if err := e.Client.Patch(ctx, &clusterv1.Machine{ObjectMeta: metav1.ObjectMeta{Namespace: capiNS, Name: name}},
		client.RawPatch(types.MergePatchType, []byte(fmt.Sprintf(`{"spec":{"providerID":%q}}`, providerID)))); err != nil {
		t.Fatal(err)
	}
	e.Eventually(60*time.Second, "the Machine API copy shows the instance", func(ctx context.Context) (bool, string, error) {
		m, err := getMAPI(ctx, e, name)
		if err != nil {
			return false, err.Error(), nil
		}
		if c := mapicond.Get(m.Status.Conditions, machinev1beta1.InstanceExistsCondition); c == nil || c.Status != corev1.ConditionTrue ||
			!strings.Contains(c.Message, instanceID) {
			return false, fmt.Sprintf("InstanceExists %+v", c), nil
		}
		status := ""
		if m.Status.ProviderStatus != nil {
			status = string(m.Status.ProviderStatus.Raw)
		}
		l := m.Labels
		return l["machine.openshift.io/instance-type"] == p.types[1] && l["machine.openshift.io/region"] == p.region &&
				l["machine.openshift.io/zone"] == p.zones[1] && m.Annotations["machine.openshift.io/instance-state"] == "running" &&
				(strings.Contains(status, `"instanceId":"`+instanceID+`"`) || strings.Contains(status, `"instanceID":"`+instanceID+`"`)),
			fmt.Sprintf("labels %v, annotations %v, providerStatus %s", l, m.Annotations, status), nil
	})
}

func pausedAnnotated(o client.Object) bool {
	_, ok := o.GetAnnotations()[clusterv1.PausedAnnotation]
	return ok
}

// testPausedMirrorFirst: a paused Cluster API mirror left from before (its Machine API copy
// deleted and created again, a restore) does not make the Cluster API authoritative against a
// spec that says MachineAPI: the new Machine API spec wins and overwrites the stale mirror.
func testPausedMirrorFirst(t *testing.T, p platform) {
	e := env.For(t)
	ctx := context.Background()
	name := p.name("stale")
	p.handMadeCAPIMachine(t, e, name, true, nil)
	if err := e.Client.Create(ctx, p.machine(name, machinev1beta1.MachineAuthorityMachineAPI, p.zones[1], p.types[1])); err != nil {
		t.Fatal(err)
	}
	e.Eventually(60*time.Second, "the mirror takes the Machine API spec", func(ctx context.Context) (bool, string, error) {
		im, err := p.infraMachine(ctx, e, name)
		if err != nil {
			return false, err.Error(), nil
		}
		m, err := getMAPI(ctx, e, name)
		if err != nil {
			return false, err.Error(), nil
		}
		itype, _ := specFields(m.Spec.ProviderSpec.Value)
		return m.Status.AuthoritativeAPI == machinev1beta1.MachineAuthorityMachineAPI && itype == p.types[1] &&
				instanceTypeOf(im, false) == p.types[1] && mapicond.IsTrue(m.Status.Conditions, authority.SynchronizedCondition),
			fmt.Sprintf("status %q spec instance type %q mirror %q %s", m.Status.AuthoritativeAPI, itype, instanceTypeOf(im, false), synchronized(m)), nil
	})
}

func testCAPIDeletedRecreated(t *testing.T, p platform) {
	e := env.For(t)
	ctx := context.Background()
	name := p.name("recreate")
	if err := e.Client.Create(ctx, p.mapiMachine(name, "")); err != nil {
		t.Fatal(err)
	}
	waitSynchronized(t, e, name)
	capi, err := getCAPI(ctx, e, name)
	if err != nil {
		t.Fatal(err)
	}
	old := capi.UID
	if err := e.Client.Delete(ctx, capi); err != nil {
		t.Fatal(err)
	}
	e.Eventually(60*time.Second, "mirror recreated", func(ctx context.Context) (bool, string, error) {
		capi, err := getCAPI(ctx, e, name)
		if err != nil {
			return false, err.Error(), nil
		}
		return capi.UID != old && capi.DeletionTimestamp.IsZero(), string(capi.UID), nil
	})
	if _, err := getMAPI(ctx, e, name); err != nil {
		t.Fatalf("the authoritative Machine API Machine must stay: %v", err)
	}
}

func testStandaloneMAPIDeleted(t *testing.T, p platform) {
	e := env.For(t)
	ctx := context.Background()
	name := p.name("keep-capi")
	if err := e.Client.Create(ctx, p.mapiMachine(name, machinev1beta1.MachineAuthorityClusterAPI)); err != nil {
		t.Fatal(err)
	}
	e.Eventually(60*time.Second, "copy exists", func(ctx context.Context) (bool, string, error) {
		_, err := getCAPI(ctx, e, name)
		return err == nil, fmt.Sprint(err), nil
	})
	m, _ := getMAPI(ctx, e, name)
	if err := e.Client.Delete(ctx, m); err != nil {
		t.Fatal(err)
	}
	e.Eventually(60*time.Second, "Machine API copy gone", func(ctx context.Context) (bool, string, error) {
		_, err := getMAPI(ctx, e, name)
		return apierrors.IsNotFound(err), fmt.Sprint(err), nil
	})
	time.Sleep(2 * time.Second)
	capi, err := getCAPI(ctx, e, name)
	if err != nil || !capi.DeletionTimestamp.IsZero() {
		t.Fatalf("the authoritative Cluster API Machine must keep running: %v %v", err, capi.DeletionTimestamp)
	}
	if controllerutil.ContainsFinalizer(capi, authority.SyncFinalizer) {
		t.Errorf("sync finalizer left on the Cluster API Machine: %v", capi.Finalizers)
	}
}
