package platform

import (
	"context"
	"errors"
	"fmt"

	configv1 "github.com/openshift/api/config/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/machina-dev/machina/internal/convert"
)

// The reads below are what the platforms' NewContext share: the cluster-wide objects a
// conversion context comes from.

// StatusOrInfraCluster is the context builder of the platforms whose Infrastructure status
// gives the context and whose InfraCluster (cl, of kind), when the cluster has one, adds to
// it: with the platform's status, fromStatus builds the context and apply (the platform's
// ApplyClusterObject) adds the InfraCluster unless the cluster has none (any other error
// reading it is returned); without that status, the InfraCluster alone gives the context
// (fromCluster).
func StatusOrInfraCluster[T client.Object](ctx context.Context, c client.Reader, infra *configv1.Infrastructure, ns string,
	platformType configv1.PlatformType, cl T, kind string,
	fromStatus func(*configv1.Infrastructure) (convert.Context, error),
	apply func(convert.Platform, client.Object) convert.Platform,
	fromCluster func(clusterName string, cl T) (convert.Context, error)) (convert.Context, error) {
	name, err := convert.ClusterNameFromInfrastructure(infra)
	if err != nil {
		return convert.Context{}, err
	}
	clErr := InfraCluster(ctx, c, ns, name, cl, kind)
	if ps := infra.Status.PlatformStatus; ps != nil && ps.Type == platformType {
		cc, err := fromStatus(infra)
		if err != nil {
			return convert.Context{}, err
		}
		switch {
		case clErr == nil:
			cc.Platform = apply(cc.Platform, cl)
		case !Absent(clErr):
			return convert.Context{}, clErr
		}
		return cc, nil
	}
	if clErr != nil {
		return convert.Context{}, clErr
	}
	return fromCluster(name, cl)
}

// Absent reports whether reading the cluster's InfraCluster failed because there is none: no
// Cluster, a Cluster on another kind of InfraCluster, no such object, or no such CRD.
func Absent(err error) bool {
	return apierrors.IsNotFound(err) || meta.IsNoMatchError(err) || errors.Is(err, ErrOtherInfraKind)
}

// ErrOtherInfraKind is wrapped by InfraCluster's error when the Cluster references an
// InfraCluster of another kind than asked for.
var ErrOtherInfraKind = errors.New("another infrastructure kind")

// InfraCluster reads the InfraCluster the Cluster API Cluster named clusterName in ns points
// at into out, checking that it is of out's kind.
func InfraCluster(ctx context.Context, c client.Reader, ns, clusterName string, out client.Object, kind string) error {
	cluster := &clusterv1.Cluster{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: clusterName}, cluster); err != nil {
		return fmt.Errorf("reading Cluster %s/%s: %w", ns, clusterName, err)
	}
	ref := cluster.Spec.InfrastructureRef
	if ref.Kind != kind {
		return fmt.Errorf("the Cluster %s/%s: spec.infrastructureRef is %q, not a %s: %w", ns, clusterName, ref.Kind, kind, ErrOtherInfraKind)
	}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: ref.Name}, out); err != nil {
		return fmt.Errorf("reading %s %s/%s: %w", kind, ns, ref.Name, err)
	}
	return nil
}
