package convert

import (
	"strings"

	mapiv1beta1 "github.com/openshift/api/machine/v1beta1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// DefaultNodeDeletionTimeoutSeconds is what the Cluster API Machine webhook defaults
// spec.deletion.nodeDeletionTimeoutSeconds to. Conversions emit it so the result is already in
// its defaulted form and a sync controller does not fight the webhook.
const DefaultNodeDeletionTimeoutSeconds int32 = 10

// ClusterAPIMachine is a Cluster API Machine and the InfraMachine it references.
type ClusterAPIMachine struct {
	Machine      *clusterv1.Machine
	InfraMachine client.Object
}

// ToClusterAPIMachine converts a Machine API Machine into a Cluster API Machine and its
// InfraMachine (named like the Machine). Only metadata.name, namespace, labels, annotations
// and the spec are converted; status, owner references and finalizers belong to the caller.
func ToClusterAPIMachine(in *mapiv1beta1.Machine, c Context) (*ClusterAPIMachine, Warnings, field.ErrorList) {
	r := &Report{}
	if !c.check(in == nil, r) {
		w, e := r.sorted()
		return nil, w, e
	}
	meta := field.NewPath("metadata")
	spec := field.NewPath("spec")
	labels, annotations, mspec, infra := c.machineToCAPI(in.Labels, in.Annotations, meta, &in.Spec, spec, r)
	dropProviderOwned(labels, annotations, c.Platform)
	annotations = nilIfEmpty(annotations)

	out := &clusterv1.Machine{
		TypeMeta: metav1.TypeMeta{APIVersion: clusterv1.GroupVersion.String(), Kind: "Machine"},
		ObjectMeta: metav1.ObjectMeta{
			Name:        in.Name,
			Namespace:   c.Namespaces.toCAPI(in.Namespace, meta.Child("namespace"), r),
			Labels:      labels,
			Annotations: annotations,
		},
		Spec: mspec,
	}
	gvk := c.Platform.InfraMachineGVK()
	out.Spec.InfrastructureRef = clusterv1.ContractVersionedObjectReference{APIGroup: gvk.Group, Kind: gvk.Kind, Name: in.Name}
	if r.HasErrors() {
		w, e := r.sorted()
		return nil, w, e
	}
	im := c.Platform.NewInfraMachine(infra, out.Spec.ProviderID)
	im.SetName(in.Name)
	im.SetNamespace(out.Namespace)
	im.SetLabels(map[string]string{ClusterAPIClusterLabel: c.ClusterName})
	w, e := r.sorted()
	return &ClusterAPIMachine{Machine: out, InfraMachine: im}, w, e
}

// ToMachineAPIMachine converts a Cluster API Machine and its InfraMachine back into a
// Machine API Machine. spec.authoritativeAPI is left empty for the caller to set.
func ToMachineAPIMachine(m *clusterv1.Machine, infra client.Object, c Context) (*mapiv1beta1.Machine, Warnings, field.ErrorList) {
	r := &Report{}
	if !c.check(m == nil, r) {
		w, e := r.sorted()
		return nil, w, e
	}
	meta := field.NewPath("Machine", "metadata")
	spec := field.NewPath("Machine", "spec")
	gvk := c.Platform.InfraMachineGVK()
	infraPath := field.NewPath(gvk.Kind, "spec")

	var ispec InfraSpec
	var providerID string
	ok := false
	if infra != nil {
		ispec, providerID, ok = c.Platform.SplitInfraMachine(infra, infraPath, r)
	}
	if !ok {
		r.Error(field.Invalid(spec.Child("infrastructureRef"), m.Spec.InfrastructureRef.Kind, "the "+gvk.Kind+" it references is required to convert this Machine"))
		w, e := r.sorted()
		return nil, w, e
	}
	if n := infra.GetName(); n != "" && n != m.Spec.InfrastructureRef.Name {
		r.Error(field.Invalid(spec.Child("infrastructureRef", "name"), m.Spec.InfrastructureRef.Name, "does not name the "+gvk.Kind+" given ("+quote(n)+")"))
	}
	if m.Spec.MinReadySeconds != nil {
		r.Unsupported(spec.Child("minReadySeconds"), *m.Spec.MinReadySeconds, MachineAPI+" Machine")
	}
	if providerID != "" && m.Spec.ProviderID != "" && providerID != m.Spec.ProviderID {
		r.Error(field.Invalid(infraPath.Child("providerID"), providerID, "differs from Machine spec.providerID "+quote(m.Spec.ProviderID)))
	} else if providerID != "" && m.Spec.ProviderID == "" {
		r.Warn(spec.Child("providerID"), "taken from %s.spec.providerID", gvk.Kind)
	}
	namespace := c.Namespaces.toMAPI(m.Namespace, meta.Child("namespace"), r)
	labels, annotations, mspec := c.machineToMAPI(m.Labels, m.Annotations, meta, &m.Spec, spec, ispec, infraPath, gvk.Kind, r)
	if mspec.ProviderID == nil && providerID != "" {
		mspec.ProviderID = ptr.To(providerID)
	}
	if r.HasErrors() {
		w, e := r.sorted()
		return nil, w, e
	}
	out := &mapiv1beta1.Machine{
		TypeMeta: metav1.TypeMeta{APIVersion: mapiv1beta1.GroupVersion.String(), Kind: "Machine"},
		ObjectMeta: metav1.ObjectMeta{
			Name:        m.Name,
			Namespace:   namespace,
			Labels:      labels,
			Annotations: annotations,
		},
		Spec: mspec,
	}
	w, e := r.sorted()
	return out, w, e
}

// check validates the context and input presence.
func (c *Context) check(nilInput bool, r *Report) bool {
	if nilInput {
		r.Error(field.Required(nil, "no object to convert"))
	}
	if c.Platform == nil {
		r.Error(field.InternalError(nil, errNoPlatform))
	}
	if c.ClusterName == "" {
		r.Error(field.InternalError(nil, errNoClusterName))
	}
	return !r.HasErrors()
}

// machineToCAPI converts what a Machine and a MachineSet's machine template share: the
// machine's own labels and annotations and its spec.
func (c *Context) machineToCAPI(inLabels, inAnnotations map[string]string, metaPath *field.Path, in *mapiv1beta1.MachineSpec, specPath *field.Path, r *Report) (labels, annotations map[string]string, out clusterv1.MachineSpec, infra InfraSpec) {
	labels = c.clusterLabelToCAPI(inLabels, metaPath.Child("labels"), true, r)
	for _, k := range sortedKeys(inLabels) {
		if c.isNodeSyncedLabel(k) {
			r.Warn(metaPath.Child("labels").Key(k), "the Cluster API propagates this label to the Node; converted back it moves to spec.metadata.labels")
		}
	}
	// Node labels become Machine labels, which the Cluster API propagates to the Node.
	nodeMeta := specPath.Child("metadata")
	for _, k := range sortedKeys(in.ObjectMeta.Labels) {
		v := in.ObjectMeta.Labels[k]
		p := nodeMeta.Child("labels").Key(k)
		switch old, clash := labels[k]; {
		case !c.isNodeSyncedLabel(k):
			r.Error(field.Invalid(p, v, nodeLabelNotSynced(k)))
		case clash && old != v:
			r.Error(field.Invalid(p, v, "conflicts with metadata.labels["+k+"]="+quote(old)))
		default:
			labels[k] = v
		}
	}
	if len(in.ObjectMeta.Annotations) > 0 {
		r.Error(field.Invalid(nodeMeta.Child("annotations"), sortedKeys(in.ObjectMeta.Annotations), "the Cluster API does not propagate Machine annotations to the Node"))
	}
	if in.ObjectMeta.Name != "" || in.ObjectMeta.GenerateName != "" || in.ObjectMeta.Namespace != "" || len(in.ObjectMeta.OwnerReferences) > 0 {
		r.Warn(nodeMeta, "name, generateName, namespace and ownerReferences are ignored by the Machine API and dropped")
	}
	annotations = machineAnnotationsToCAPI(inAnnotations, in.LifecycleHooks, metaPath.Child("annotations"), specPath.Child("lifecycleHooks"), r)

	master := labels[MachineAPIRoleLabel] == MachineAPIMasterRole
	infra, mv := c.infraPlatform(master).ToInfra(in.ProviderSpec.Value, specPath.Child("providerSpec", "value"), r)
	c.controlPlaneToCAPI(labels, mv.ControlPlane, metaPath.Child("labels"), r)
	c.roleToCAPI(labels, metaPath.Child("labels"), r)
	out = clusterv1.MachineSpec{
		ClusterName:   c.ClusterName,
		Bootstrap:     clusterv1.Bootstrap{DataSecretName: mv.DataSecretName},
		FailureDomain: mv.FailureDomain,
		ProviderID:    ptr.Deref(in.ProviderID, ""),
		Deletion:      clusterv1.MachineDeletionSpec{NodeDeletionTimeoutSeconds: ptr.To(DefaultNodeDeletionTimeoutSeconds)},
		Taints:        taintsToCAPI(in.Taints, specPath.Child("taints"), r),
	}
	return labels, annotations, out, infra
}

// machineToMAPI is the reverse of machineToCAPI. The caller checks spec.minReadySeconds,
// which belongs to the MachineSet in the Machine API.
func (c *Context) machineToMAPI(inLabels, inAnnotations map[string]string, metaPath *field.Path, in *clusterv1.MachineSpec, specPath *field.Path, infra InfraSpec, infraPath *field.Path, wantKind string, r *Report) (labels, annotations map[string]string, out mapiv1beta1.MachineSpec) {
	if in.ClusterName != c.ClusterName {
		r.Error(field.Invalid(specPath.Child("clusterName"), in.ClusterName, "this cluster is "+quote(c.ClusterName)))
	}
	labels = c.clusterLabelToMAPI(inLabels, metaPath.Child("labels"), true, r)
	_, labelled := labels[clusterv1.MachineControlPlaneLabel] // roleToMAPI may take it away
	c.roleToMAPI(labels, metaPath.Child("labels"), r)
	_, controlPlane := labels[clusterv1.MachineControlPlaneLabel]
	if marksControlPlane(c.Platform) {
		delete(labels, clusterv1.MachineControlPlaneLabel)
	}
	for _, k := range sortedKeys(labels) {
		if c.isNodeSyncedLabel(k) {
			set(&out.ObjectMeta.Labels, k, labels[k])
			delete(labels, k)
		}
	}
	labels = nilIfEmpty(labels)
	annotations, out.LifecycleHooks = machineAnnotationsToMAPI(inAnnotations, metaPath.Child("annotations"), r)

	group := c.Platform.InfraMachineGVK().Group
	if ref := in.InfrastructureRef; ref.APIGroup != group || ref.Kind != wantKind {
		r.Error(field.Invalid(specPath.Child("infrastructureRef"), ref.APIGroup+"/"+ref.Kind, "the "+c.Platform.Name()+" platform converts "+group+"/"+wantKind+" here"))
	}
	if ref := in.Bootstrap.ConfigRef; ref.IsDefined() {
		r.Error(field.Invalid(specPath.Child("bootstrap", "configRef"), ref.Kind+"/"+ref.Name, "the Machine API has no bootstrap providers; use bootstrap.dataSecretName"))
	} else if in.Bootstrap.DataSecretName == nil || *in.Bootstrap.DataSecretName == "" {
		r.Error(field.Required(specPath.Child("bootstrap", "dataSecretName"), "the Machine API needs a user data secret"))
	}
	if in.Version != "" {
		r.Unsupported(specPath.Child("version"), in.Version, MachineAPI)
	}
	for i, g := range in.ReadinessGates {
		r.Unsupported(specPath.Child("readinessGates").Index(i), g.ConditionType, MachineAPI)
	}
	d := specPath.Child("deletion")
	if v := ptr.Deref(in.Deletion.NodeDrainTimeoutSeconds, 0); v != 0 {
		r.Error(field.Invalid(d.Child("nodeDrainTimeoutSeconds"), v, "the Machine API drains without a timeout; only 0 or unset can be converted"))
	}
	if v := ptr.Deref(in.Deletion.NodeVolumeDetachTimeoutSeconds, 0); v != 0 {
		r.Error(field.Invalid(d.Child("nodeVolumeDetachTimeoutSeconds"), v, "the Machine API has no volume detach timeout; only 0 or unset can be converted"))
	}
	if v := ptr.Deref(in.Deletion.NodeDeletionTimeoutSeconds, DefaultNodeDeletionTimeoutSeconds); v != DefaultNodeDeletionTimeoutSeconds {
		r.Error(field.Invalid(d.Child("nodeDeletionTimeoutSeconds"), v, "the Machine API has no node deletion timeout; only the default (10) can be converted"))
	}
	out.Taints = taintsToMAPI(in.Taints, specPath.Child("taints"), r)
	if in.ProviderID != "" {
		out.ProviderID = ptr.To(in.ProviderID)
	}
	mv := MachineValues{FailureDomain: in.FailureDomain, DataSecretName: in.Bootstrap.DataSecretName, ControlPlane: controlPlane && marksControlPlane(c.Platform)}
	out.ProviderSpec.Value = c.infraPlatform(labelled).FromInfra(infra, mv, InfraPaths{Infra: infraPath, Machine: specPath, Metadata: metaPath}, r)
	return labels, annotations, out
}

// controlPlaneToCAPI puts the Cluster API control-plane label on a Machine the platform says is
// part of the control plane. On such a platform a Machine API Machine that carries the label
// without being a control-plane Machine is an error: the Cluster API provider would treat it
// as one.
func (c *Context) controlPlaneToCAPI(labels map[string]string, controlPlane bool, path *field.Path, r *Report) {
	if !marksControlPlane(c.Platform) {
		return
	}
	if v, ok := labels[clusterv1.MachineControlPlaneLabel]; ok && !controlPlane {
		r.Error(field.Invalid(path.Key(clusterv1.MachineControlPlaneLabel), v, "the "+c.Platform.Name()+" provider of the Cluster API treats Machines with this label as control-plane Machines, but the providerSpec does not make this one part of the control plane"))
		return
	}
	if controlPlane {
		labels[clusterv1.MachineControlPlaneLabel] = ""
	}
}

// roleToCAPI gives a Machine API Machine of role master the Cluster API control-plane label on
// a platform that converts the role (ControlPlaneRole), or refuses it. labels are the converted
// labels (the Machine's own, copied), path their path.
func (c *Context) roleToCAPI(labels map[string]string, path *field.Path, r *Report) {
	check, ok := controlPlaneRole(c.Platform)
	if !ok {
		return
	}
	master := labels[MachineAPIRoleLabel] == MachineAPIMasterRole
	v, labelled := labels[clusterv1.MachineControlPlaneLabel]
	switch {
	case !check.Converts:
		c.refuseRole(labels, path, check.Why, r)
	case labelled && !master:
		r.Error(field.Invalid(path.Key(clusterv1.MachineControlPlaneLabel), v, "the "+c.Platform.Name()+" provider of the Cluster API treats Machines with this label as control-plane Machines, but the Machine API does not: its role (label "+MachineAPIRoleLabel+") is not master"))
	case master:
		labels[clusterv1.MachineControlPlaneLabel] = ""
		c.warnRole(path.Key(MachineAPIRoleLabel), check, r)
	}
}

// roleToMAPI is roleToCAPI's reverse: the control-plane label goes, role master stays (or is
// set, when a Cluster API-born Machine has no role).
func (c *Context) roleToMAPI(labels map[string]string, path *field.Path, r *Report) {
	check, ok := controlPlaneRole(c.Platform)
	if !ok {
		return
	}
	role, hasRole := labels[MachineAPIRoleLabel]
	_, labelled := labels[clusterv1.MachineControlPlaneLabel]
	switch {
	case !check.Converts:
		c.refuseRole(labels, path, check.Why, r)
	case role == MachineAPIMasterRole && !labelled:
		r.Error(field.Invalid(path.Key(MachineAPIRoleLabel), role, "the Machine API treats Machines of role master as control-plane Machines, but the "+c.Platform.Name()+" provider of the Cluster API does not: the Machine has no "+clusterv1.MachineControlPlaneLabel+" label"))
	case labelled && hasRole && role != MachineAPIMasterRole:
		r.Error(field.Invalid(path.Key(MachineAPIRoleLabel), role, "a control-plane Machine (label "+clusterv1.MachineControlPlaneLabel+") has role master in the Machine API"))
	case labelled:
		delete(labels, clusterv1.MachineControlPlaneLabel)
		if !hasRole {
			labels[MachineAPIRoleLabel] = MachineAPIMasterRole
			r.Warn(path.Key(MachineAPIRoleLabel), "set to master: the Machine API makes a Machine part of the control plane by its role")
		}
		c.warnRole(path.Key(clusterv1.MachineControlPlaneLabel), check, r)
	}
}

func (c *Context) refuseRole(labels map[string]string, path *field.Path, why string, r *Report) {
	msg := "control-plane Machines do not convert on " + c.Platform.Name() + ": " + why
	if v, ok := labels[clusterv1.MachineControlPlaneLabel]; ok {
		r.Error(field.Invalid(path.Key(clusterv1.MachineControlPlaneLabel), v, msg))
	}
	if v := labels[MachineAPIRoleLabel]; v == MachineAPIMasterRole {
		r.Error(field.Invalid(path.Key(MachineAPIRoleLabel), v, msg))
	}
}

func (c *Context) warnRole(path *field.Path, check RoleCheck, r *Report) {
	if check.Why != "" {
		r.Warn(path, "%s", check.Why)
	}
}

func taintsToCAPI(in []corev1.Taint, path *field.Path, r *Report) []clusterv1.MachineTaint {
	if len(in) == 0 {
		return nil
	}
	out := make([]clusterv1.MachineTaint, 0, len(in))
	for i, t := range in {
		p := path.Index(i)
		if t.Effect == "" {
			r.Error(field.Required(p.Child("effect"), "the Cluster API requires a taint effect"))
		}
		if t.TimeAdded != nil {
			r.Warn(p.Child("timeAdded"), "dropped: only meaningful on Node taints")
		}
		if why := reservedTaint(t.Key); why != "" {
			r.Error(field.Invalid(p.Child("key"), t.Key, "the Cluster API does not accept this taint on Machines: "+why))
		}
		// The Machine API node link controller adds missing taints on every reconcile.
		out = append(out, clusterv1.MachineTaint{Key: t.Key, Value: t.Value, Effect: t.Effect, Propagation: clusterv1.MachineTaintPropagationAlways})
	}
	return out
}

// reservedTaint says why the Cluster API refuses a Machine taint key ("" if it accepts it):
// keys owned by the Cluster API itself, the node lifecycle controller, the cloud controller
// manager, and the deprecated master role.
func reservedTaint(key string) string {
	switch {
	case key == clusterv1.NodeUninitializedTaint.Key, key == clusterv1.NodeOutdatedRevisionTaint.Key:
		return "reserved for the Cluster API"
	case strings.HasPrefix(key, "node.kubernetes.io/") && key != "node.kubernetes.io/out-of-service":
		return "node.kubernetes.io/ taints belong to the node lifecycle controller"
	case strings.HasPrefix(key, "node.cloudprovider.kubernetes.io/"):
		return "node.cloudprovider.kubernetes.io/ taints belong to the cloud controller manager"
	case key == "node-role.kubernetes.io/master":
		return "the master role taint is deprecated"
	}
	return ""
}

func taintsToMAPI(in []clusterv1.MachineTaint, path *field.Path, r *Report) []corev1.Taint {
	if len(in) == 0 {
		return nil
	}
	out := make([]corev1.Taint, 0, len(in))
	for i, t := range in {
		switch t.Propagation {
		case clusterv1.MachineTaintPropagationAlways:
		case "":
			r.Warn(path.Index(i).Child("propagation"), "unset; treated as Always, which is how the Machine API applies taints")
		default:
			r.Error(field.NotSupported(path.Index(i).Child("propagation"), t.Propagation, []string{string(clusterv1.MachineTaintPropagationAlways)}))
		}
		if why := reservedTaint(t.Key); why != "" {
			r.Error(field.Invalid(path.Index(i).Child("key"), t.Key, "the Cluster API does not accept this taint on Machines: "+why))
		}
		out = append(out, corev1.Taint{Key: t.Key, Value: t.Value, Effect: t.Effect})
	}
	return out
}

func (n Namespaces) toCAPI(ns string, path *field.Path, r *Report) string {
	return n.mapNS(ns, n.MachineAPI, n.ClusterAPI, "Machine API", path, r)
}

func (n Namespaces) toMAPI(ns string, path *field.Path, r *Report) string {
	return n.mapNS(ns, n.ClusterAPI, n.MachineAPI, "Cluster API", path, r)
}

func (n Namespaces) mapNS(ns, from, to, api string, path *field.Path, r *Report) string {
	if from == "" || to == "" {
		return ns
	}
	switch ns {
	case from:
		return to
	case to:
		r.Error(field.Invalid(path, ns, "a "+api+" object in the other API's namespace cannot be mapped ("+from+" ⇄ "+to+")"))
	}
	return ns
}

type constError string

func (e constError) Error() string { return string(e) }

const (
	errNoPlatform    = constError("convert: the context has no Platform")
	errNoClusterName = constError("convert: the context has no ClusterName")
)
