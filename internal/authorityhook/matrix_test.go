package authorityhook_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/machina-dev/machina/internal/authorityhook"
	"github.com/machina-dev/machina/internal/lab"
	"github.com/machina-dev/machina/internal/scheme"
	"github.com/machina-dev/machina/internal/testenv"
)

// The identities of the authority matrix.
const (
	idAdmin      = "cluster-admin"
	idNSAdmin    = "namespace-admin"
	idAutoscaler = "autoscaler"
	idManager    = "manager"
)

// The writes of the authority matrix, each sent as a dry run (admission runs in full, nothing
// is stored) to the non-authoritative copy.
const (
	wSpec          = "spec"
	wReplicas      = "spec.replicas"
	wLabel         = "label"
	wLabelReserved = "label (reserved)"
	wAnno          = "annotation"
	wAnnoReserved  = "annotation (reserved)"
	wScale         = "scale"
	wStatus        = "status"
	wDelete        = "delete"
	wPaused        = "paused annotation"
	wAuthority     = "authoritativeAPI"
)

var matrixWrites = []string{wSpec, wReplicas, wLabel, wLabelReserved, wAnno, wAnnoReserved, wScale, wStatus, wDelete, wPaused, wAuthority}

// matrixKind is one kind's non-authoritative copy and the requests that exercise each write.
type matrixKind struct {
	name        string // e.g. "cluster.x-k8s.io/MachineSet"
	gvk         schema.GroupVersionKind
	ns, obj     string
	create      client.Object
	patches     map[string]string // write → merge patch (object, or the subresource's body)
	mirrorPause bool              // a paused Cluster API mirror
}

// The outcome of one cell: "allowed", or who refused and why.
type outcome struct {
	allowed bool
	by      string // "policy", "webhook", "rbac" or "schema"
	message string
	gap     string // why today's answer is recorded although the rules would refuse it
}

func (o outcome) String() string {
	if o.allowed {
		return "allowed"
	}
	return "denied by " + o.by + ": " + o.message
}

// TestAuthorityMatrix sends every kind of write, as each identity, to the non-authoritative
// copy of every kind machina mirrors, and checks the answer against the authority rules
// (docs/migration.md, "Admission"). The CEL policies and the authority webhook both run (no
// controller does: nothing changes the objects between requests).
func TestAuthorityMatrix(t *testing.T) {
	e := testenv.Start(t, testenv.Options{Groups: authorityhook.GroupName})
	ctx := context.Background()
	e.SeedCluster("lab")
	ids := matrixIdentities(t, e)
	kinds := matrixKinds()
	setUpMirrors(t, e, kinds)
	waitPoliciesActive(t, e, kinds[0])

	counts := map[string]int{}
	gaps := map[string]int{} // reason → cells
	var table strings.Builder
	fmt.Fprintf(&table, "%-46s %-22s", "kind", "write")
	for _, id := range []string{idAdmin, idNSAdmin, idAutoscaler, idManager} {
		fmt.Fprintf(&table, " %-16s", id)
	}
	table.WriteString("\n")
	for _, k := range kinds {
		for _, w := range matrixWrites {
			if _, ok := k.patches[w]; !ok && w != wDelete {
				continue
			}
			fmt.Fprintf(&table, "%-46s %-22s", k.name, w)
			for _, id := range []string{idAdmin, idNSAdmin, idAutoscaler, idManager} {
				got := send(ctx, ids[id], k, w)
				want := expected(id, k, w)
				cell := "allow"
				if !got.allowed {
					cell = "deny:" + got.by
				}
				if want.gap != "" {
					cell += "(gap)"
					gaps[want.gap]++
				}
				if got.allowed != want.allowed || got.by != want.by || !strings.Contains(got.message, want.message) {
					t.Errorf("%s %s as %s: got %s; want %s", k.name, w, id, got, want)
					cell += "!"
				}
				counts[cell]++
				fmt.Fprintf(&table, " %-16s", cell)
			}
			table.WriteString("\n")
		}
	}
	keys := make([]string, 0, len(counts))
	for k := range counts {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var summary []string
	for _, k := range keys {
		summary = append(summary, fmt.Sprintf("%s=%d", k, counts[k]))
	}
	var gapLines []string
	for reason, n := range gaps {
		gapLines = append(gapLines, fmt.Sprintf("%d cells: %s", n, reason))
	}
	slices.Sort(gapLines)
	if len(gapLines) == 0 {
		gapLines = []string{"none"}
	}
	t.Logf("authority matrix (writes to the non-authoritative copy; \"!\" marks a cell that differs from the rules, "+
		"\"(gap)\" today's answer where the rules fall short):\n%s\ncounts: %s\nknown gaps:\n  %s",
		table.String(), strings.Join(summary, " "), strings.Join(gapLines, "\n  "))
	checkMirrorExceptions(t, e, ids, kinds)
	checkAuthorityConditions(t, e, ids)
}

// expected is the authority rules as a table: who may write what on a non-authoritative copy.
// Where today's answer falls short of the rules the cell records it with the reason (gap), so
// closing the gap changes this table.
func expected(id string, k matrixKind, w string) outcome {
	allow := outcome{allowed: true}
	rbac := outcome{by: "rbac", message: "forbidden"}
	capi, kind := k.mirrorPause, k.gvk.Kind
	// What RBAC gives each identity: the administrators everything, the autoscaler its node
	// groups (Machines, MachineSets and their scale subresource), the manager its generated
	// roles, which lack what the controllers never do (scale: they write spec.replicas; they
	// delete MachineSets of both APIs, the sync carrying a deletion over to the mirror).
	switch id {
	case idAutoscaler:
		if kind != "Machine" && kind != "MachineSet" || k.gvk.Group == "infrastructure.machina.dev" || w == wDelete || w == wStatus {
			return rbac
		}
	case idManager:
		if w == wScale {
			return rbac
		}
		return allow // the policies and the webhook exempt machina's own identity
	}
	switch w {
	case wLabel, wAnno, wDelete, wAuthority:
		return allow // the user's own metadata; deleting warns; spec.authoritativeAPI is how a migration is requested
	case wStatus:
		if capi {
			return outcome{by: "policy", message: "status: Forbidden: " + kind + " " + k.obj + " is a paused mirror of an authoritative Machine API resource"}
		}
		return outcome{by: "policy", message: "status: Forbidden: " + kind + " " + k.obj + " is a mirror: the Cluster API is authoritative (ClusterAPI)"}
	case wScale:
		switch {
		case id == idAutoscaler:
			return allow // the autoscaler scales a mirror of either API; the sync carries it over
		case !capi:
			return outcome{by: "webhook", message: "spec.replicas: Forbidden: MachineSet " + k.obj + " is a mirror: the Cluster API is authoritative"}
		}
		return outcome{by: "webhook", message: "spec.replicas: Forbidden: MachineSet " + k.obj + " is a paused mirror of an authoritative Machine API resource"}
	case wSpec, wReplicas:
		switch {
		case w == wReplicas && id == idAutoscaler:
			return allow
		case capi:
			return outcome{by: "policy", message: "spec: Forbidden: " + kind + " " + k.obj + " is a paused mirror of an authoritative Machine API resource"}
		}
		return outcome{by: "policy", message: "spec: Forbidden: " + kind + " " + k.obj + " is a mirror: the Cluster API is authoritative"}
	case wPaused:
		if capi {
			return outcome{by: "policy", message: "metadata.annotations[cluster.x-k8s.io/paused]: Forbidden: only the migration controller unpauses a mirror"}
		}
		return outcome{by: "policy", message: "metadata.annotations: Forbidden: annotations in the " + reservedDomains + " domains"}
	case wLabelReserved, wAnnoReserved:
		field := "annotations"
		if w == wLabelReserved {
			field = "labels"
		}
		return outcome{by: "policy", message: "metadata." + field + ": Forbidden: " + field + " in the " + reservedDomains + " domains of " + kind + " " + k.obj}
	}
	return outcome{by: "test", message: "no rule for " + w}
}

func matrixIdentities(t *testing.T, e *testenv.Env) map[string]client.Client {
	t.Helper()
	ctx := context.Background()
	all := []string{"get", "list", "watch", "create", "update", "patch", "delete"}
	resources := []string{"machines", "machines/status", "machinesets", "machinesets/status", "machinesets/scale",
		"machinehealthchecks", "machinehealthchecks/status"}
	infra := []string{"simmachines", "simmachines/status", "simmachinetemplates", "simmachinetemplates/status"}
	roles := []*rbacv1.ClusterRole{
		// A team that administers its namespaces' machines, through RoleBindings in both.
		{ObjectMeta: metav1.ObjectMeta{Name: "matrix-machine-admin"}, Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{"machine.openshift.io", "cluster.x-k8s.io"}, Resources: resources, Verbs: all},
			{APIGroups: []string{"infrastructure.machina.dev"}, Resources: infra, Verbs: all}}},
		// The cluster autoscaler's rights on its node groups, as OpenShift grants them.
		{ObjectMeta: metav1.ObjectMeta{Name: "matrix-autoscaler"}, Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{"machine.openshift.io", "cluster.x-k8s.io"}, Resources: []string{"machines", "machinesets", "machinesets/scale"},
				Verbs: []string{"get", "list", "watch", "update", "patch"}},
			{APIGroups: []string{"infrastructure.machina.dev"}, Resources: []string{"simmachinetemplates"}, Verbs: []string{"get", "list", "watch"}}}},
	}
	bindings := []client.Object{
		&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "matrix-ns-admin", Namespace: mapiNS},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "matrix-machine-admin"},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "matrix-ns-admin"}}},
		&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "matrix-ns-admin", Namespace: capiNS},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "matrix-machine-admin"},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "matrix-ns-admin"}}},
		&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "matrix-autoscaler"},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "matrix-autoscaler"},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: "openshift-machine-api", Name: "cluster-autoscaler"}}},
	}
	for _, r := range roles {
		if err := e.Client.Create(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	for _, b := range bindings {
		if err := e.Client.Create(ctx, b); err != nil {
			t.Fatal(err)
		}
	}
	as := func(user string, groups ...string) client.Client {
		cfg, err := e.Lab.UserConfig(user, groups...)
		if err != nil {
			t.Fatal(err)
		}
		c, err := client.New(cfg, client.Options{Scheme: scheme.Scheme})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	return map[string]client.Client{
		idAdmin:      e.Client,
		idNSAdmin:    as("matrix-ns-admin"),
		idAutoscaler: as("system:serviceaccount:openshift-machine-api:cluster-autoscaler", "system:serviceaccounts", "system:serviceaccounts:openshift-machine-api"),
		idManager:    e.ManagerClient(),
	}
}

const reservedKey = "matrix.openshift.io/probe"

// reservedDomains are the label and annotation domains only machina writes on a mirror.
const reservedDomains = "kubernetes.io, k8s.io, openshift.io, x-k8s.io and machina.dev"

func metaPatch(field, key string, value any) string {
	v := "null"
	if s, ok := value.(string); ok {
		v = fmt.Sprintf("%q", s)
	}
	return fmt.Sprintf(`{"metadata":{%q:{%q:%s}}}`, field, key, v)
}

func matrixKinds() []matrixKind {
	common := func(extra map[string]string) map[string]string {
		p := map[string]string{
			wLabel: metaPatch("labels", "team", "blue"), wLabelReserved: metaPatch("labels", reservedKey, "x"),
			wAnno: metaPatch("annotations", "note", "x"), wAnnoReserved: metaPatch("annotations", reservedKey, "x"),
		}
		for k, v := range extra {
			p[k] = v
		}
		return p
	}
	mapiGV, capiGV, simGV := machinev1beta1.GroupVersion, schema.GroupVersion{Group: "cluster.x-k8s.io", Version: "v1beta2"},
		schema.GroupVersion{Group: "infrastructure.machina.dev", Version: "v1alpha1"}
	capiPaused := metaPatch("annotations", "cluster.x-k8s.io/paused", nil)
	mapiPaused := metaPatch("annotations", "cluster.x-k8s.io/paused", "")
	return []matrixKind{
		{name: "machine.openshift.io/Machine", gvk: mapiGV.WithKind("Machine"), ns: mapiNS, obj: "mx-machine",
			create: mapiMachine("mx-machine", machinev1beta1.MachineAuthorityClusterAPI),
			patches: common(map[string]string{wSpec: `{"spec":{"providerID":"sim://matrix"}}`, wStatus: `{"status":{"authoritativeAPI":"Migrating"}}`,
				wPaused: mapiPaused, wAuthority: `{"spec":{"authoritativeAPI":"MachineAPI"}}`})},
		{name: "machine.openshift.io/MachineSet", gvk: mapiGV.WithKind("MachineSet"), ns: mapiNS, obj: "mx-set",
			create: mapiSet("mx-set"),
			patches: common(map[string]string{wSpec: `{"spec":{"minReadySeconds":5}}`, wReplicas: `{"spec":{"replicas":3}}`,
				wScale: `{"spec":{"replicas":3}}`, wStatus: `{"status":{"authoritativeAPI":"Migrating"}}`,
				wPaused: mapiPaused, wAuthority: `{"spec":{"authoritativeAPI":"MachineAPI"}}`})},
		{name: "machine.openshift.io/MachineHealthCheck", gvk: mapiGV.WithKind("MachineHealthCheck"), ns: mapiNS, obj: "mx-mhc",
			create: mapiMHC("mx-mhc"),
			patches: common(map[string]string{wSpec: `{"spec":{"maxUnhealthy":"50%"}}`, wStatus: `{"status":{"currentHealthy":5}}`,
				wPaused: mapiPaused, wAuthority: metaPatch("annotations", "machina.dev/authoritative-api", "MachineAPI")})},
		{name: "cluster.x-k8s.io/Machine", gvk: capiGV.WithKind("Machine"), ns: capiNS, obj: "cx-machine", mirrorPause: true,
			create: capiMirror(capiMachine("cx-machine", true)),
			patches: common(map[string]string{wSpec: `{"spec":{"failureDomain":"sim-east-1c"}}`, wStatus: `{"status":{"phase":"Running"}}`,
				wPaused: capiPaused})},
		{name: "cluster.x-k8s.io/MachineSet", gvk: capiGV.WithKind("MachineSet"), ns: capiNS, obj: "cx-set", mirrorPause: true,
			create: capiMirror(capiSet("cx-set")),
			patches: common(map[string]string{wSpec: `{"spec":{"template":{"spec":{"failureDomain":"sim-east-1c"}}}}`,
				wReplicas: `{"spec":{"replicas":3}}`, wScale: `{"spec":{"replicas":3}}`, wStatus: `{"status":{"replicas":3}}`, wPaused: capiPaused})},
		{name: "cluster.x-k8s.io/MachineHealthCheck", gvk: capiGV.WithKind("MachineHealthCheck"), ns: capiNS, obj: "cx-mhc", mirrorPause: true,
			create: capiMirror(capiMHC("cx-mhc")),
			patches: common(map[string]string{wSpec: `{"spec":{"checks":{"nodeStartupTimeoutSeconds":700}}}`,
				wStatus: `{"status":{"expectedMachines":2}}`, wPaused: capiPaused})},
		{name: "infrastructure.machina.dev/SimMachine", gvk: simGV.WithKind("SimMachine"), ns: capiNS, obj: "cx-simmachine", mirrorPause: true,
			create: simObject(simGV.WithKind("SimMachine"), "cx-simmachine", map[string]any{"region": "sim-east-1", "zone": "sim-east-1a",
				"instanceType": "s1.small", "image": "sim-rhcos-9"}),
			patches: common(map[string]string{wSpec: `{"spec":{"instanceType":"s1.large"}}`, wStatus: `{"status":{"instanceID":"i-matrix"}}`,
				wPaused: capiPaused})},
		{name: "infrastructure.machina.dev/SimMachineTemplate", gvk: simGV.WithKind("SimMachineTemplate"), ns: capiNS, obj: "cx-template", mirrorPause: true,
			create: simObject(simGV.WithKind("SimMachineTemplate"), "cx-template", map[string]any{"template": map[string]any{"spec": map[string]any{
				"region": "sim-east-1", "zone": "sim-east-1a", "instanceType": "s1.small", "image": "sim-rhcos-9"}}}),
			patches: common(map[string]string{wSpec: `{"spec":{"template":{"spec":{"instanceType":"s1.large"}}}}`,
				wStatus: `{"status":{"capacity":{"cpu":"2"}}}`, wPaused: capiPaused})},
	}
}

// send makes one write as a dry run and classifies the answer.
func send(ctx context.Context, c client.Client, k matrixKind, w string) outcome {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(k.gvk)
	u.SetNamespace(k.ns)
	u.SetName(k.obj)
	patch := client.RawPatch(types.MergePatchType, []byte(k.patches[w]))
	var err error
	switch w {
	case wDelete:
		err = c.Delete(ctx, u, client.DryRunAll)
	case wStatus:
		err = c.Status().Patch(ctx, u, patch, client.DryRunAll)
	case wScale:
		err = c.SubResource("scale").Patch(ctx, u, patch, client.DryRunAll)
	default:
		err = c.Patch(ctx, u, patch, client.DryRunAll)
	}
	return classify(err)
}

func classify(err error) outcome {
	if err == nil {
		return outcome{allowed: true}
	}
	msg := err.Error()
	switch {
	case strings.Contains(msg, "ValidatingAdmissionPolicy"):
		return outcome{by: "policy", message: msg}
	case strings.Contains(msg, "admission webhook"):
		return outcome{by: "webhook", message: msg}
	case apierrors.IsForbidden(err):
		return outcome{by: "rbac", message: msg}
	case apierrors.IsInvalid(err):
		return outcome{by: "schema", message: msg}
	}
	return outcome{by: "error", message: msg}
}

// setUpMirrors creates each kind's non-authoritative copy as machina's sync would leave it:
// Machine API copies with authority ClusterAPI, Cluster API copies paused with the sync
// finalizer.
func setUpMirrors(t *testing.T, e *testenv.Env, kinds []matrixKind) {
	t.Helper()
	ctx := context.Background()
	// machina's name (exempt from the policies) with an administrator's rights: the sync
	// never creates Machine API MachineSets, so its roles do not allow it.
	cfg, err := e.Lab.UserConfig(lab.ManagerUser, "system:masters")
	if err != nil {
		t.Fatal(err)
	}
	machina, err := client.New(cfg, client.Options{Scheme: scheme.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range kinds {
		if err := machina.Create(ctx, k.create); err != nil {
			t.Fatalf("creating %s: %v", k.name, err)
		}
		if k.mirrorPause {
			continue
		}
		status := `{"status":{"authoritativeAPI":"ClusterAPI"}}`
		if k.gvk.Kind == "MachineHealthCheck" {
			continue // its authority is the annotation it was created with
		}
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(k.gvk)
		u.SetNamespace(k.ns)
		u.SetName(k.obj)
		if err := machina.Status().Patch(ctx, u, client.RawPatch(types.MergePatchType, []byte(status))); err != nil {
			t.Fatalf("making %s a mirror: %v", k.name, err)
		}
	}
}

// waitPoliciesActive waits until the CEL policies answer (they load a moment after the
// lab starts) and the webhook is registered.
func waitPoliciesActive(t *testing.T, e *testenv.Env, mapiMachineKind matrixKind) {
	t.Helper()
	e.Eventually(time.Minute, "policies and webhook answering", func(ctx context.Context) (bool, string, error) {
		vwc := &admissionregistrationv1.ValidatingWebhookConfiguration{}
		if err := e.Client.Get(ctx, client.ObjectKey{Name: authorityhook.ConfigurationName}, vwc); err != nil {
			return false, err.Error(), nil
		}
		got := send(ctx, e.Client, mapiMachineKind, wSpec)
		return got.by == "policy", got.String(), nil
	})
}

func mapiSet(name string) *machinev1beta1.MachineSet {
	sel := map[string]string{"machine.openshift.io/cluster-api-machineset": name}
	return &machinev1beta1.MachineSet{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: mapiNS,
		Labels: map[string]string{"machine.openshift.io/cluster-api-cluster": "lab"}},
		Spec: machinev1beta1.MachineSetSpec{AuthoritativeAPI: machinev1beta1.MachineAuthorityClusterAPI, Selector: metav1.LabelSelector{MatchLabels: sel},
			Template: machinev1beta1.MachineTemplateSpec{ObjectMeta: machinev1beta1.ObjectMeta{Labels: sel}}}}
}

func mapiMHC(name string) *machinev1beta1.MachineHealthCheck {
	return &machinev1beta1.MachineHealthCheck{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: mapiNS,
		Annotations: map[string]string{"machina.dev/authoritative-api": "ClusterAPI", "machina.dev/status-authoritative-api": "ClusterAPI"}},
		Spec: machinev1beta1.MachineHealthCheckSpec{Selector: metav1.LabelSelector{MatchLabels: map[string]string{"a": "b"}}}}
}

func capiSet(name string) client.Object {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "MachineSet",
		"metadata": map[string]any{"name": name, "namespace": capiNS},
		"spec": map[string]any{"clusterName": "lab", "replicas": int64(1),
			"selector": map[string]any{"matchLabels": map[string]any{"set": name}},
			"template": map[string]any{"metadata": map[string]any{"labels": map[string]any{"set": name}},
				"spec": map[string]any{"clusterName": "lab", "bootstrap": map[string]any{"dataSecretName": "worker-user-data"},
					"infrastructureRef": map[string]any{"apiGroup": "infrastructure.machina.dev", "kind": "SimMachineTemplate", "name": "cx-template"}}}}}}
	return u
}

func capiMHC(name string) client.Object {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "MachineHealthCheck",
		"metadata": map[string]any{"name": name, "namespace": capiNS},
		"spec":     map[string]any{"clusterName": "lab", "selector": map[string]any{"matchLabels": map[string]any{"a": "b"}}}}}
}

func simObject(gvk schema.GroupVersionKind, name string, spec map[string]any) client.Object {
	u := &unstructured.Unstructured{Object: map[string]any{"metadata": map[string]any{"name": name, "namespace": capiNS}, "spec": spec}}
	u.SetGroupVersionKind(gvk)
	// As the sync leaves an InfraMachine or template mirror: paused and marked with the
	// Machine API resource it belongs to (no sync finalizer: its owner carries the deletion).
	owner := "Machine/"
	if strings.HasSuffix(gvk.Kind, "Template") {
		owner = "MachineSet/"
	}
	u.SetAnnotations(map[string]string{"cluster.x-k8s.io/paused": "", "machina.dev/mirror-of": owner + name})
	return u
}

// capiMirror marks a Cluster API side object as the sync's paused mirror.
func capiMirror(o client.Object) client.Object {
	a := o.GetAnnotations()
	if a == nil {
		a = map[string]string{}
	}
	a["cluster.x-k8s.io/paused"] = ""
	o.SetAnnotations(a)
	o.SetFinalizers(append(o.GetFinalizers(), "sync.machine.openshift.io/finalizer"))
	return o
}
