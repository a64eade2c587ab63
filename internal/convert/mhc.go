package convert

import (
	"math"
	"time"

	mapiv1beta1 "github.com/openshift/api/machine/v1beta1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
)

// ToClusterAPIMachineHealthCheck converts a Machine API MachineHealthCheck. The context's
// Platform is not used.
func ToClusterAPIMachineHealthCheck(in *mapiv1beta1.MachineHealthCheck, c Context) (*clusterv1.MachineHealthCheck, Warnings, field.ErrorList) {
	r := &Report{}
	if in == nil {
		r.Error(field.Required(nil, "no object to convert"))
	}
	if c.ClusterName == "" {
		r.Error(field.InternalError(nil, errNoClusterName))
	}
	if r.HasErrors() {
		w, e := r.sorted()
		return nil, w, e
	}
	meta := field.NewPath("metadata")
	spec := field.NewPath("spec")
	out := &clusterv1.MachineHealthCheck{
		TypeMeta: metav1.TypeMeta{APIVersion: clusterv1.GroupVersion.String(), Kind: "MachineHealthCheck"},
		ObjectMeta: metav1.ObjectMeta{
			Name:        in.Name,
			Namespace:   c.Namespaces.toCAPI(in.Namespace, meta.Child("namespace"), r),
			Labels:      c.clusterLabelToCAPI(in.Labels, meta.Child("labels"), false, r),
			Annotations: copyMap(in.Annotations),
		},
	}
	dropLastApplied(out.Annotations, meta.Child("annotations"), r)
	out.Annotations = nilIfEmpty(out.Annotations)
	out.Spec.ClusterName = c.ClusterName
	out.Spec.Selector = *in.Spec.Selector.DeepCopy()
	for i, uc := range in.Spec.UnhealthyConditions {
		secs := durationToSeconds(uc.Timeout.Duration, spec.Child("unhealthyConditions").Index(i).Child("timeout"), r)
		out.Spec.Checks.UnhealthyNodeConditions = append(out.Spec.Checks.UnhealthyNodeConditions, clusterv1.UnhealthyNodeCondition{
			Type: uc.Type, Status: uc.Status, TimeoutSeconds: ptr.To(secs),
		})
	}
	if in.Spec.NodeStartupTimeout != nil {
		out.Spec.Checks.NodeStartupTimeoutSeconds = ptr.To(durationToSeconds(in.Spec.NodeStartupTimeout.Duration, spec.Child("nodeStartupTimeout"), r))
	} else {
		// The defaulted form, as both APIs' admission would store it (10 minutes).
		out.Spec.Checks.NodeStartupTimeoutSeconds = ptr.To(clusterv1.DefaultNodeStartupTimeoutSeconds)
	}
	if mu := in.Spec.MaxUnhealthy; mu != nil {
		v := *mu
		out.Spec.Remediation.TriggerIf.UnhealthyLessThanOrEqualTo = &v
	}
	if rt := in.Spec.RemediationTemplate; rt != nil {
		p := spec.Child("remediationTemplate")
		if rt.Namespace != "" && rt.Namespace != in.Namespace {
			r.Error(field.Invalid(p.Child("namespace"), rt.Namespace, "the Cluster API looks remediation templates up in the MachineHealthCheck's namespace"))
		} else if rt.Namespace != "" {
			r.Warn(p.Child("namespace"), "dropped: the Cluster API looks the template up in the MachineHealthCheck's namespace")
		}
		if rt.UID != "" || rt.ResourceVersion != "" || rt.FieldPath != "" {
			r.Warn(p, "uid, resourceVersion and fieldPath are not part of a template reference and are dropped")
		}
		if out.Namespace != in.Namespace {
			r.Warn(p, "the template must also exist in namespace %s", out.Namespace)
		}
		out.Spec.Remediation.TemplateRef = clusterv1.MachineHealthCheckRemediationTemplateReference{Kind: rt.Kind, Name: rt.Name, APIVersion: rt.APIVersion}
	}
	if r.HasErrors() {
		w, e := r.sorted()
		return nil, w, e
	}
	w, e := r.sorted()
	return out, w, e
}

// ToMachineAPIMachineHealthCheck converts a Cluster API MachineHealthCheck back. Checks and
// remediation options the Machine API lacks (machine conditions, unhealthyInRange) are errors.
func ToMachineAPIMachineHealthCheck(in *clusterv1.MachineHealthCheck, c Context) (*mapiv1beta1.MachineHealthCheck, Warnings, field.ErrorList) {
	r := &Report{}
	if in == nil {
		r.Error(field.Required(nil, "no object to convert"))
	}
	if c.ClusterName == "" {
		r.Error(field.InternalError(nil, errNoClusterName))
	}
	if r.HasErrors() {
		w, e := r.sorted()
		return nil, w, e
	}
	meta := field.NewPath("MachineHealthCheck", "metadata")
	spec := field.NewPath("MachineHealthCheck", "spec")
	if in.Spec.ClusterName != c.ClusterName {
		r.Error(field.Invalid(spec.Child("clusterName"), in.Spec.ClusterName, "this cluster is "+quote(c.ClusterName)))
	}
	out := &mapiv1beta1.MachineHealthCheck{
		TypeMeta: metav1.TypeMeta{APIVersion: mapiv1beta1.GroupVersion.String(), Kind: "MachineHealthCheck"},
		ObjectMeta: metav1.ObjectMeta{
			Name:        in.Name,
			Namespace:   c.Namespaces.toMAPI(in.Namespace, meta.Child("namespace"), r),
			Labels:      c.clusterLabelToMAPI(in.Labels, meta.Child("labels"), false, r),
			Annotations: copyMap(in.Annotations),
		},
	}
	dropLastApplied(out.Annotations, meta.Child("annotations"), r)
	out.Annotations = nilIfEmpty(out.Annotations)
	out.Spec.Selector = *in.Spec.Selector.DeepCopy()
	checks := spec.Child("checks")
	for i, uc := range in.Spec.Checks.UnhealthyNodeConditions {
		p := checks.Child("unhealthyNodeConditions").Index(i)
		if uc.TimeoutSeconds == nil {
			r.Error(field.Required(p.Child("timeoutSeconds"), "the Machine API needs a timeout"))
			continue
		}
		out.Spec.UnhealthyConditions = append(out.Spec.UnhealthyConditions, mapiv1beta1.UnhealthyCondition{
			Type: uc.Type, Status: uc.Status, Timeout: metav1.Duration{Duration: time.Duration(*uc.TimeoutSeconds) * time.Second},
		})
	}
	for _, f := range clusterAPIOnly(in) {
		r.Unsupported(f.path, f.value, f.target)
	}
	if s := in.Spec.Checks.NodeStartupTimeoutSeconds; s != nil {
		out.Spec.NodeStartupTimeout = &metav1.Duration{Duration: time.Duration(*s) * time.Second}
	}
	if v := in.Spec.Remediation.TriggerIf.UnhealthyLessThanOrEqualTo; v != nil {
		mu := *v
		out.Spec.MaxUnhealthy = &mu
	}
	if tr := in.Spec.Remediation.TemplateRef; tr.IsDefined() {
		out.Spec.RemediationTemplate = &corev1.ObjectReference{Kind: tr.Kind, Name: tr.Name, APIVersion: tr.APIVersion}
	}
	if r.HasErrors() {
		w, e := r.sorted()
		return nil, w, e
	}
	w, e := r.sorted()
	return out, w, e
}

// durationToSeconds converts a Machine API duration to the Cluster API's whole seconds,
// rounding a fraction up (waiting slightly longer is the safe direction).
func durationToSeconds(d time.Duration, path *field.Path, r *Report) int32 {
	if d < 0 {
		r.Error(field.Invalid(path, d.String(), "must not be negative"))
		return 0
	}
	secs := d / time.Second
	if d%time.Second != 0 {
		secs++
		r.Warn(path, "%s rounded up to %ds: the Cluster API counts whole seconds", d, secs)
	}
	if secs > math.MaxInt32 {
		r.Error(field.Invalid(path, d.String(), "too long for the Cluster API's int32 seconds"))
		return 0
	}
	return int32(secs)
}

// clusterAPIOnlyFeature is a value of a Cluster API MachineHealthCheck the Machine API has no
// field for.
type clusterAPIOnlyFeature struct {
	path   *field.Path
	value  any
	target string
}

// clusterAPIOnly lists the features of a Cluster API MachineHealthCheck that the Machine API
// cannot carry: Machine conditions among the checks, and a range as the remediation trigger.
func clusterAPIOnly(in *clusterv1.MachineHealthCheck) []clusterAPIOnlyFeature {
	spec := field.NewPath("MachineHealthCheck", "spec")
	var out []clusterAPIOnlyFeature
	for i, mc := range in.Spec.Checks.UnhealthyMachineConditions {
		out = append(out, clusterAPIOnlyFeature{spec.Child("checks", "unhealthyMachineConditions").Index(i), mc.Type,
			MachineAPI + " (it checks Node conditions only)"})
	}
	if v := in.Spec.Remediation.TriggerIf.UnhealthyInRange; v != "" {
		out = append(out, clusterAPIOnlyFeature{spec.Child("remediation", "triggerIf", "unhealthyInRange"), v, MachineAPI + " (only maxUnhealthy)"})
	}
	return out
}

// WithoutClusterAPIOnly returns a copy of a Cluster API MachineHealthCheck without the
// features the Machine API cannot carry, and a warning naming each one left out (in is not
// changed). The sync mirrors a Cluster API-owned check to the Machine API so: those features
// are not synchronised onto the Machine API copy, which is otherwise kept up to date. A check
// using any of them cannot be handed to the Machine API without losing them.
func WithoutClusterAPIOnly(in *clusterv1.MachineHealthCheck) (*clusterv1.MachineHealthCheck, Warnings) {
	features := clusterAPIOnly(in)
	if len(features) == 0 {
		return in, nil
	}
	out := in.DeepCopy()
	out.Spec.Checks.UnhealthyMachineConditions = nil
	out.Spec.Remediation.TriggerIf.UnhealthyInRange = ""
	r := &Report{}
	for _, f := range features {
		r.Warn(f.path, "%v is not carried to the Machine API copy: it has no equivalent in %s", f.value, f.target)
	}
	w, _ := r.sorted()
	return out, w
}
