// Package external is how the Cluster API controllers deal with provider objects they do not
// know the Go types of: InfraClusters, InfraMachines and bootstrap configs. A
// ContractVersionedObjectReference names only group, kind and name; the version to read, and
// the contract the provider follows (which says where fields such as "provisioned" live), come
// from labels on the provider's CustomResourceDefinition:
//
//	metadata.labels["cluster.x-k8s.io/v1beta2"] = "v1alpha1_v1alpha2"
//
// means the CRD's versions v1alpha1 and v1alpha2 follow the v1beta2 contract. Everything
// else is read and written as unstructured data.
package external

import (
	"context"
	"fmt"
	"sort"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/version"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Contract is a Cluster API contract version a provider's CRD declares.
type Contract string

// The contracts the controllers understand, newest first.
const (
	ContractV1Beta2 Contract = "v1beta2"
	ContractV1Beta1 Contract = "v1beta1"
)

// contractLabel is the CRD label that lists the versions following a contract.
func contractLabel(c Contract) string { return clusterv1.GroupVersion.Group + "/" + string(c) }

// Resolved is a reference resolved to a concrete version.
type Resolved struct {
	GVK      schema.GroupVersionKind
	Contract Contract
}

// Resolver maps references to versions and contracts. Reader reads CRDs (a cached client is
// fine); Mapper finds the resource (plural) of a kind.
type Resolver struct {
	Reader client.Reader
	Mapper meta.RESTMapper
}

// Resolve finds the version of ref's kind that follows the newest contract the controllers
// understand. The error says what is wrong in words fit for a condition message.
func (r *Resolver) Resolve(ctx context.Context, ref clusterv1.ContractVersionedObjectReference) (Resolved, error) {
	gk := schema.GroupKind{Group: ref.APIGroup, Kind: ref.Kind}
	mapping, err := r.Mapper.RESTMapping(gk)
	if err != nil {
		if meta.IsNoMatchError(err) {
			// A CRD installed after the mapper last looked is found on a later try.
			if rm, ok := r.Mapper.(interface{ Reset() }); ok {
				rm.Reset()
			}
		}
		return Resolved{}, fmt.Errorf("resolving %s: %w", gk, err)
	}
	name := mapping.Resource.Resource + "." + gk.Group
	var crd apiextensionsv1.CustomResourceDefinition
	if err := r.Reader.Get(ctx, client.ObjectKey{Name: name}, &crd); err != nil {
		return Resolved{}, fmt.Errorf("reading CustomResourceDefinition %s: %w", name, err)
	}
	return ResolveCRD(&crd, gk.Kind)
}

// ResolveCRD picks the version of crd to use: among the served versions listed by the newest
// contract label present, the highest by Kubernetes version ordering.
func ResolveCRD(crd *apiextensionsv1.CustomResourceDefinition, kind string) (Resolved, error) {
	served := map[string]bool{}
	for _, v := range crd.Spec.Versions {
		if v.Served {
			served[v.Name] = true
		}
	}
	for _, c := range []Contract{ContractV1Beta2, ContractV1Beta1} {
		value, ok := crd.Labels[contractLabel(c)]
		if !ok {
			continue
		}
		var versions []string
		for _, v := range strings.Split(value, "_") {
			if served[v] {
				versions = append(versions, v)
			}
		}
		if len(versions) == 0 {
			return Resolved{}, fmt.Errorf("CustomResourceDefinition %s: label %s=%q names no served version",
				crd.Name, contractLabel(c), value)
		}
		sort.Slice(versions, func(i, j int) bool {
			return version.CompareKubeAwareVersionStrings(versions[i], versions[j]) > 0
		})
		return Resolved{GVK: schema.GroupVersionKind{Group: crd.Spec.Group, Version: versions[0], Kind: kind}, Contract: c}, nil
	}
	return Resolved{}, fmt.Errorf("CustomResourceDefinition %s has no %s or %s contract label",
		crd.Name, contractLabel(ContractV1Beta2), contractLabel(ContractV1Beta1))
}

// Get resolves ref and reads the object from namespace. A NotFound error is returned as is
// (test it with apierrors.IsNotFound).
func (r *Resolver) Get(ctx context.Context, c client.Reader, ref clusterv1.ContractVersionedObjectReference, namespace string) (*Object, error) {
	res, err := r.Resolve(ctx, ref)
	if err != nil {
		return nil, err
	}
	return r.Read(ctx, c, res, client.ObjectKey{Namespace: namespace, Name: ref.Name})
}

// Read reads the object key of a resolved kind through c.
func (r *Resolver) Read(ctx context.Context, c client.Reader, res Resolved, key client.ObjectKey) (*Object, error) {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(res.GVK)
	if err := c.Get(ctx, key, u); err != nil {
		return nil, err
	}
	return &Object{Unstructured: u, Contract: res.Contract}, nil
}

// Delete resolves ref and deletes the object; it reports whether the object is gone (it was
// not found). A deletion already under way is not an error.
func (r *Resolver) Delete(ctx context.Context, c client.Client, ref clusterv1.ContractVersionedObjectReference, namespace string) (gone bool, err error) {
	obj, err := r.Get(ctx, c, ref, namespace)
	if apierrors.IsNotFound(err) {
		// The object is gone (or its CRD is: the provider was uninstalled). A kind the
		// RESTMapper does not know is an error, not "gone": discovery may be lagging, and
		// skipping the deletion would orphan the provider's infrastructure.
		return true, nil
	}
	if err != nil {
		return false, err
	}
	if obj.GetDeletionTimestamp() != nil {
		return false, nil
	}
	if err := c.Delete(ctx, obj.Unstructured); err != nil && !apierrors.IsNotFound(err) {
		return false, err
	}
	return false, nil
}

// Pass is a Resolver for one pass over many references: each kind is resolved once (a
// RESTMapper lookup and a CRD read from the cache) and the answer reused for the rest of
// the pass. A pass over a MachineSet of thousands resolved the same two kinds per Machine.
type Pass struct {
	r    *Resolver
	done map[schema.GroupKind]passAnswer
}

type passAnswer struct {
	res Resolved
	err error
}

// Pass starts a pass.
func (r *Resolver) Pass() *Pass { return &Pass{r: r, done: map[schema.GroupKind]passAnswer{}} }

// Resolve is Resolver.Resolve, once per kind in the pass.
func (p *Pass) Resolve(ctx context.Context, ref clusterv1.ContractVersionedObjectReference) (Resolved, error) {
	gk := schema.GroupKind{Group: ref.APIGroup, Kind: ref.Kind}
	a, ok := p.done[gk]
	if !ok {
		a.res, a.err = p.r.Resolve(ctx, ref)
		p.done[gk] = a
	}
	return a.res, a.err
}

// Get is Resolver.Get with the kind resolved once per pass.
func (p *Pass) Get(ctx context.Context, c client.Reader, ref clusterv1.ContractVersionedObjectReference, namespace string) (*Object, error) {
	res, err := p.Resolve(ctx, ref)
	if err != nil {
		return nil, err
	}
	return p.r.Read(ctx, c, res, client.ObjectKey{Namespace: namespace, Name: ref.Name})
}
