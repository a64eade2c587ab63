// Package synctest is what the rule table tests of the three sync controllers (machinesync,
// machinesetsync, mhcsync) share: a fake API server that logs every write and checks what
// each write promises (harness.go), the run of a table of rows to the sync's fixed point, the
// assertions the rows make on the settled store (checks.go), and the cluster's objects and
// the object options those rows are built from (this file). Each sync's tests keep only
// what is their kind's: its builders, its kind's checks and its rows. Go's internal rule
// keeps it to the sync's packages, and only their tests import it.
package synctest

import (
	"fmt"
	"testing"

	configv1 "github.com/openshift/api/config/v1"
	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/machina-dev/machina/internal/authority"
)

// The cluster every row runs in.
const (
	// MachineAPINamespace and ClusterAPINamespace are the two copies' namespaces.
	MachineAPINamespace = authority.DefaultMachineAPINamespace
	ClusterAPINamespace = authority.DefaultClusterAPINamespace
	// ClusterName is the Infrastructure's name of the cluster, and its Cluster's.
	ClusterName = "lab"
	// UserData is the Machine API user-data Secret the rows' providerSpecs name (testenv's test
	// providerSpecs name this one).
	UserData = "worker-user-data"
	// maxPasses bounds the passes a row may take to reach its fixed point: far more than any
	// rule needs, few enough that a sync writing on every pass fails quickly.
	maxPasses = 20
)

// The two authorities a row requests or decides.
const (
	MachineAPI = machinev1beta1.MachineAuthorityMachineAPI
	ClusterAPI = machinev1beta1.MachineAuthorityClusterAPI
)

// Namespaces is the namespace pair the syncs run with.
var Namespaces = authority.Namespaces{MachineAPI: MachineAPINamespace, ClusterAPI: ClusterAPINamespace}

// Infrastructure names the cluster: all a MachineHealthCheck's conversion reads.
func Infrastructure() client.Object {
	return &configv1.Infrastructure{ObjectMeta: metav1.ObjectMeta{Name: "cluster"},
		Spec:   configv1.InfrastructureSpec{PlatformSpec: configv1.PlatformSpec{Type: configv1.NonePlatformType}},
		Status: configv1.InfrastructureStatus{InfrastructureName: ClusterName, PlatformStatus: &configv1.PlatformStatus{Type: configv1.NonePlatformType}}}
}

// ClusterObjects are what every platform's conversion context reads besides the platform's
// own Cluster objects (a test adds those, e.g. testenv.SimClusterObjects): the
// Infrastructure naming the cluster, and the Machine API user-data Secret the rows'
// providerSpecs name.
func ClusterObjects() []client.Object {
	return []client.Object{
		Infrastructure(),
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: UserData, Namespace: MachineAPINamespace}, Data: map[string][]byte{"userData": []byte("#cloud-config\n")}},
	}
}

// SetLabels are the labels selecting a Machine API MachineSet's Machines.
func SetLabels(name string) map[string]string {
	return map[string]string{"machine.openshift.io/cluster-api-cluster": ClusterName, "machine.openshift.io/cluster-api-machineset": name}
}

// Objs is a row's Before that needs no conversion.
func Objs(o ...client.Object) func(*testing.T) []client.Object {
	return func(*testing.T) []client.Object { return o }
}

// Paused adds the Cluster API paused annotation.
func Paused[T client.Object](o T) T {
	authority.SetPaused(o, true)
	return o
}

// WithFinalizers adds finalizers.
func WithFinalizers[T client.Object](o T, f ...string) T {
	for _, x := range f {
		controllerutil.AddFinalizer(o, x)
	}
	return o
}

// Deleting marks o as being deleted (it must carry a finalizer).
func Deleting[T client.Object](o T) T {
	now := metav1.Now()
	o.SetDeletionTimestamp(&now)
	return o
}

// Annotated sets an annotation.
func Annotated[T client.Object](o T, k, v string) T {
	a := o.GetAnnotations()
	if a == nil {
		a = map[string]string{}
	}
	a[k] = v
	o.SetAnnotations(a)
	return o
}

// Unowned drops o's owner references.
func Unowned[T client.Object](o T) T {
	o.SetOwnerReferences(nil)
	return o
}

// Opt changes a Machine API object a row's builder makes (each sync's tests have their
// kind's builder, taking these and their kind's own).
type Opt func(client.Object)

// Generation sets metadata.generation.
func Generation(g int64) Opt { return func(o client.Object) { o.SetGeneration(g) } }

// The options below are of a Machine API Machine or MachineSet, whose authority is in their
// spec and status (a MachineHealthCheck's is in annotations: mhcsync's own options).

// Requested sets spec.authoritativeAPI only (no decision yet).
func Requested(a machinev1beta1.MachineAuthority) Opt {
	return func(o client.Object) { *authorityOf(o).spec = a }
}

// Decided sets spec.authoritativeAPI and the decided status.authoritativeAPI and
// synchronizedAPI, as they stand outside a migration.
func Decided(a machinev1beta1.MachineAuthority) Opt {
	return func(o client.Object) {
		f := authorityOf(o)
		*f.spec, *f.status, *f.synchronizedAPI = a, a, authority.SynchronizedAPIOf(a)
	}
}

// Migrating is a handover from the Machine API to the Cluster API under way.
func Migrating() Opt {
	return func(o client.Object) {
		f := authorityOf(o)
		*f.spec, *f.status = ClusterAPI, machinev1beta1.MachineAuthorityMigrating
		*f.synchronizedAPI = machinev1beta1.MachineAPISynchronized
	}
}

// SyncedAt sets status.synchronizedGeneration.
func SyncedAt(g int64) Opt {
	return func(o client.Object) { *authorityOf(o).synchronizedGeneration = g }
}

// authorityFields point at the authority fields of a Machine API Machine or MachineSet.
type authorityFields struct {
	spec, status           *machinev1beta1.MachineAuthority
	synchronizedAPI        *machinev1beta1.SynchronizedAPI
	synchronizedGeneration *int64
	conditions             *[]machinev1beta1.Condition
}

func authorityOf(o client.Object) authorityFields {
	switch o := o.(type) {
	case *machinev1beta1.Machine:
		return authorityFields{&o.Spec.AuthoritativeAPI, &o.Status.AuthoritativeAPI, &o.Status.SynchronizedAPI,
			&o.Status.SynchronizedGeneration, &o.Status.Conditions}
	case *machinev1beta1.MachineSet:
		return authorityFields{&o.Spec.AuthoritativeAPI, &o.Status.AuthoritativeAPI, &o.Status.SynchronizedAPI,
			&o.Status.SynchronizedGeneration, &o.Status.Conditions}
	}
	panic(fmt.Sprintf("synctest: %T has no authority fields (a Machine API Machine or MachineSet has)", o))
}
