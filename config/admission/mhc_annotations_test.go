package admission_test

import (
	"context"
	"strings"
	"testing"
	"time"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/machina-dev/machina/internal/lab"
	"github.com/machina-dev/machina/internal/lab/labtest"
)

// The MachineHealthCheck's authority annotations as an administrator and as machina see them:
// the request is the user's (with a checked value), the status-like ones are machina's.
func TestMachineHealthCheckAuthorityAnnotations(t *testing.T) {
	l := labtest.Shared(t)
	ctx := context.Background()
	admin := clientAs(t, l, "alice", nil, "system:masters")
	machina := clientAs(t, l, lab.ManagerUser, nil, "system:masters")
	check := func(name string, annotations map[string]string) *machinev1beta1.MachineHealthCheck {
		return &machinev1beta1.MachineHealthCheck{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", Annotations: annotations},
			Spec: machinev1beta1.MachineHealthCheckSpec{Selector: metav1.LabelSelector{MatchLabels: map[string]string{"pool": name}}}}
	}
	// Policies load a moment after the lab starts; wait for this one to answer.
	deadline := time.Now().Add(30 * time.Second)
	for admin.Create(ctx, check("probe", map[string]string{"machina.dev/authoritative-api": "x"}), client.DryRunAll) == nil {
		if time.Now().After(deadline) {
			t.Fatal("policy never became active")
		}
		time.Sleep(200 * time.Millisecond)
	}

	t.Run("RequestValueChecked", func(t *testing.T) {
		expectDenied(t, admin.Create(ctx, check("typo", map[string]string{"machina.dev/authoritative-api": "ClusterApi"})),
			`metadata.annotations[machina.dev/authoritative-api]: Unsupported value: "ClusterApi": supported values: "MachineAPI", "ClusterAPI"`)
	})
	t.Run("AdminCannotWriteStatusAnnotations", func(t *testing.T) {
		expectDenied(t, admin.Create(ctx, check("forged", map[string]string{"machina.dev/status-authoritative-api": "ClusterAPI"})),
			"metadata.annotations: Forbidden: machina.dev/status-authoritative-api record where the MachineHealthCheck stands and are written only by machina")
	})
	t.Run("MachinaWritesStatusAdminRequests", func(t *testing.T) {
		h := check("workers", map[string]string{"machina.dev/status-authoritative-api": "MachineAPI", "machina.dev/synchronized-generation": "1"})
		if err := machina.Create(ctx, h); err != nil {
			t.Fatalf("machina's identity must be allowed: %v", err)
		}
		x := &machinev1beta1.MachineHealthCheck{}
		if err := admin.Get(ctx, client.ObjectKeyFromObject(h), x); err != nil {
			t.Fatal(err)
		}
		x.Annotations["machina.dev/authoritative-api"] = "ClusterAPI"
		x.Annotations["team"] = "blue"
		if err := admin.Update(ctx, x); err != nil {
			t.Fatalf("requesting a migration was refused: %v", err)
		}
		x.Annotations["machina.dev/synchronized-generation"] = "7"
		expectDenied(t, admin.Update(ctx, x), "metadata.annotations: Forbidden: machina.dev/synchronized-generation record where")
		delete(x.Annotations, "machina.dev/synchronized-generation")
		x.Annotations["machina.dev/status-authoritative-api"] = "ClusterAPI"
		expectDenied(t, admin.Update(ctx, x), "machina.dev/status-authoritative-api, machina.dev/synchronized-generation record where")
	})
}

// Deleting the Machine API copy of a MachineHealthCheck the Cluster API owns is accepted with
// a warning: the sync lets go of the cluster.x-k8s.io check without deleting it. Deleting a
// check the Machine API owns, or one mid-handover (whose Cluster API copy the sync deletes),
// is not warned about.
func TestDeletingNonAuthoritativeMachineHealthCheckWarns(t *testing.T) {
	l := labtest.Shared(t)
	ctx := context.Background()
	w := &warnings{}
	admin := clientAs(t, l, "alice", w, "system:masters")
	machina := clientAs(t, l, lab.ManagerUser, nil, "system:masters")
	create := func(name, authority string) *machinev1beta1.MachineHealthCheck {
		h := &machinev1beta1.MachineHealthCheck{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default",
			Annotations: map[string]string{"machina.dev/status-authoritative-api": authority}},
			Spec: machinev1beta1.MachineHealthCheckSpec{Selector: metav1.LabelSelector{MatchLabels: map[string]string{"pool": name}}}}
		if err := machina.Create(ctx, h); err != nil {
			t.Fatal(err)
		}
		return h
	}
	want := "MachineHealthCheck capi-owned is a mirror of an authoritative Cluster API MachineHealthCheck: deleting it removes only " +
		"the Machine API copy; the sync releases the cluster.x-k8s.io MachineHealthCheck capi-owned without deleting it, and it " +
		"keeps checking and remediating its Machines"
	// Policies load a moment after the lab starts: dry runs until the warning comes.
	probe := create("capi-owned", "ClusterAPI")
	deadline := time.Now().Add(30 * time.Second)
	for {
		if err := admin.Delete(ctx, probe, client.DryRunAll); err != nil {
			t.Fatal(err)
		}
		if ws := w.take(); len(ws) == 1 && strings.HasSuffix(ws[0], want) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("warning policy never became active")
		}
		time.Sleep(200 * time.Millisecond)
	}
	if err := admin.Delete(ctx, probe); err != nil {
		t.Fatalf("the deletion must be accepted: %v", err)
	}
	if ws := w.take(); len(ws) != 1 || !strings.HasSuffix(ws[0], want) {
		t.Fatalf("warnings %q, want one ending %q", ws, want)
	}
	for _, authority := range []string{"MachineAPI", "Migrating"} {
		h := create(strings.ToLower(authority)+"-owned", authority)
		if err := admin.Delete(ctx, h); err != nil {
			t.Fatal(err)
		}
		if ws := w.take(); len(ws) != 0 {
			t.Errorf("deleting a %s check warned: %q", authority, ws)
		}
	}
}
