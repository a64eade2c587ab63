package convert

import (
	"fmt"
	"regexp"
	"sort"
	"strings"

	mapiv1beta1 "github.com/openshift/api/machine/v1beta1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
)

// Well-known label and annotation keys of the two APIs.
const (
	// MachineAPIClusterLabel names the cluster on Machine API objects.
	MachineAPIClusterLabel = mapiv1beta1.MachineClusterIDLabel // machine.openshift.io/cluster-api-cluster
	// ClusterAPIClusterLabel names the cluster on Cluster API objects.
	ClusterAPIClusterLabel = clusterv1.ClusterNameLabel // cluster.x-k8s.io/cluster-name

	MachineAPIDeleteMachineAnnotation = "machine.openshift.io/delete-machine"
	// MachineAPIDeleteMachineAnnotationDeprecated is the older spelling the Machine API still honours.
	MachineAPIDeleteMachineAnnotationDeprecated = "machine.openshift.io/cluster-api-delete-machine"
	MachineAPIExcludeNodeDrainingAnnotation     = "machine.openshift.io/exclude-node-draining"

	// MachineAPIRoleLabel is the Machine's role; the actuators treat "master" as the control plane.
	MachineAPIRoleLabel = "machine.openshift.io/cluster-api-machine-role"
	// MachineAPIMasterRole is the control plane's MachineAPIRoleLabel value.
	MachineAPIMasterRole = "master"

	MachineAPIAutoscalerMinSizeAnnotation = "machine.openshift.io/cluster-api-autoscaler-node-group-min-size"
	MachineAPIAutoscalerMaxSizeAnnotation = "machine.openshift.io/cluster-api-autoscaler-node-group-max-size"

	// Scale-from-zero capacity hints the Machine API MachineSet controller writes.
	MachineAPICPUAnnotation     = "machine.openshift.io/vCPU"
	MachineAPIMemoryAnnotation  = "machine.openshift.io/memoryMb"
	MachineAPIGPUAnnotation     = "machine.openshift.io/GPU"
	MachineAPIMaxPodsAnnotation = "machine.openshift.io/maxPods"
	// Their Cluster API autoscaler equivalents.
	CapacityCPUAnnotation      = "capacity.cluster-autoscaler.kubernetes.io/cpu"
	CapacityMemoryAnnotation   = "capacity.cluster-autoscaler.kubernetes.io/memory"
	CapacityGPUCountAnnotation = "capacity.cluster-autoscaler.kubernetes.io/gpu-count"
	CapacityGPUTypeAnnotation  = "capacity.cluster-autoscaler.kubernetes.io/gpu-type"
	CapacityMaxPodsAnnotation  = "capacity.cluster-autoscaler.kubernetes.io/maxPods"
	// CapacityLabelsAnnotation is spelled the same in both APIs and copied unchanged.
	CapacityLabelsAnnotation = "capacity.cluster-autoscaler.kubernetes.io/labels"

	// DefaultGPUType is the resource the Machine API GPU hint counts.
	DefaultGPUType = "nvidia.com/gpu"
)

// keyPair is an annotation both APIs have, spelled differently.
type keyPair struct{ mapi, capi string }

var machineAnnotationPairs = []keyPair{
	{MachineAPIDeleteMachineAnnotation, clusterv1.DeleteMachineAnnotation},
	{MachineAPIExcludeNodeDrainingAnnotation, clusterv1.ExcludeNodeDrainingAnnotation},
}

var machineSetAnnotationPairs = []keyPair{
	{MachineAPIAutoscalerMinSizeAnnotation, clusterv1.AutoscalerMinSizeAnnotation},
	{MachineAPIAutoscalerMaxSizeAnnotation, clusterv1.AutoscalerMaxSizeAnnotation},
	{MachineAPICPUAnnotation, CapacityCPUAnnotation},
	{MachineAPIMaxPodsAnnotation, CapacityMaxPodsAnnotation},
}

func copyMap(in map[string]string) map[string]string {
	if len(in) == 0 {
		return nil
	}
	out := make(map[string]string, len(in))
	for k, v := range in {
		out[k] = v
	}
	return out
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func set(m *map[string]string, k, v string) {
	if *m == nil {
		*m = map[string]string{}
	}
	(*m)[k] = v
}

func nilIfEmpty(m map[string]string) map[string]string {
	if len(m) == 0 {
		return nil
	}
	return m
}

// isNodeSyncedLabel reports whether the Cluster API machine controller propagates a Machine
// label with this key to the Node (the same rule as the upstream controller, plus the
// patterns the context says the controller was started with).
func (c *Context) isNodeSyncedLabel(key string) bool {
	domain := strings.Split(key, "/")[0]
	switch {
	case domain == clusterv1.NodeRoleLabelPrefix,
		domain == clusterv1.NodeRestrictionLabelDomain, strings.HasSuffix(domain, "."+clusterv1.NodeRestrictionLabelDomain),
		domain == clusterv1.ManagedNodeLabelDomain, strings.HasSuffix(domain, "."+clusterv1.ManagedNodeLabelDomain):
		return true
	}
	for _, re := range c.AdditionalSyncMachineLabels {
		if re != nil && re.MatchString(key) {
			return true
		}
	}
	return false
}

// SyncMachineLabelsFlag is the flag of the Cluster API machine controller (and of machina's
// manager and convert commands, which mirror it) that names further Machine label keys, by
// regular expression, to propagate to Nodes.
const SyncMachineLabelsFlag = "--additional-sync-machine-labels"

// ParseSyncMachineLabels compiles the values of SyncMachineLabelsFlag, as the Cluster API
// machine controller does; an invalid expression is an error naming it.
func ParseSyncMachineLabels(exprs []string) ([]*regexp.Regexp, error) {
	out := make([]*regexp.Regexp, 0, len(exprs))
	for _, e := range exprs {
		re, err := regexp.Compile(e)
		if err != nil {
			return nil, fmt.Errorf("%s %q: %w", SyncMachineLabelsFlag, e, err)
		}
		out = append(out, re)
	}
	if len(out) == 0 {
		return nil, nil
	}
	return out, nil
}

// AdmittingRegex is the SyncMachineLabelsFlag expression that admits exactly the label key.
func AdmittingRegex(key string) string { return "^" + regexp.QuoteMeta(key) + "$" }

// nodeLabelNotSynced explains why a node label cannot be carried and how to let it through.
func nodeLabelNotSynced(key string) string {
	return fmt.Sprintf("the Cluster API propagates only node-role.kubernetes.io/*, node-restriction.kubernetes.io/* and node.cluster.x-k8s.io/* labels to the Node, "+
		"and those matching its %[1]s; to carry this label, start the Cluster API machine controller and machina (manager and convert) with %[1]s='%[2]s'",
		SyncMachineLabelsFlag, AdmittingRegex(key))
}

// Metadata the Machine API actuators keep on each Machine from the instance they run: the
// instance type, region and zone labels and the instance state annotation. They describe
// the instance, like status, so they are not carried to the Cluster API Machine.
const (
	MachineAPIInstanceTypeLabel       = "machine.openshift.io/instance-type"
	MachineAPIRegionLabel             = "machine.openshift.io/region"
	MachineAPIZoneLabel               = "machine.openshift.io/zone"
	MachineAPIInstanceStateAnnotation = "machine.openshift.io/instance-state"
)

// ProviderOwnedMetadata is implemented by a Platform whose Machine API actuator keeps
// annotations of its own on each Machine, beyond the shared ones above: they describe the
// instance and are not carried to the Cluster API Machine either.
type ProviderOwnedMetadata interface {
	ProviderOwnedAnnotations() []string
}

// dropProviderOwned removes the actuator-maintained keys from a Machine's converted labels
// and annotations: the shared ones and those p owns.
func dropProviderOwned(labels, annotations map[string]string, p Platform) {
	delete(labels, MachineAPIInstanceTypeLabel)
	delete(labels, MachineAPIRegionLabel)
	delete(labels, MachineAPIZoneLabel)
	delete(annotations, MachineAPIInstanceStateAnnotation)
	if po, ok := p.(ProviderOwnedMetadata); ok {
		for _, k := range po.ProviderOwnedAnnotations() {
			delete(annotations, k)
		}
	}
}

// clusterLabelToCAPI copies Machine API labels for a Cluster API object and adds the
// cluster-name label. The Machine API cluster label stays (selectors written against it keep
// working; with ensure set it is added if missing); a value that names another cluster is an
// error.
func (c *Context) clusterLabelToCAPI(in map[string]string, path *field.Path, ensure bool, r *Report) map[string]string {
	out := copyMap(in)
	if v, ok := in[MachineAPIClusterLabel]; ok && v != c.ClusterName {
		r.Error(field.Invalid(path.Key(MachineAPIClusterLabel), v, "names cluster "+quote(v)+" but this cluster is "+quote(c.ClusterName)))
	} else if !ok && ensure {
		r.Warn(path.Key(MachineAPIClusterLabel), "added with value %q, as the Machine API controllers expect", c.ClusterName)
		set(&out, MachineAPIClusterLabel, c.ClusterName)
	}
	if v, ok := in[ClusterAPIClusterLabel]; ok {
		if v != c.ClusterName {
			r.Error(field.Invalid(path.Key(ClusterAPIClusterLabel), v, "names cluster "+quote(v)+" but this cluster is "+quote(c.ClusterName)))
		} else {
			r.Warn(path.Key(ClusterAPIClusterLabel), "the Cluster API label is removed again when converting back to the Machine API")
		}
	}
	set(&out, ClusterAPIClusterLabel, c.ClusterName)
	return out
}

// clusterLabelToMAPI removes the Cluster API cluster-name label (it must name this cluster)
// and, when ensure is set, adds the Machine API cluster label the Machine API controllers need.
func (c *Context) clusterLabelToMAPI(in map[string]string, path *field.Path, ensure bool, r *Report) map[string]string {
	out := copyMap(in)
	if v, ok := in[ClusterAPIClusterLabel]; ok {
		if v != c.ClusterName {
			r.Error(field.Invalid(path.Key(ClusterAPIClusterLabel), v, "names cluster "+quote(v)+" but this cluster is "+quote(c.ClusterName)))
		}
		delete(out, ClusterAPIClusterLabel)
	}
	if v, ok := in[MachineAPIClusterLabel]; ok {
		if v != c.ClusterName {
			r.Error(field.Invalid(path.Key(MachineAPIClusterLabel), v, "names cluster "+quote(v)+" but this cluster is "+quote(c.ClusterName)))
		}
	} else if ensure {
		r.Warn(path.Key(MachineAPIClusterLabel), "added with value %q: the Machine API controllers need it", c.ClusterName)
		set(&out, MachineAPIClusterLabel, c.ClusterName)
	}
	return nilIfEmpty(out)
}

// lastAppliedAnnotation records the object as kubectl last applied it; it describes the
// source object, and a copy on the converted object would mislead the next kubectl apply.
const lastAppliedAnnotation = "kubectl.kubernetes.io/last-applied-configuration"

// dropLastApplied removes kubectl's last-applied annotation from out, with a warning.
func dropLastApplied(out map[string]string, path *field.Path, r *Report) {
	if _, ok := out[lastAppliedAnnotation]; ok {
		delete(out, lastAppliedAnnotation)
		r.Warn(path.Key(lastAppliedAnnotation), "dropped: it describes the object as last applied in the other API")
	}
}

// pairsToCAPI renames annotations that both APIs know under different keys.
func pairsToCAPI(out map[string]string, pairs []keyPair, path *field.Path, r *Report) {
	for _, p := range pairs {
		mv, hasM := out[p.mapi]
		cv, hasC := out[p.capi]
		if hasC {
			if hasM && mv != cv {
				r.Error(field.Invalid(path.Key(p.capi), cv, "conflicts with "+p.mapi+"="+quote(mv)))
				continue
			}
			r.Warn(path.Key(p.capi), "already in Cluster API form; converting back yields %s", p.mapi)
		}
		if hasM {
			delete(out, p.mapi)
			out[p.capi] = mv
		}
	}
}

func pairsToMAPI(out map[string]string, pairs []keyPair, path *field.Path, r *Report) {
	for _, p := range pairs {
		mv, hasM := out[p.mapi]
		cv, hasC := out[p.capi]
		if hasM {
			if hasC && mv != cv {
				r.Error(field.Invalid(path.Key(p.mapi), mv, "conflicts with "+p.capi+"="+quote(cv)))
				continue
			}
			r.Warn(path.Key(p.mapi), "already in Machine API form; converting back yields %s", p.capi)
		}
		if hasC {
			delete(out, p.capi)
			out[p.mapi] = cv
		}
	}
}

// machineAnnotationsToCAPI converts the annotations of a Machine (or a MachineSet's machine
// template) and adds the lifecycle hooks as Cluster API hook annotations.
func machineAnnotationsToCAPI(in map[string]string, hooks mapiv1beta1.LifecycleHooks, path, hooksPath *field.Path, r *Report) map[string]string {
	out := copyMap(in)
	if out == nil {
		out = map[string]string{}
	}
	if v, ok := out[MachineAPIDeleteMachineAnnotationDeprecated]; ok {
		if _, ok := out[MachineAPIDeleteMachineAnnotation]; !ok {
			out[MachineAPIDeleteMachineAnnotation] = v
		}
		delete(out, MachineAPIDeleteMachineAnnotationDeprecated)
		r.Warn(path.Key(MachineAPIDeleteMachineAnnotationDeprecated), "deprecated spelling; carried as %s", clusterv1.DeleteMachineAnnotation)
	}
	dropLastApplied(out, path, r)
	pairsToCAPI(out, machineAnnotationPairs, path, r)
	for _, k := range sortedKeys(in) {
		if isHookAnnotation(k) {
			r.Error(field.Invalid(path.Key(k), in[k], "Cluster API lifecycle hook annotations cannot be set on a Machine API object; use spec.lifecycleHooks"))
		}
	}
	hooksToAnnotations(hooks.PreDrain, clusterv1.PreDrainDeleteHookAnnotationPrefix, hooksPath.Child("preDrain"), out, r)
	hooksToAnnotations(hooks.PreTerminate, clusterv1.PreTerminateDeleteHookAnnotationPrefix, hooksPath.Child("preTerminate"), out, r)
	return nilIfEmpty(out)
}

// machineAnnotationsToMAPI is the reverse of machineAnnotationsToCAPI.
func machineAnnotationsToMAPI(in map[string]string, path *field.Path, r *Report) (map[string]string, mapiv1beta1.LifecycleHooks) {
	out := copyMap(in)
	if out == nil {
		out = map[string]string{}
	}
	var hooks mapiv1beta1.LifecycleHooks
	for _, k := range sortedKeys(in) {
		prefix, name, ok := strings.Cut(k, "/")
		var list *[]mapiv1beta1.LifecycleHook
		switch prefix {
		case clusterv1.PreDrainDeleteHookAnnotationPrefix:
			list = &hooks.PreDrain
		case clusterv1.PreTerminateDeleteHookAnnotationPrefix:
			list = &hooks.PreTerminate
		default:
			continue
		}
		delete(out, k)
		switch {
		case !ok || name == "":
			r.Error(field.Invalid(path.Key(k), in[k], "a Machine API lifecycle hook needs a name: use "+prefix+"/<name>"))
		case in[k] == "":
			r.Error(field.Invalid(path.Key(k), in[k], "a Machine API lifecycle hook needs an owner: set the annotation value"))
		default:
			*list = append(*list, mapiv1beta1.LifecycleHook{Name: name, Owner: in[k]})
		}
	}
	dropLastApplied(out, path, r)
	pairsToMAPI(out, machineAnnotationPairs, path, r)
	return nilIfEmpty(out), hooks
}

func isHookAnnotation(k string) bool {
	prefix, _, _ := strings.Cut(k, "/")
	return prefix == clusterv1.PreDrainDeleteHookAnnotationPrefix || prefix == clusterv1.PreTerminateDeleteHookAnnotationPrefix
}

func hooksToAnnotations(hooks []mapiv1beta1.LifecycleHook, prefix string, path *field.Path, out map[string]string, r *Report) {
	seen := map[string]bool{}
	for i, h := range hooks {
		p := path.Index(i)
		if seen[h.Name] {
			r.Error(field.Duplicate(p.Child("name"), h.Name))
			continue
		}
		seen[h.Name] = true
		if msgs := validateQualifiedNamePart(h.Name); msgs != "" {
			r.Error(field.Invalid(p.Child("name"), h.Name, "cannot be carried as the annotation "+prefix+"/<name>: "+msgs))
			continue
		}
		if h.Owner == "" {
			r.Error(field.Required(p.Child("owner"), "the Cluster API hook annotation value is the owner"))
			continue
		}
		out[prefix+"/"+h.Name] = h.Owner
	}
}

// validateQualifiedNamePart checks that name can follow "prefix/" in an annotation key.
func validateQualifiedNamePart(name string) string {
	if errs := validation.IsQualifiedName("x/" + name); len(errs) > 0 {
		return strings.Join(errs, "; ")
	}
	return ""
}

func quote(s string) string { return "\"" + s + "\"" }
