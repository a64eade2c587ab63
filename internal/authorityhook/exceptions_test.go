package authorityhook_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/machina-dev/machina/internal/scheme"
	"github.com/machina-dev/machina/internal/testenv"
)

// Controllers of each API, as they run beside machina in bridge mode (docs/install.md): a
// Cluster API infrastructure provider and OpenShift's Machine API controllers.
const (
	providerUser       = "system:serviceaccount:capi-provider-system:provider-manager"
	mapiControllerUser = "system:serviceaccount:openshift-machine-api:machine-api-controllers"
)

// A Paused condition as a paused controller reports it, in the Cluster API (metav1) and the
// Machine API formats, and another condition such a controller must not write on a mirror.
const (
	capiPausedStatus = `{"status":{"conditions":[{"type":"Paused","status":"True","reason":"Paused","message":"paused",` +
		`"lastTransitionTime":"2026-01-01T00:00:00Z"}]}}`
	capiReadyStatus = `{"status":{"conditions":[{"type":"Ready","status":"True","reason":"Ready","message":"ready",` +
		`"lastTransitionTime":"2026-01-01T00:00:00Z"}]}}`
	mapiPausedStatus = `{"status":{"lastUpdated":"2026-01-01T00:00:00Z","conditions":[{"type":"Paused","status":"True",` +
		`"reason":"AuthoritativeAPINotMachineAPI","lastTransitionTime":"2026-01-01T00:00:00Z"}]}}`
)

// checkMirrorExceptions checks what the rules still let others write on a mirror: a paused
// controller of the kind may report its Paused condition (with the Machine API's lastUpdated
// stamp) and nothing else of the status, and the cluster autoscaler may mark a mirrored
// Machine of either API for deletion (its scale-down does that before lowering replicas), with
// that API's key and no other reserved annotation.
func checkMirrorExceptions(t *testing.T, e *testenv.Env, ids map[string]client.Client, kinds []matrixKind) {
	t.Helper()
	ctx := context.Background()
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "matrix-controllers"},
		RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "matrix-machine-admin"},
		Subjects: []rbacv1.Subject{
			{Kind: rbacv1.ServiceAccountKind, Namespace: "capi-provider-system", Name: "provider-manager"},
			{Kind: rbacv1.ServiceAccountKind, Namespace: "openshift-machine-api", Name: "machine-api-controllers"}}}
	if err := e.Client.Create(ctx, binding); err != nil {
		t.Fatal(err)
	}
	provider, mapiController := serviceAccount(t, e, providerUser), serviceAccount(t, e, mapiControllerUser)
	kind := func(name string) matrixKind {
		for _, k := range kinds {
			if k.name == name {
				return k
			}
		}
		t.Fatalf("no matrix kind %s", name)
		return matrixKind{}
	}
	deleteMark := metaPatch("annotations", "cluster.x-k8s.io/delete-machine", "yes")
	mapiDeleteMark := metaPatch("annotations", "machine.openshift.io/delete-machine", "yes")
	const mapiMachineAnnotations = "metadata.annotations: Forbidden: annotations in the " + reservedDomains + " domains of Machine mx-machine"
	// machine-api-operator's paused MachineSet controller stamps the generation it saw with its
	// Paused condition; any other observedGeneration is the sync's to write.
	set := &machinev1beta1.MachineSet{}
	if err := e.Client.Get(ctx, client.ObjectKey{Namespace: kind("machine.openshift.io/MachineSet").ns, Name: "mx-set"}, set); err != nil {
		t.Fatal(err)
	}
	stamped := func(gen int64) string {
		return fmt.Sprintf(`{"status":{"observedGeneration":%d,"conditions":[{"type":"Paused","status":"True",`+
			`"reason":"AuthoritativeAPINotMachineAPI","lastTransitionTime":"2026-01-01T00:00:00Z"}]}}`, gen)
	}
	// machine-api-operator's Machine controller restates, with its Paused condition, the
	// Drainable and Terminable conditions the Machine's lifecycle hooks decide (mx-machine has
	// none: both True).
	hooked := func(drainable, terminable string) string {
		cond := func(typ, status string) string {
			return fmt.Sprintf(`{"type":%q,"status":%q,"lastTransitionTime":"2026-01-01T00:00:00Z"}`, typ, status)
		}
		return `{"status":{"lastUpdated":"2026-01-01T00:00:00Z","conditions":[{"type":"Paused","status":"True",` +
			`"reason":"AuthoritativeAPINotMachineAPI","lastTransitionTime":"2026-01-01T00:00:00Z"},` +
			cond("Drainable", drainable) + "," + cond("Terminable", terminable) + `]}}`
	}
	cases := []struct {
		what    string
		c       client.Client
		kind    string
		write   string
		patch   string
		message string // "" when allowed
	}{
		{"provider reports Paused on a SimMachine mirror", provider, "infrastructure.machina.dev/SimMachine", wStatus, capiPausedStatus, ""},
		{"provider reports Paused on a SimMachineTemplate mirror", provider, "infrastructure.machina.dev/SimMachineTemplate", wStatus, capiPausedStatus, ""},
		{"provider reports Ready on a SimMachine mirror", provider, "infrastructure.machina.dev/SimMachine", wStatus, capiReadyStatus,
			"status: Forbidden: SimMachine cx-simmachine is a paused mirror of an authoritative Machine API resource"},
		{"Cluster API controller reports Paused on a Machine mirror", provider, "cluster.x-k8s.io/Machine", wStatus, capiPausedStatus, ""},
		{"Machine API controller reports Paused on a Machine mirror", mapiController, "machine.openshift.io/Machine", wStatus, mapiPausedStatus, ""},
		{"Machine API controller sets the phase of a Machine mirror", mapiController, "machine.openshift.io/Machine", wStatus, `{"status":{"phase":"Running"}}`,
			"status: Forbidden: Machine mx-machine is a mirror: the Cluster API is authoritative (ClusterAPI)"},
		{"Machine API controller reports Paused on a Machine mirror with the lifecycle-hook conditions of its spec", mapiController,
			"machine.openshift.io/Machine", wStatus, hooked("True", "True"), ""},
		// A Machine handed over before machine-api-operator's Machine controller provisioned it
		// has no phase; that controller's paused write records the empty one it found.
		{"Machine API controller reports Paused with the empty phase of a Machine mirror that has none", mapiController,
			"machine.openshift.io/Machine", wStatus, strings.Replace(hooked("True", "True"), `{"status":{`, `{"status":{"phase":"",`, 1), ""},
		{"Machine API controller reports a Drainable condition a Machine mirror's spec does not give", mapiController,
			"machine.openshift.io/Machine", wStatus, hooked("False", "True"),
			"status: Forbidden: Machine mx-machine is a mirror: the Cluster API is authoritative (ClusterAPI)"},
		{"Machine API controller reports lifecycle-hook conditions on a MachineSet mirror", mapiController,
			"machine.openshift.io/MachineSet", wStatus, hooked("True", "True"),
			"status: Forbidden: MachineSet mx-set is a mirror: the Cluster API is authoritative (ClusterAPI)"},
		{"Machine API controller reports Paused on a MachineSet mirror, stamping its generation", mapiController, "machine.openshift.io/MachineSet", wStatus,
			stamped(set.Generation), ""},
		{"Machine API controller stamps another generation on a MachineSet mirror", mapiController, "machine.openshift.io/MachineSet", wStatus,
			stamped(set.Generation + 5), "status: Forbidden: MachineSet mx-set is a mirror: the Cluster API is authoritative (ClusterAPI)"},
		{"autoscaler marks a mirrored Machine for deletion", ids[idAutoscaler], "cluster.x-k8s.io/Machine", wAnno, deleteMark, ""},
		{"namespace admin marks a mirrored Machine for deletion", ids[idNSAdmin], "cluster.x-k8s.io/Machine", wAnno, deleteMark,
			"metadata.annotations: Forbidden: annotations in the " + reservedDomains + " domains of Machine cx-machine"},
		{"autoscaler marks a Machine API Machine mirror for deletion", ids[idAutoscaler], "machine.openshift.io/Machine", wAnno, mapiDeleteMark, ""},
		{"autoscaler marks a Machine API Machine mirror for deletion with the older key", ids[idAutoscaler], "machine.openshift.io/Machine", wAnno,
			metaPatch("annotations", "machine.openshift.io/cluster-api-delete-machine", "yes"), ""},
		{"namespace admin marks a Machine API Machine mirror for deletion", ids[idNSAdmin], "machine.openshift.io/Machine", wAnno, mapiDeleteMark,
			mapiMachineAnnotations},
		{"cluster admin marks a Machine API Machine mirror for deletion", ids[idAdmin], "machine.openshift.io/Machine", wAnno, mapiDeleteMark,
			mapiMachineAnnotations},
		{"autoscaler sets another openshift.io annotation on a Machine API Machine mirror", ids[idAutoscaler], "machine.openshift.io/Machine", wAnno,
			metaPatch("annotations", "machine.openshift.io/exclude-node-draining", ""), mapiMachineAnnotations},
		{"autoscaler puts the Cluster API key on a Machine API Machine mirror", ids[idAutoscaler], "machine.openshift.io/Machine", wAnno, deleteMark,
			mapiMachineAnnotations},
		{"autoscaler puts the Machine API key on a MachineSet mirror", ids[idAutoscaler], "machine.openshift.io/MachineSet", wAnno, mapiDeleteMark,
			"metadata.annotations: Forbidden: annotations in the " + reservedDomains + " domains of MachineSet mx-set"},
	}
	for _, tc := range cases {
		k := kind(tc.kind)
		k.patches = map[string]string{tc.write: tc.patch}
		checkPolicyOutcome(t, tc.what, send(ctx, tc.c, k, tc.write), tc.message)
	}
}

// checkPolicyOutcome checks one write's answer: allowed when message is "", else denied by
// an admission policy with message.
func checkPolicyOutcome(t *testing.T, what string, got outcome, message string) {
	t.Helper()
	switch {
	case message == "" && !got.allowed:
		t.Errorf("%s: %s; want allowed", what, got)
	case message != "" && (got.allowed || got.by != "policy" || !strings.Contains(got.message, message)):
		t.Errorf("%s: %s; want denied by policy: %s", what, got, message)
	default:
		t.Logf("%s: %s", what, got)
	}
}

func serviceAccount(t *testing.T, e *testenv.Env, user string) client.Client {
	t.Helper()
	ns := strings.Split(user, ":")[2]
	cfg, err := e.Lab.UserConfig(user, "system:serviceaccounts", "system:serviceaccounts:"+ns)
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	return c
}
