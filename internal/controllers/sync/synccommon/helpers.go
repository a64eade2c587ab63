package synccommon

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/machina-dev/machina/internal/patch"
)

// RequeueOnConflict turns an optimistic-lock conflict into a quiet requeue: the reconcile
// worked from a stale copy and must run again, even if no newer event is on its way.
func RequeueOnConflict(res ctrl.Result, err error) (ctrl.Result, error) {
	if apierrors.IsConflict(err) {
		return ctrl.Result{RequeueAfter: patch.ConflictRetry}, nil
	}
	return res, err
}

// MergeMap sets every key of from in into (creating it if needed). Keys only in into stay:
// other controllers may own them.
func MergeMap(into, from map[string]string) map[string]string {
	if len(from) == 0 {
		return into
	}
	if into == nil {
		into = map[string]string{}
	}
	for k, v := range from {
		into[k] = v
	}
	return into
}

// Release removes the sync finalizer, and the given finalizers no controller will remove any
// more, from o.
func Release(ctx context.Context, c client.Client, o client.Object, others ...string) error {
	_, err := patch.RemoveFinalizer(ctx, c, o, append([]string{SyncFinalizer}, others...)...)
	return err
}

// CopySpec sets dst's spec to src's (both the same Go type with a Spec field).
func CopySpec(src, dst client.Object) error {
	sv, dv := reflect.ValueOf(src).Elem().FieldByName("Spec"), reflect.ValueOf(dst).Elem().FieldByName("Spec")
	if !sv.IsValid() || !dv.IsValid() || sv.Type() != dv.Type() {
		return fmt.Errorf("cannot copy the spec of %T to %T", src, dst)
	}
	dv.Set(sv)
	return nil
}

// KeepProviderID puts back the spec.providerID that obj had in before when a copy of the
// other side's spec left it empty. A providerID is not a wish but a record: the instance a
// controller launched for the Machine. The side the spec comes from may not know it yet (an
// instance the Cluster API side launched while a handover from the Machine API had unpaused
// it, which the migration hands to the Machine API copy before letting the provider go), and
// clearing it would leave that instance running with no controller that knows it. obj and
// before are the same InfraMachine type, whose spec.providerID is a string or *string (the
// contract's field, typed per provider).
func KeepProviderID(obj, before client.Object) {
	field := func(o client.Object) reflect.Value {
		spec := reflect.ValueOf(o).Elem().FieldByName("Spec")
		if !spec.IsValid() {
			return reflect.Value{}
		}
		return spec.FieldByName("ProviderID")
	}
	now, was := field(obj), field(before)
	if !now.IsValid() || !was.IsValid() || now.Type() != was.Type() {
		return
	}
	switch now.Kind() {
	case reflect.String:
		if now.String() == "" {
			now.Set(was)
		}
	case reflect.Pointer:
		if now.IsNil() || now.Elem().Kind() == reflect.String && now.Elem().String() == "" {
			now.Set(was)
		}
	}
}

// EnsureUserData copies the Machine API user-data Secret name (key userData) from srcNS into
// dstNS as a Cluster API bootstrap data Secret (key value, cluster-name label), which is what
// Cluster API providers read. Ignition user data (what OpenShift stores) is marked so (key
// format, "ignition"), as the bootstrap contract asks; a format already there is kept. A
// missing source Secret is not an error: the Machine waits.
func EnsureUserData(ctx context.Context, c client.Client, srcNS, dstNS string, name *string, clusterName string) error {
	if name == nil || *name == "" {
		return nil
	}
	src := &corev1.Secret{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: srcNS, Name: *name}, src); err != nil {
		return client.IgnoreNotFound(err)
	}
	dst := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: dstNS, Name: *name}}
	_, err := controllerutil.CreateOrPatch(ctx, c, dst, func() error {
		if dst.Data == nil {
			dst.Data = map[string][]byte{}
		}
		dst.Data["value"] = src.Data["userData"]
		if _, set := dst.Data["format"]; !set && isIgnition(src.Data["userData"]) {
			dst.Data["format"] = []byte(IgnitionFormat)
		}
		if dst.Labels == nil {
			dst.Labels = map[string]string{}
		}
		dst.Labels[clusterv1.ClusterNameLabel] = clusterName
		return nil
	})
	if apierrors.IsAlreadyExists(err) {
		// Another worker (a MachineSet of the same cluster) created it from the same source
		// since this one's cache was filled: nothing is left to do.
		return nil
	}
	return err
}

// IgnitionFormat is the bootstrap data Secret's format for an Ignition config.
const IgnitionFormat = "ignition"

// isIgnition reports user data that is an Ignition config: a JSON object with an "ignition"
// object (which carries its version).
func isIgnition(data []byte) bool {
	var cfg struct {
		Ignition *struct {
			Version string `json:"version"`
		} `json:"ignition"`
	}
	return json.Unmarshal(data, &cfg) == nil && cfg.Ignition != nil
}
