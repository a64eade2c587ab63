package synccommon

import (
	"context"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/tools/record"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/machina-dev/machina/internal/patch"
)

// GetCopies reads the Machine API copy at key into mapi and its Cluster API namesake in
// capiNS into capi; a copy that does not exist comes back nil.
func GetCopies[M, C client.Object](ctx context.Context, c client.Reader, key types.NamespacedName, capiNS string, mapi M, capi C) (M, C, error) {
	var noM M
	var noC C
	if err := c.Get(ctx, key, mapi); apierrors.IsNotFound(err) {
		mapi = noM
	} else if err != nil {
		return noM, noC, err
	}
	if err := c.Get(ctx, client.ObjectKey{Namespace: capiNS, Name: key.Name}, capi); apierrors.IsNotFound(err) {
		capi = noC
	} else if err != nil {
		return noM, noC, err
	}
	return mapi, capi, nil
}

// WriteSynchronized records a sync's outcome on a Machine API object: the Synchronized
// condition in conds and, when generation > 0, *synced = generation (synced may be nil for
// kinds that keep it elsewhere). New conversion errors also become a warning event. conds
// and synced point into obj; the status is patched once, with optimistic locking, and only
// when something changed.
func WriteSynchronized(ctx context.Context, c client.Client, rec record.EventRecorder, obj client.Object,
	conds *[]machinev1beta1.Condition, synced *int64, reason string, errs field.ErrorList, detail error, generation int64) error {
	_, err := patch.LockedStatus(ctx, c, obj, func() bool {
		changed := SetSynchronized(conds, reason, errs, detail)
		if len(errs) > 0 && changed && rec != nil {
			rec.Eventf(obj, corev1.EventTypeWarning, reason, "Cannot synchronise: %s", errs.ToAggregate().Error())
		}
		if synced != nil && generation > 0 && *synced != generation {
			*synced = generation
			changed = true
		}
		return changed
	})
	return err
}
