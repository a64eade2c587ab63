package synccommon

import (
	"context"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
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
