// Package converttest generates random objects in the form the converter accepts and checks
// that they survive a round trip. Platform tests supply the providerSpec / InfraMachine parts.
package converttest

import (
	"fmt"
	"math/rand"
	"os"
	"slices"
	"sort"
	"strconv"
	"time"

	mapiv1 "github.com/openshift/api/machine/v1beta1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/randfill"

	"github.com/machina-dev/machina/internal/convert"
)

// Gen is a seeded source of random, convertible objects.
type Gen struct {
	*rand.Rand
	// Fill fills arbitrary values (for inputs that need not be convertible).
	Fill *randfill.Filler
}

// New returns a generator for seed.
func New(seed int64) *Gen {
	return &Gen{
		Rand: rand.New(rand.NewSource(seed)),
		Fill: randfill.New().RandSource(rand.NewSource(seed)).NilChance(0.3).NumElements(0, 3).Funcs(
			// Raw extensions hold an interface randfill cannot fill; callers set providerSpec values.
			func(r *runtime.RawExtension, _ randfill.Continue) { *r = runtime.RawExtension{} },
			func(f *metav1.FieldsV1, _ randfill.Continue) { f.SetRawBytes([]byte("{}")) },
		),
	}
}

const alnum = "abcdefghijklmnopqrstuvwxyz0123456789"

// Token is a short lower-case alphanumeric string (a valid DNS label and label value).
func (g *Gen) Token() string {
	n := 1 + g.Intn(8)
	b := make([]byte, n)
	for i := range b {
		b[i] = alnum[g.Intn(len(alnum))]
	}
	return string(b)
}

// Maybe is true with probability 1/2.
func (g *Gen) Maybe() bool { return g.Intn(2) == 0 }

// Pick returns one of the options.
func Pick[T any](g *Gen, options ...T) T { return options[g.Intn(len(options))] }

// StrPtr returns nil or a pointer to a token.
func (g *Gen) StrPtr() *string {
	if g.Maybe() {
		return nil
	}
	return ptr.To(g.Token())
}

// BoolPtr returns nil, true or false.
func (g *Gen) BoolPtr() *bool { return Pick(g, nil, ptr.To(true), ptr.To(false)) }

// Key is a random label or annotation key that no converter rule applies to.
func (g *Gen) Key() string {
	if g.Maybe() {
		return g.Token()
	}
	return Pick(g, "example.com/", "team.acme.io/", "app.kubernetes.io/") + g.Token()
}

// Map returns nil or up to 3 random entries.
func (g *Gen) Map() map[string]string {
	n := g.Intn(4)
	if n == 0 {
		return nil
	}
	m := make(map[string]string, n)
	for i := 0; i < n; i++ {
		m[g.Key()] = Pick(g, "", g.Token())
	}
	return m
}

func put(m *map[string]string, k, v string) {
	if *m == nil {
		*m = map[string]string{}
	}
	(*m)[k] = v
}

// Namespace returns one of the mapped namespaces or an unmapped one.
func (g *Gen) namespace(ns string) string { return Pick(g, ns, ns, "", "team-"+g.Token()) }

// NodeLabels returns labels the Cluster API propagates to Nodes.
func (g *Gen) NodeLabels() map[string]string {
	var m map[string]string
	for i := g.Intn(3); i > 0; i-- {
		put(&m, Pick(g, "node-role.kubernetes.io/", "node-restriction.kubernetes.io/", "node.cluster.x-k8s.io/", "x.node.cluster.x-k8s.io/")+g.Token(), Pick(g, "", g.Token()))
	}
	return m
}

func (g *Gen) hooks() []mapiv1.LifecycleHook {
	n := g.Intn(3)
	if n == 0 {
		return nil
	}
	seen := map[string]bool{}
	var out []mapiv1.LifecycleHook
	for i := 0; i < n; i++ {
		name := g.Token()
		if seen[name] {
			continue
		}
		seen[name] = true
		out = append(out, mapiv1.LifecycleHook{Name: name, Owner: Pick(g, "clusteroperator/etcd", "my-controller", g.Token())})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

func (g *Gen) taintParts() (string, string, corev1.TaintEffect) {
	return g.Key(), Pick(g, "", g.Token()), Pick(g, corev1.TaintEffectNoSchedule, corev1.TaintEffectPreferNoSchedule, corev1.TaintEffectNoExecute)
}

// machineAnnotations returns random annotations, sometimes with the delete-machine and
// exclude-node-draining annotations in the Machine API (mapi) or Cluster API form.
func (g *Gen) machineAnnotations(mapi bool) map[string]string {
	m := g.Map()
	if g.Intn(4) == 0 {
		put(&m, deleteKey(mapi), Pick(g, "", "true", "yes"))
	}
	if g.Intn(4) == 0 {
		put(&m, excludeKey(mapi), "")
	}
	return m
}

func deleteKey(mapi bool) string {
	if mapi {
		return convert.MachineAPIDeleteMachineAnnotation
	}
	return clusterv1.DeleteMachineAnnotation
}

func excludeKey(mapi bool) string {
	if mapi {
		return convert.MachineAPIExcludeNodeDrainingAnnotation
	}
	return clusterv1.ExcludeNodeDrainingAnnotation
}

// MAPIMachineSpec returns a Machine API machine spec around providerSpec.
func (g *Gen) MAPIMachineSpec(providerSpec *runtime.RawExtension, template bool) mapiv1.MachineSpec {
	s := mapiv1.MachineSpec{ProviderSpec: mapiv1.ProviderSpec{Value: providerSpec}}
	s.ObjectMeta.Labels = g.NodeLabels()
	s.LifecycleHooks.PreDrain = g.hooks()
	s.LifecycleHooks.PreTerminate = g.hooks()
	for i := g.Intn(3); i > 0; i-- {
		k, v, e := g.taintParts()
		s.Taints = append(s.Taints, corev1.Taint{Key: k, Value: v, Effect: e})
	}
	if !template && g.Maybe() {
		s.ProviderID = ptr.To(Pick(g, "aws:///us-east-1a/i-0123456789abcdef0", "sim://sim-east-1/sim-east-1a/"+g.Token(), g.Token()))
	}
	return s
}

func (g *Gen) mapiLabels(c convert.Context) map[string]string {
	m := g.Map()
	put(&m, convert.MachineAPIClusterLabel, c.ClusterName)
	return m
}

// MAPIMachine returns a Machine API Machine in the form the converter accepts without
// warnings.
func (g *Gen) MAPIMachine(c convert.Context, providerSpec *runtime.RawExtension) *mapiv1.Machine {
	m := &mapiv1.Machine{
		TypeMeta:   metav1.TypeMeta{APIVersion: mapiv1.GroupVersion.String(), Kind: "Machine"},
		ObjectMeta: metav1.ObjectMeta{Name: g.Token(), Namespace: g.namespace(c.Namespaces.MachineAPI), Labels: g.mapiLabels(c), Annotations: g.machineAnnotations(true)},
		Spec:       g.MAPIMachineSpec(providerSpec, false),
	}
	return m
}

// MAPIMachineSet returns a Machine API MachineSet in the form the converter accepts without
// warnings.
func (g *Gen) MAPIMachineSet(c convert.Context, providerSpec *runtime.RawExtension) *mapiv1.MachineSet {
	name := g.Token()
	if g.Intn(5) == 0 {
		name = fmt.Sprintf("%s-worker-with-a-very-long-name-%s-%s-%s", c.ClusterName, g.Token(), g.Token(), g.Token())
	}
	ms := &mapiv1.MachineSet{
		TypeMeta:   metav1.TypeMeta{APIVersion: mapiv1.GroupVersion.String(), Kind: "MachineSet"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: g.namespace(c.Namespaces.MachineAPI), Labels: g.mapiLabels(c), Annotations: g.Map()},
	}
	g.scaleAnnotations(&ms.Annotations, true)
	if g.Maybe() {
		ms.Spec.Replicas = ptr.To(int32(g.Intn(5)))
	}
	ms.Spec.MinReadySeconds = int32(Pick(g, 0, 0, 30))
	ms.Spec.DeletePolicy = Pick(g, "", "Random", "Newest", "Oldest")
	sel := map[string]string{"machine.openshift.io/cluster-api-machineset": name}
	if g.Maybe() {
		sel[convert.MachineAPIClusterLabel] = c.ClusterName
	}
	ms.Spec.Selector.MatchLabels = sel
	if g.Intn(4) == 0 {
		ms.Spec.Selector.MatchExpressions = []metav1.LabelSelectorRequirement{{Key: g.Key(), Operator: metav1.LabelSelectorOpIn, Values: []string{g.Token()}}}
	}
	tl := g.mapiLabels(c)
	for k, v := range sel {
		tl[k] = v
	}
	ms.Spec.Template.ObjectMeta.Labels = tl
	ms.Spec.Template.ObjectMeta.Annotations = g.machineAnnotations(true)
	ms.Spec.Template.Spec = g.MAPIMachineSpec(providerSpec, true)
	return ms
}

func (g *Gen) scaleAnnotations(m *map[string]string, mapi bool) {
	if g.Maybe() {
		return
	}
	cpu, mem, gpu := fmt.Sprint(1+g.Intn(64)), 1024*(1+g.Intn(256)), g.Intn(3)
	if mapi {
		put(m, convert.MachineAPICPUAnnotation, cpu)
		put(m, convert.MachineAPIMemoryAnnotation, fmt.Sprint(mem))
		put(m, convert.MachineAPIGPUAnnotation, fmt.Sprint(gpu))
		put(m, convert.MachineAPIAutoscalerMinSizeAnnotation, "0")
		put(m, convert.MachineAPIAutoscalerMaxSizeAnnotation, "6")
	} else {
		put(m, convert.CapacityCPUAnnotation, cpu)
		put(m, convert.CapacityMemoryAnnotation, fmt.Sprintf("%dMi", mem))
		put(m, convert.CapacityGPUCountAnnotation, fmt.Sprint(gpu))
		if gpu > 0 {
			put(m, convert.CapacityGPUTypeAnnotation, convert.DefaultGPUType)
		}
		put(m, clusterv1.AutoscalerMinSizeAnnotation, "0")
		put(m, clusterv1.AutoscalerMaxSizeAnnotation, "6")
	}
	put(m, convert.CapacityLabelsAnnotation, "kubernetes.io/arch="+Pick(g, "amd64", "arm64"))
}

func (g *Gen) capiLabels(c convert.Context) map[string]string {
	m := g.mapiLabels(c)
	put(&m, convert.ClusterAPIClusterLabel, c.ClusterName)
	return m
}

func (g *Gen) capiMachineAnnotations() map[string]string {
	m := g.machineAnnotations(false)
	for _, h := range g.hooks() {
		put(&m, clusterv1.PreDrainDeleteHookAnnotationPrefix+"/"+h.Name, h.Owner)
	}
	for _, h := range g.hooks() {
		put(&m, clusterv1.PreTerminateDeleteHookAnnotationPrefix+"/"+h.Name, h.Owner)
	}
	return m
}

// CAPIMachineSpec returns a Cluster API machine spec referencing an InfraMachine (template)
// of kind infraKind named infraName.
func (g *Gen) CAPIMachineSpec(c convert.Context, group, infraKind, infraName string, providerID string) clusterv1.MachineSpec {
	s := clusterv1.MachineSpec{
		ClusterName:       c.ClusterName,
		Bootstrap:         clusterv1.Bootstrap{DataSecretName: ptr.To(Pick(g, "worker-user-data", g.Token()))},
		InfrastructureRef: clusterv1.ContractVersionedObjectReference{APIGroup: group, Kind: infraKind, Name: infraName},
		ProviderID:        providerID,
		FailureDomain:     Pick(g, "", g.Token()),
		Deletion:          clusterv1.MachineDeletionSpec{NodeDeletionTimeoutSeconds: ptr.To(convert.DefaultNodeDeletionTimeoutSeconds)},
	}
	for i := g.Intn(3); i > 0; i-- {
		k, v, e := g.taintParts()
		s.Taints = append(s.Taints, clusterv1.MachineTaint{Key: k, Value: v, Effect: e, Propagation: clusterv1.MachineTaintPropagationAlways})
	}
	return s
}

// CAPIMachine returns a Cluster API Machine in the form the converter accepts without warnings.
func (g *Gen) CAPIMachine(c convert.Context, providerID string) *clusterv1.Machine {
	gvk := c.Platform.InfraMachineGVK()
	name := g.Token()
	labels := g.capiLabels(c)
	for k, v := range g.NodeLabels() {
		labels[k] = v
	}
	return &clusterv1.Machine{
		TypeMeta:   metav1.TypeMeta{APIVersion: clusterv1.GroupVersion.String(), Kind: "Machine"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: g.namespace(c.Namespaces.ClusterAPI), Labels: labels, Annotations: nilIfEmpty(g.capiMachineAnnotations())},
		Spec:       g.CAPIMachineSpec(c, gvk.Group, gvk.Kind, name, providerID),
	}
}

// CAPIMachineSet returns a Cluster API MachineSet referencing the template templateName.
func (g *Gen) CAPIMachineSet(c convert.Context, templateName string) *clusterv1.MachineSet {
	gvk := c.Platform.InfraMachineTemplateGVK()
	name := g.Token()
	ms := &clusterv1.MachineSet{
		TypeMeta:   metav1.TypeMeta{APIVersion: clusterv1.GroupVersion.String(), Kind: "MachineSet"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: g.namespace(c.Namespaces.ClusterAPI), Labels: g.capiLabels(c), Annotations: g.Map()},
	}
	g.scaleAnnotations(&ms.Annotations, false)
	ms.Spec.ClusterName = c.ClusterName
	if g.Maybe() {
		ms.Spec.Replicas = ptr.To(int32(g.Intn(5)))
	}
	ms.Spec.Deletion.Order = Pick(g, "", clusterv1.RandomMachineSetDeletionOrder, clusterv1.NewestMachineSetDeletionOrder, clusterv1.OldestMachineSetDeletionOrder)
	sel := map[string]string{clusterv1.MachineSetNameLabel: name, convert.ClusterAPIClusterLabel: c.ClusterName}
	ms.Spec.Selector.MatchLabels = sel
	tl := g.capiLabels(c)
	for k, v := range sel {
		tl[k] = v
	}
	for k, v := range g.NodeLabels() {
		tl[k] = v
	}
	ms.Spec.Template.Labels = tl
	ms.Spec.Template.Annotations = nilIfEmpty(g.capiMachineAnnotations())
	ms.Spec.Template.Spec = g.CAPIMachineSpec(c, gvk.Group, gvk.Kind, templateName, "")
	if g.Maybe() {
		ms.Spec.Template.Spec.MinReadySeconds = ptr.To(int32(1 + g.Intn(60)))
	}
	return ms
}

// MAPIMachineHealthCheck returns a Machine API MachineHealthCheck the converter accepts
// without warnings.
func (g *Gen) MAPIMachineHealthCheck(c convert.Context) *mapiv1.MachineHealthCheck {
	m := &mapiv1.MachineHealthCheck{
		TypeMeta:   metav1.TypeMeta{APIVersion: mapiv1.GroupVersion.String(), Kind: "MachineHealthCheck"},
		ObjectMeta: metav1.ObjectMeta{Name: g.Token(), Namespace: g.namespace(c.Namespaces.MachineAPI), Labels: g.Map(), Annotations: g.Map()},
	}
	m.Spec.Selector.MatchLabels = map[string]string{"machine.openshift.io/cluster-api-machine-role": Pick(g, "worker", "infra")}
	for i := g.Intn(4); i > 0; i-- {
		m.Spec.UnhealthyConditions = append(m.Spec.UnhealthyConditions, mapiv1.UnhealthyCondition{
			Type: Pick[corev1.NodeConditionType](g, "Ready", "MemoryPressure", "DiskPressure"), Status: Pick(g, corev1.ConditionFalse, corev1.ConditionUnknown),
			Timeout: metav1.Duration{Duration: secs(g.Intn(1000))},
		})
	}
	m.Spec.NodeStartupTimeout = &metav1.Duration{Duration: secs(Pick(g, 0, 600, 1200, g.Intn(5000)))}
	if g.Maybe() {
		m.Spec.MaxUnhealthy = ptr.To(Pick(g, intstr.FromInt32(int32(g.Intn(10))), intstr.FromString(fmt.Sprintf("%d%%", g.Intn(101)))))
	}
	if g.Maybe() {
		m.Spec.RemediationTemplate = &corev1.ObjectReference{APIVersion: "infrastructure.cluster.x-k8s.io/v1beta1", Kind: "Metal3RemediationTemplate", Name: g.Token()}
	}
	return m
}

// CAPIMachineHealthCheck returns a Cluster API MachineHealthCheck the converter accepts
// without warnings.
func (g *Gen) CAPIMachineHealthCheck(c convert.Context) *clusterv1.MachineHealthCheck {
	m := &clusterv1.MachineHealthCheck{
		TypeMeta:   metav1.TypeMeta{APIVersion: clusterv1.GroupVersion.String(), Kind: "MachineHealthCheck"},
		ObjectMeta: metav1.ObjectMeta{Name: g.Token(), Namespace: g.namespace(c.Namespaces.ClusterAPI), Labels: g.Map(), Annotations: g.Map()},
	}
	put(&m.Labels, convert.ClusterAPIClusterLabel, c.ClusterName)
	m.Spec.ClusterName = c.ClusterName
	m.Spec.Selector.MatchLabels = map[string]string{clusterv1.MachineSetNameLabel: g.Token()}
	for i := g.Intn(4); i > 0; i-- {
		m.Spec.Checks.UnhealthyNodeConditions = append(m.Spec.Checks.UnhealthyNodeConditions, clusterv1.UnhealthyNodeCondition{
			Type: Pick[corev1.NodeConditionType](g, "Ready", "MemoryPressure"), Status: Pick(g, corev1.ConditionFalse, corev1.ConditionUnknown),
			TimeoutSeconds: ptr.To(int32(g.Intn(1000))),
		})
	}
	m.Spec.Checks.NodeStartupTimeoutSeconds = ptr.To(int32(Pick(g, 0, 600, g.Intn(5000))))
	if g.Maybe() {
		m.Spec.Remediation.TriggerIf.UnhealthyLessThanOrEqualTo = ptr.To(intstr.FromString("40%"))
	}
	if g.Maybe() {
		m.Spec.Remediation.TemplateRef = clusterv1.MachineHealthCheckRemediationTemplateReference{APIVersion: "infrastructure.cluster.x-k8s.io/v1beta1", Kind: "Metal3RemediationTemplate", Name: g.Token()}
	}
	return m
}

func secs(n int) time.Duration { return time.Duration(n) * time.Second }

func nilIfEmpty(m map[string]string) map[string]string {
	if len(m) == 0 {
		return nil
	}
	return m
}

// Cases is the number of random cases per property: def, or $CONVERT_CASES when set (to
// search longer, e.g. CONVERT_CASES=200000 go test ./internal/convert/...).
func Cases(def int) int64 {
	if n, err := strconv.Atoi(os.Getenv("CONVERT_CASES")); err == nil && n > 0 {
		return int64(n)
	}
	return int64(def)
}

// Fields lists the field paths of errors or warnings, sorted: what the platforms' tests
// compare.
func Fields[T interface{ *field.Error | convert.Warning }](list []T) []string {
	var out []string
	for _, e := range list {
		switch v := any(e).(type) {
		case *field.Error:
			out = append(out, v.Field)
		case convert.Warning:
			out = append(out, v.Field)
		}
	}
	slices.Sort(out)
	return out
}
