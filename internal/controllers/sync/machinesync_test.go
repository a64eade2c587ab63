package sync_test

import (
	_ "github.com/machina-dev/machina/internal/controllers/machineapi"
	_ "github.com/machina-dev/machina/internal/controllers/sync"
)

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	infrav1 "github.com/machina-dev/machina/api/infrastructure/v1alpha1"
	"github.com/machina-dev/machina/internal/controllers/sync/synccommon"
	"github.com/machina-dev/machina/internal/manager"
	"github.com/machina-dev/machina/internal/mapicond"
	"github.com/machina-dev/machina/internal/testenv"
)

const (
	mapiNS  = manager.DefaultMachineAPINamespace
	capiNS  = manager.DefaultClusterAPINamespace
	cluster = "lab"
)

var env *testenv.Env

func seedCluster(t *testing.T, e *testenv.Env) { e.SeedCluster(cluster) }

func simSpec(region, zone string) *runtime.RawExtension {
	raw, _ := json.Marshal(&infrav1.SimMachineProviderSpec{
		TypeMeta: metav1.TypeMeta{APIVersion: infrav1.GroupVersion.String(), Kind: "SimMachineProviderSpec"},
		Region:   region, Zone: zone, InstanceType: "s1.large", Image: "sim-rhcos-9",
		UserDataSecret: &corev1.LocalObjectReference{Name: "worker-user-data"}})
	return &runtime.RawExtension{Raw: raw}
}

func mapiMachine(name string, authority machinev1beta1.MachineAuthority) *machinev1beta1.Machine {
	m := &machinev1beta1.Machine{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: mapiNS,
		Labels: map[string]string{"machine.openshift.io/cluster-api-cluster": cluster}},
		Spec: machinev1beta1.MachineSpec{ProviderSpec: machinev1beta1.ProviderSpec{Value: simSpec("sim-east-1", "sim-east-1b")}}}
	m.Spec.AuthoritativeAPI = authority
	return m
}

func getMAPI(ctx context.Context, e *testenv.Env, name string) (*machinev1beta1.Machine, error) {
	m := &machinev1beta1.Machine{}
	return m, e.Client.Get(ctx, client.ObjectKey{Namespace: mapiNS, Name: name}, m)
}

func getCAPI(ctx context.Context, e *testenv.Env, name string) (*clusterv1.Machine, error) {
	m := &clusterv1.Machine{}
	return m, e.Client.Get(ctx, client.ObjectKey{Namespace: capiNS, Name: name}, m)
}

func synchronized(m *machinev1beta1.Machine) string {
	c := mapicond.Get(m.Status.Conditions, synccommon.SynchronizedCondition)
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
		return mapicond.IsTrue(m.Status.Conditions, synccommon.SynchronizedCondition) && m.Status.SynchronizedGeneration > 0,
			synchronized(m), nil
	})
	return m
}

func TestSync(t *testing.T) {
	env = testenv.Start(t, testenv.Options{Groups: "machineapi,sync"})
	seedCluster(t, env)
	t.Run("MachineAPIAuthoritativeNoMirror_CreatesPausedMirror", testMirrorCreated)
	t.Run("UnconvertibleField_SynchronizedFalseNoPartialWrites", testUnconvertible)
	t.Run("ClusterAPIAuthoritativeNoMirror_CreatesUnpausedCopy", testClusterAPIFromBirth)
	t.Run("ActiveClusterAPIMachineFirst_StaysClusterAPIAndSyncsFromIt", testMirrorExists)
	t.Run("PausedMirrorFirst_SpecMachineAPIIsAuthoritative", testPausedMirrorFirst)
	t.Run("CAPIMirrorDeletedWhileMachineAPIAuthoritative_Recreated", testCAPIDeletedRecreated)
	t.Run("NonAuthoritativeStandaloneMAPIDeleted_CAPIRemains", testStandaloneMAPIDeleted)
	t.Run("MachineSetMirror_TemplatesByHash_CascadingDelete", testMachineSetMirror)
	t.Run("NonAuthoritativeMachineSetDeleted_CAPIKeepsRunning", testNonAuthoritativeMachineSetDeleted)
	t.Run("ClusterAPIAuthoritativeMachineSetDeleted_MachineAPIMachinesKeepRunning", testClusterAPIMachineSetDeletedMachinesKept)
	t.Run("PausedMachineSetMirrorDeleted_RecreatedMachinesKept", testMachineSetMirrorDeleted)
	t.Run("PausedMachineHealthCheckMirrorDeleted_Recreated", testMHCMirrorDeleted)
	t.Run("MachineHealthCheckMirror", testMHCMirror)
	t.Run("MachineHealthCheckClusterAPIOnlyFeatureReported", testMHCClusterAPIOnlyFeatureReported)
	t.Run("OwnedDeletionsAndSteadyState", testOwnedDeletionsAndSteadyState)
	t.Run("DeletionFinalizers_NeverStuck", testDeletionFinalizers)
	t.Run("LabelAnnotationRemoval_Machine", testMetadataRemovalMachine)
	t.Run("LabelAnnotationRemoval_MachineSet", testMetadataRemovalMachineSet)
	t.Run("LabelAnnotationRemoval_MachineHealthCheck", testMetadataRemovalMHC)
	t.Run("AutoscalerReplicasMirrored", testAutoscalerReplicas)
	t.Run("ClusterAPIAuthoritativeWithMirror_MachineAPITakesClusterAPISpec", testClusterAPIWithMirror)
	t.Run("ClusterAPIMachineSetFirst_SyncFinalizerOnBothDeletionCarried", testClusterAPIMachineSetFirst)
	t.Run("CAPIMachineAlone_NothingUnlessItsMachineSetIsMirrored", testCAPIMachineAlone)
	t.Run("TemplateSaysClusterAPI_MachinesBornClusterAPIWithUnpausedMirrors", testTemplateClusterAPI)
}

func testMirrorCreated(t *testing.T) {
	e := env.For(t)
	ctx := context.Background()
	m := mapiMachine("mirror", "")
	if err := e.Client.Create(ctx, m); err != nil {
		t.Fatal(err)
	}
	m = waitSynchronized(t, e, "mirror")
	if m.Status.AuthoritativeAPI != machinev1beta1.MachineAuthorityMachineAPI || m.Status.SynchronizedGeneration != m.Generation {
		t.Errorf("authority %q synchronizedGeneration %d generation %d", m.Status.AuthoritativeAPI, m.Status.SynchronizedGeneration, m.Generation)
	}
	capi, err := getCAPI(ctx, e, "mirror")
	if err != nil {
		t.Fatal(err)
	}
	if _, paused := capi.Annotations[clusterv1.PausedAnnotation]; !paused || !controllerutil.ContainsFinalizer(capi, synccommon.SyncFinalizer) {
		t.Errorf("mirror must be paused and carry the sync finalizer: %v %v", capi.Annotations, capi.Finalizers)
	}
	if capi.Spec.ClusterName != cluster || capi.Spec.FailureDomain != "sim-east-1b" || capi.Spec.InfrastructureRef.Kind != "SimMachine" {
		t.Errorf("mirror spec %+v", capi.Spec)
	}
	sm := &infrav1.SimMachine{}
	if err := e.Client.Get(ctx, client.ObjectKey{Namespace: capiNS, Name: "mirror"}, sm); err != nil {
		t.Fatal(err)
	}
	if _, paused := sm.Annotations[clusterv1.PausedAnnotation]; !paused || sm.Spec.InstanceType != "s1.large" {
		t.Errorf("SimMachine mirror: %v %+v", sm.Annotations, sm.Spec)
	}
	// No sync finalizer on the InfraMachine (its Machine carries the deletion); the sync's mark
	// tells admission it is a mirror.
	if sm.Annotations[synccommon.MirrorOfAnnotation] != "Machine/mirror" || controllerutil.ContainsFinalizer(sm, synccommon.SyncFinalizer) {
		t.Errorf("SimMachine mirror must be marked %s=Machine/mirror, without the sync finalizer: %v %v",
			synccommon.MirrorOfAnnotation, sm.Annotations, sm.Finalizers)
	}

	// Status flows from the authoritative side once the Machine API has provisioned it.
	e.Eventually(60*time.Second, "status mirrored", func(ctx context.Context) (bool, string, error) {
		capi, err := getCAPI(ctx, e, "mirror")
		if err != nil {
			return false, err.Error(), nil
		}
		return capi.Status.Phase == "Running" && capi.Status.NodeRef.Name != "" && capi.Spec.ProviderID != "",
			fmt.Sprintf("phase %q node %q providerID %q", capi.Status.Phase, capi.Status.NodeRef.Name, capi.Spec.ProviderID), nil
	})

	// Users cannot edit the paused copy (admission refuses); drift that gets past admission
	// (here written by a kube-system identity, which the policy lets through) is overwritten.
	capi, _ = getCAPI(ctx, e, "mirror")
	base := capi.DeepCopy()
	capi.Spec.FailureDomain = "sim-east-1c"
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
		capi, err := getCAPI(ctx, e, "mirror")
		if err != nil {
			return false, err.Error(), nil
		}
		return capi.Spec.FailureDomain == "sim-east-1b", capi.Spec.FailureDomain, nil
	})

	// Deleting the authoritative Machine API copy deletes the mirror too, once the instance is gone.
	m, _ = getMAPI(ctx, e, "mirror")
	if err := e.Client.Delete(ctx, m); err != nil {
		t.Fatal(err)
	}
	e.Eventually(60*time.Second, "both copies gone", func(ctx context.Context) (bool, string, error) {
		_, errM := getMAPI(ctx, e, "mirror")
		_, errC := getCAPI(ctx, e, "mirror")
		return apierrors.IsNotFound(errM) && apierrors.IsNotFound(errC), fmt.Sprintf("mapi: %v capi: %v", errM, errC), nil
	})
}

func testUnconvertible(t *testing.T) {
	e := env.For(t)
	ctx := context.Background()
	m := mapiMachine("elsewhere", "")
	m.Spec.ProviderSpec.Value = simSpec("sim-west-1", "sim-west-1a") // the cluster is in sim-east-1
	if err := e.Client.Create(ctx, m); err != nil {
		t.Fatal(err)
	}
	e.Eventually(60*time.Second, "Synchronized=False naming the field", func(ctx context.Context) (bool, string, error) {
		m, err := getMAPI(ctx, e, "elsewhere")
		if err != nil {
			return false, err.Error(), nil
		}
		c := mapicond.Get(m.Status.Conditions, synccommon.SynchronizedCondition)
		return c != nil && c.Status == corev1.ConditionFalse && c.Reason == synccommon.ConversionFailedReason &&
			strings.Contains(c.Message, "spec.providerSpec.value.region"), synchronized(m), nil
	})
	if _, err := getCAPI(ctx, e, "elsewhere"); !apierrors.IsNotFound(err) {
		t.Fatalf("a Cluster API copy was written for an unconvertible Machine: %v", err)
	}
	if err := e.Client.Get(ctx, client.ObjectKey{Namespace: capiNS, Name: "elsewhere"}, &infrav1.SimMachine{}); !apierrors.IsNotFound(err) {
		t.Fatalf("a SimMachine was written for an unconvertible Machine: %v", err)
	}
	m, _ = getMAPI(ctx, e, "elsewhere")
	_ = e.Client.Delete(ctx, m)
}

func testClusterAPIFromBirth(t *testing.T) {
	e := env.For(t)
	ctx := context.Background()
	if err := e.Client.Create(ctx, mapiMachine("born-capi", machinev1beta1.MachineAuthorityClusterAPI)); err != nil {
		t.Fatal(err)
	}
	e.Eventually(60*time.Second, "unpaused Cluster API copy", func(ctx context.Context) (bool, string, error) {
		capi, err := getCAPI(ctx, e, "born-capi")
		if err != nil {
			return false, err.Error(), nil
		}
		_, paused := capi.Annotations[clusterv1.PausedAnnotation]
		return !paused, fmt.Sprintf("annotations %v", capi.Annotations), nil
	})
	m, err := getMAPI(ctx, e, "born-capi")
	if err != nil {
		t.Fatal(err)
	}
	if m.Status.AuthoritativeAPI != machinev1beta1.MachineAuthorityClusterAPI {
		t.Fatalf("status.authoritativeAPI %q", m.Status.AuthoritativeAPI)
	}
	if controllerutil.ContainsFinalizer(m, machinev1beta1.MachineFinalizer) || m.Spec.ProviderID != nil {
		t.Fatalf("the Machine API controller acted on a Cluster API-authoritative Machine: %v %v", m.Finalizers, m.Spec.ProviderID)
	}
}

func testMirrorExists(t *testing.T) {
	e := env.For(t)
	ctx := context.Background()
	// A Cluster API Machine and SimMachine made by hand, then a Machine API copy of the same name.
	sm := &infrav1.SimMachine{ObjectMeta: metav1.ObjectMeta{Name: "existing", Namespace: capiNS},
		Spec: infrav1.SimMachineSpec{InstanceSpec: infrav1.InstanceSpec{InstanceType: "s1.xlarge", Image: "sim-rhcos-9"}}}
	capi := &clusterv1.Machine{ObjectMeta: metav1.ObjectMeta{Name: "existing", Namespace: capiNS,
		Labels: map[string]string{clusterv1.ClusterNameLabel: cluster}},
		Spec: clusterv1.MachineSpec{ClusterName: cluster, FailureDomain: "sim-east-1c",
			InfrastructureRef: clusterv1.ContractVersionedObjectReference{APIGroup: infrav1.GroupName, Kind: "SimMachine", Name: "existing"},
			Bootstrap:         clusterv1.Bootstrap{DataSecretName: ptr.To("worker-user-data")}}}
	for _, o := range []client.Object{sm, capi} {
		if err := e.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	if err := e.Client.Create(ctx, mapiMachine("existing", "")); err != nil {
		t.Fatal(err)
	}
	var m *machinev1beta1.Machine
	e.Eventually(60*time.Second, "Machine API copy synced from the Cluster API", func(ctx context.Context) (bool, string, error) {
		var err error
		if m, err = getMAPI(ctx, e, "existing"); err != nil {
			return false, err.Error(), nil
		}
		var ps infrav1.SimMachineProviderSpec
		_ = json.Unmarshal(m.Spec.ProviderSpec.Value.Raw, &ps)
		return m.Status.AuthoritativeAPI == machinev1beta1.MachineAuthorityClusterAPI && ps.InstanceType == "s1.xlarge" &&
				ps.Zone == "sim-east-1c" && mapicond.IsTrue(m.Status.Conditions, synccommon.SynchronizedCondition),
			fmt.Sprintf("authority %q providerSpec %+v %s", m.Status.AuthoritativeAPI, ps, synchronized(m)), nil
	})
	got, err := getCAPI(ctx, e, "existing")
	if err != nil {
		t.Fatal(err)
	}
	if _, paused := got.Annotations[clusterv1.PausedAnnotation]; paused {
		t.Errorf("the authoritative Cluster API Machine was paused")
	}
	if m.Spec.AuthoritativeAPI != machinev1beta1.MachineAuthorityMachineAPI {
		t.Errorf("spec.authoritativeAPI was rewritten to %q", m.Spec.AuthoritativeAPI)
	}
}

// testPausedMirrorFirst: a paused Cluster API mirror left from before (its Machine API copy
// deleted and created again, a restore) does not make the Cluster API authoritative against a
// spec that says MachineAPI: the new Machine API spec wins and overwrites the stale mirror.
func testPausedMirrorFirst(t *testing.T) {
	e := env.For(t)
	ctx := context.Background()
	sm := &infrav1.SimMachine{ObjectMeta: metav1.ObjectMeta{Name: "stale", Namespace: capiNS,
		Annotations: map[string]string{clusterv1.PausedAnnotation: ""}},
		Spec: infrav1.SimMachineSpec{InstanceSpec: infrav1.InstanceSpec{InstanceType: "s1.xlarge", Image: "sim-rhcos-9"}}}
	capi := &clusterv1.Machine{ObjectMeta: metav1.ObjectMeta{Name: "stale", Namespace: capiNS,
		Labels: map[string]string{clusterv1.ClusterNameLabel: cluster}, Annotations: map[string]string{clusterv1.PausedAnnotation: ""}},
		Spec: clusterv1.MachineSpec{ClusterName: cluster, FailureDomain: "sim-east-1c",
			InfrastructureRef: clusterv1.ContractVersionedObjectReference{APIGroup: infrav1.GroupName, Kind: "SimMachine", Name: "stale"},
			Bootstrap:         clusterv1.Bootstrap{DataSecretName: ptr.To("worker-user-data")}}}
	for _, o := range []client.Object{sm, capi} {
		if err := e.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	if err := e.Client.Create(ctx, mapiMachine("stale", machinev1beta1.MachineAuthorityMachineAPI)); err != nil {
		t.Fatal(err)
	}
	e.Eventually(60*time.Second, "the mirror takes the Machine API spec", func(ctx context.Context) (bool, string, error) {
		sm := &infrav1.SimMachine{}
		if err := e.Client.Get(ctx, client.ObjectKey{Namespace: capiNS, Name: "stale"}, sm); err != nil {
			return false, err.Error(), nil
		}
		m, err := getMAPI(ctx, e, "stale")
		if err != nil {
			return false, err.Error(), nil
		}
		var ps infrav1.SimMachineProviderSpec
		_ = json.Unmarshal(m.Spec.ProviderSpec.Value.Raw, &ps)
		return m.Status.AuthoritativeAPI == machinev1beta1.MachineAuthorityMachineAPI && ps.InstanceType == "s1.large" &&
				sm.Spec.InstanceType == "s1.large" && mapicond.IsTrue(m.Status.Conditions, synccommon.SynchronizedCondition),
			fmt.Sprintf("status %q spec instance type %q mirror %q %s", m.Status.AuthoritativeAPI, ps.InstanceType, sm.Spec.InstanceType, synchronized(m)), nil
	})
}

func testCAPIDeletedRecreated(t *testing.T) {
	e := env.For(t)
	ctx := context.Background()
	if err := e.Client.Create(ctx, mapiMachine("recreate", "")); err != nil {
		t.Fatal(err)
	}
	waitSynchronized(t, e, "recreate")
	capi, err := getCAPI(ctx, e, "recreate")
	if err != nil {
		t.Fatal(err)
	}
	old := capi.UID
	if err := e.Client.Delete(ctx, capi); err != nil {
		t.Fatal(err)
	}
	e.Eventually(60*time.Second, "mirror recreated", func(ctx context.Context) (bool, string, error) {
		capi, err := getCAPI(ctx, e, "recreate")
		if err != nil {
			return false, err.Error(), nil
		}
		return capi.UID != old && capi.DeletionTimestamp.IsZero(), string(capi.UID), nil
	})
	if _, err := getMAPI(ctx, e, "recreate"); err != nil {
		t.Fatalf("the authoritative Machine API Machine must stay: %v", err)
	}
}

func testStandaloneMAPIDeleted(t *testing.T) {
	e := env.For(t)
	ctx := context.Background()
	if err := e.Client.Create(ctx, mapiMachine("keep-capi", machinev1beta1.MachineAuthorityClusterAPI)); err != nil {
		t.Fatal(err)
	}
	e.Eventually(60*time.Second, "copy exists", func(ctx context.Context) (bool, string, error) {
		_, err := getCAPI(ctx, e, "keep-capi")
		return err == nil, fmt.Sprint(err), nil
	})
	m, _ := getMAPI(ctx, e, "keep-capi")
	if err := e.Client.Delete(ctx, m); err != nil {
		t.Fatal(err)
	}
	e.Eventually(60*time.Second, "Machine API copy gone", func(ctx context.Context) (bool, string, error) {
		_, err := getMAPI(ctx, e, "keep-capi")
		return apierrors.IsNotFound(err), fmt.Sprint(err), nil
	})
	time.Sleep(2 * time.Second)
	capi, err := getCAPI(ctx, e, "keep-capi")
	if err != nil || !capi.DeletionTimestamp.IsZero() {
		t.Fatalf("the authoritative Cluster API Machine must keep running: %v %v", err, capi.DeletionTimestamp)
	}
	if controllerutil.ContainsFinalizer(capi, synccommon.SyncFinalizer) {
		t.Errorf("sync finalizer left on the Cluster API Machine: %v", capi.Finalizers)
	}
}
