package convert

import (
	"fmt"
	"strconv"

	mapiv1beta1 "github.com/openshift/api/machine/v1beta1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// ClusterAPIMachineSet is a Cluster API MachineSet and the InfraMachineTemplate it references.
type ClusterAPIMachineSet struct {
	MachineSet           *clusterv1.MachineSet
	InfraMachineTemplate client.Object
}

// ToClusterAPIMachineSet converts a Machine API MachineSet into a Cluster API MachineSet and
// its InfraMachineTemplate. The template is named by TemplateName, so converting the same
// providerSpec again (for example after reverting a change) yields the same template name.
func ToClusterAPIMachineSet(in *mapiv1beta1.MachineSet, c Context) (*ClusterAPIMachineSet, Warnings, field.ErrorList) {
	r := &Report{}
	if !c.check(in == nil, r) {
		w, e := r.sorted()
		return nil, w, e
	}
	meta := field.NewPath("metadata")
	spec := field.NewPath("spec")
	tmpl := spec.Child("template")
	tmeta := tmpl.Child("metadata")
	tspec := tmpl.Child("spec")

	annotations := copyMap(in.Annotations)
	if annotations == nil {
		annotations = map[string]string{}
	}
	dropLastApplied(annotations, meta.Child("annotations"), r)
	pairsToCAPI(annotations, machineSetAnnotationPairs, meta.Child("annotations"), r)
	capacityToCAPI(annotations, meta.Child("annotations"), r)

	out := &clusterv1.MachineSet{
		TypeMeta: metav1.TypeMeta{APIVersion: clusterv1.GroupVersion.String(), Kind: "MachineSet"},
		ObjectMeta: metav1.ObjectMeta{
			Name:        in.Name,
			Namespace:   c.Namespaces.toCAPI(in.Namespace, meta.Child("namespace"), r),
			Labels:      c.clusterLabelToCAPI(in.Labels, meta.Child("labels"), true, r),
			Annotations: nilIfEmpty(annotations),
		},
	}
	out.Spec.ClusterName = c.ClusterName
	out.Spec.Replicas = copyInt32(in.Spec.Replicas)
	out.Spec.Selector = *in.Spec.Selector.DeepCopy()
	out.Spec.Selector.MatchLabels = c.clusterLabelToCAPI(in.Spec.Selector.MatchLabels, spec.Child("selector", "matchLabels"), false, r)
	switch p := in.Spec.DeletePolicy; p {
	case "":
	case string(mapiv1beta1.RandomMachineSetDeletePolicy), string(mapiv1beta1.NewestMachineSetDeletePolicy), string(mapiv1beta1.OldestMachineSetDeletePolicy):
		out.Spec.Deletion.Order = clusterv1.MachineSetDeletionOrder(p)
	default:
		r.Error(field.NotSupported(spec.Child("deletePolicy"), p, []string{"Random", "Newest", "Oldest"}))
	}

	t := &in.Spec.Template
	if t.ObjectMeta.Name != "" || t.ObjectMeta.GenerateName != "" || t.ObjectMeta.Namespace != "" || len(t.ObjectMeta.OwnerReferences) > 0 {
		r.Warn(tmeta, "name, generateName, namespace and ownerReferences are ignored by the Machine API and dropped")
	}
	if t.Spec.ProviderID != nil && *t.Spec.ProviderID != "" {
		r.Error(field.Invalid(tspec.Child("providerID"), *t.Spec.ProviderID, "a machine template cannot name one instance"))
	}
	labels, tannotations, mspec, infra := c.machineToCAPI(t.ObjectMeta.Labels, t.ObjectMeta.Annotations, tmeta, &t.Spec, tspec, r)
	out.Spec.Template.Labels = labels
	out.Spec.Template.Annotations = tannotations
	out.Spec.Template.Spec = mspec
	if in.Spec.MinReadySeconds != 0 {
		out.Spec.Template.Spec.MinReadySeconds = ptr.To(in.Spec.MinReadySeconds)
	}
	if r.HasErrors() {
		w, e := r.sorted()
		return nil, w, e
	}
	it := c.Platform.NewInfraMachineTemplate(infra)
	name, err := TemplateName(in.Name, infra)
	if err != nil {
		r.Error(field.InternalError(tspec.Child("providerSpec"), err))
		w, e := r.sorted()
		return nil, w, e
	}
	it.SetName(name)
	it.SetNamespace(out.Namespace)
	it.SetLabels(map[string]string{ClusterAPIClusterLabel: c.ClusterName})
	gvk := c.Platform.InfraMachineTemplateGVK()
	out.Spec.Template.Spec.InfrastructureRef = clusterv1.ContractVersionedObjectReference{APIGroup: gvk.Group, Kind: gvk.Kind, Name: name}
	w, e := r.sorted()
	return &ClusterAPIMachineSet{MachineSet: out, InfraMachineTemplate: it}, w, e
}

// ToMachineAPIMachineSet converts a Cluster API MachineSet and its InfraMachineTemplate back
// into a Machine API MachineSet. spec.authoritativeAPI and the template's authoritativeAPI are
// left empty for the caller to set.
func ToMachineAPIMachineSet(ms *clusterv1.MachineSet, tmpl client.Object, c Context) (*mapiv1beta1.MachineSet, Warnings, field.ErrorList) {
	r := &Report{}
	if !c.check(ms == nil, r) {
		w, e := r.sorted()
		return nil, w, e
	}
	meta := field.NewPath("MachineSet", "metadata")
	spec := field.NewPath("MachineSet", "spec")
	tpath := spec.Child("template")
	gvk := c.Platform.InfraMachineTemplateGVK()
	infraPath := field.NewPath(gvk.Kind, "spec", "template", "spec")

	var ispec InfraSpec
	ok := false
	if tmpl != nil {
		ispec, ok = c.Platform.SplitInfraMachineTemplate(tmpl, field.NewPath(gvk.Kind, "spec"), r)
	}
	if !ok {
		r.Error(field.Invalid(tpath.Child("spec", "infrastructureRef"), ms.Spec.Template.Spec.InfrastructureRef.Kind, "the "+gvk.Kind+" it references is required to convert this MachineSet"))
		w, e := r.sorted()
		return nil, w, e
	}
	if n := tmpl.GetName(); n != "" && n != ms.Spec.Template.Spec.InfrastructureRef.Name {
		r.Error(field.Invalid(tpath.Child("spec", "infrastructureRef", "name"), ms.Spec.Template.Spec.InfrastructureRef.Name, "does not name the "+gvk.Kind+" given ("+quote(n)+")"))
	}
	if ms.Spec.ClusterName != c.ClusterName {
		r.Error(field.Invalid(spec.Child("clusterName"), ms.Spec.ClusterName, "this cluster is "+quote(c.ClusterName)))
	}
	annotations := copyMap(ms.Annotations)
	if annotations == nil {
		annotations = map[string]string{}
	}
	dropLastApplied(annotations, meta.Child("annotations"), r)
	pairsToMAPI(annotations, machineSetAnnotationPairs, meta.Child("annotations"), r)
	capacityToMAPI(annotations, meta.Child("annotations"), r)

	out := &mapiv1beta1.MachineSet{
		TypeMeta: metav1.TypeMeta{APIVersion: mapiv1beta1.GroupVersion.String(), Kind: "MachineSet"},
		ObjectMeta: metav1.ObjectMeta{
			Name:        ms.Name,
			Namespace:   c.Namespaces.toMAPI(ms.Namespace, meta.Child("namespace"), r),
			Labels:      c.clusterLabelToMAPI(ms.Labels, meta.Child("labels"), true, r),
			Annotations: nilIfEmpty(annotations),
		},
	}
	out.Spec.Replicas = copyInt32(ms.Spec.Replicas)
	out.Spec.Selector = *ms.Spec.Selector.DeepCopy()
	if _, ok := ms.Spec.Selector.MatchLabels[ClusterAPIClusterLabel]; !ok {
		r.Warn(spec.Child("selector", "matchLabels"), "has no %s label; converting back adds it", ClusterAPIClusterLabel)
	}
	out.Spec.Selector.MatchLabels = c.clusterLabelToMAPI(ms.Spec.Selector.MatchLabels, spec.Child("selector", "matchLabels"), false, r)
	if o := ms.Spec.Deletion.Order; o != "" {
		switch o {
		case clusterv1.RandomMachineSetDeletionOrder, clusterv1.NewestMachineSetDeletionOrder, clusterv1.OldestMachineSetDeletionOrder:
			out.Spec.DeletePolicy = string(o)
		default:
			r.Error(field.NotSupported(spec.Child("deletion", "order"), o, []string{"Random", "Newest", "Oldest"}))
		}
	}
	if t := ms.Spec.MachineNaming.Template; t != "" {
		r.Unsupported(spec.Child("machineNaming", "template"), t, MachineAPI)
	}

	t := &ms.Spec.Template
	if _, ok := t.Labels[ClusterAPIClusterLabel]; !ok {
		r.Warn(tpath.Child("metadata", "labels"), "has no %s label; converting back adds it", ClusterAPIClusterLabel)
	}
	if t.Spec.ProviderID != "" {
		r.Error(field.Invalid(tpath.Child("spec", "providerID"), t.Spec.ProviderID, "a machine template cannot name one instance"))
	}
	labels, annotationsT, mspec := c.machineToMAPI(t.Labels, t.Annotations, tpath.Child("metadata"), &t.Spec, tpath.Child("spec"), ispec, infraPath, gvk.Kind, r)
	out.Spec.Template.ObjectMeta.Labels = labels
	out.Spec.Template.ObjectMeta.Annotations = annotationsT
	out.Spec.Template.Spec = mspec
	if v := ptr.Deref(t.Spec.MinReadySeconds, 0); v != 0 {
		out.Spec.MinReadySeconds = v
	}
	if r.HasErrors() {
		w, e := r.sorted()
		return nil, w, e
	}
	w, e := r.sorted()
	return out, w, e
}

func copyInt32(p *int32) *int32 {
	if p == nil {
		return nil
	}
	return ptr.To(*p)
}

const mebibyte = 1 << 20

// capacityToCAPI rewrites the Machine API scale-from-zero hints whose values need converting:
// memoryMb (an integer count of MiB) becomes a quantity, GPU becomes gpu-count plus gpu-type.
// The vCPU and maxPods hints are renamed by machineSetAnnotationPairs; labels is shared.
func capacityToCAPI(a map[string]string, path *field.Path, r *Report) {
	if v, ok := a[MachineAPIMemoryAnnotation]; ok {
		if _, clash := a[CapacityMemoryAnnotation]; clash {
			r.Error(field.Invalid(path.Key(CapacityMemoryAnnotation), a[CapacityMemoryAnnotation], "conflicts with "+MachineAPIMemoryAnnotation))
		} else if n, err := strconv.ParseInt(v, 10, 64); err != nil || n < 0 || n > (1<<43) || strconv.FormatInt(n, 10) != v {
			r.Warn(path.Key(MachineAPIMemoryAnnotation), "not a whole number of MiB; copied unchanged, the Cluster API autoscaler ignores it")
		} else {
			delete(a, MachineAPIMemoryAnnotation)
			a[CapacityMemoryAnnotation] = fmt.Sprintf("%dMi", n)
		}
	}
	if v, ok := a[MachineAPIGPUAnnotation]; ok {
		if _, clash := a[CapacityGPUCountAnnotation]; clash {
			r.Error(field.Invalid(path.Key(CapacityGPUCountAnnotation), a[CapacityGPUCountAnnotation], "conflicts with "+MachineAPIGPUAnnotation))
		} else if n, err := strconv.ParseInt(v, 10, 64); err != nil || n < 0 || strconv.FormatInt(n, 10) != v {
			r.Warn(path.Key(MachineAPIGPUAnnotation), "not a whole number; copied unchanged, the Cluster API autoscaler ignores it")
		} else {
			delete(a, MachineAPIGPUAnnotation)
			a[CapacityGPUCountAnnotation] = strconv.FormatInt(n, 10)
			if t, ok := a[CapacityGPUTypeAnnotation]; !ok && n > 0 {
				a[CapacityGPUTypeAnnotation] = DefaultGPUType
			} else if ok && t == DefaultGPUType && n > 0 {
				r.Warn(path.Key(CapacityGPUTypeAnnotation), "implied by %s; dropped when converting back", MachineAPIGPUAnnotation)
			}
		}
	}
}

func capacityToMAPI(a map[string]string, path *field.Path, r *Report) {
	if v, ok := a[CapacityMemoryAnnotation]; ok {
		q, err := resource.ParseQuantity(v)
		_, clash := a[MachineAPIMemoryAnnotation]
		switch {
		case clash:
			r.Error(field.Invalid(path.Key(MachineAPIMemoryAnnotation), a[MachineAPIMemoryAnnotation], "conflicts with "+CapacityMemoryAnnotation))
		case err != nil || q.Sign() < 0 || q.Value()%mebibyte != 0:
			r.Warn(path.Key(CapacityMemoryAnnotation), "not a whole number of MiB; copied unchanged, the Machine API autoscaler ignores it")
		default:
			n := q.Value() / mebibyte
			if v != fmt.Sprintf("%dMi", n) {
				r.Warn(path.Key(CapacityMemoryAnnotation), "converting back writes it as %dMi", n)
			}
			delete(a, CapacityMemoryAnnotation)
			a[MachineAPIMemoryAnnotation] = strconv.FormatInt(n, 10)
		}
	}
	if v, ok := a[CapacityGPUCountAnnotation]; ok {
		n, err := strconv.ParseInt(v, 10, 64)
		_, clash := a[MachineAPIGPUAnnotation]
		switch {
		case clash:
			r.Error(field.Invalid(path.Key(MachineAPIGPUAnnotation), a[MachineAPIGPUAnnotation], "conflicts with "+CapacityGPUCountAnnotation))
		case err != nil || n < 0 || strconv.FormatInt(n, 10) != v:
			r.Warn(path.Key(CapacityGPUCountAnnotation), "not a whole number; copied unchanged, the Machine API autoscaler ignores it")
		default:
			delete(a, CapacityGPUCountAnnotation)
			a[MachineAPIGPUAnnotation] = v
			if t, ok := a[CapacityGPUTypeAnnotation]; n > 0 && ok && t == DefaultGPUType {
				delete(a, CapacityGPUTypeAnnotation)
			} else if n > 0 && !ok {
				r.Warn(path.Key(CapacityGPUTypeAnnotation), "unset; converting back sets it to %s, the type the Machine API GPU hint counts", DefaultGPUType)
			}
		}
	}
}
