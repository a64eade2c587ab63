package authorityhook_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/machina-dev/machina/internal/testenv"
)

// checkAuthorityConditions proves the machina-authority-conditions policy on a Machine the
// Machine API is authoritative for (no mirror, so the mirror rules do not apply): its
// controller, machine-api-operator's, writes the status as it likes except for machina's two
// conditions, which its write must carry over as they are. Its writes hold its whole cached
// conditions list in a merge patch without a resourceVersion; the denied cases are such a
// write made from a copy read before machina's last change.
func checkAuthorityConditions(t *testing.T, e *testenv.Env, ids map[string]client.Client) {
	t.Helper()
	ctx := context.Background()
	m := mapiMachine("cond-machine", machinev1beta1.MachineAuthorityMachineAPI)
	machina := ids[idManager]
	if err := machina.Create(ctx, m); err != nil {
		t.Fatal(err)
	}
	cond := func(typ, status, reason string) string {
		return fmt.Sprintf(`{"type":%q,"status":%q,"reason":%q,"lastTransitionTime":"2026-01-01T00:00:00Z"}`, typ, status, reason)
	}
	synced := cond("Synchronized", "True", "Synchronized")
	rolledBack := cond("AuthorityMigration", "True", "RolledBack")
	started := cond("AuthorityMigration", "False", "Started")
	notPaused := cond("Paused", "False", "AuthoritativeAPIMachineAPI")
	status := func(conds ...string) string {
		return `{"status":{"lastUpdated":"2026-01-01T00:00:00Z","conditions":[` + strings.Join(conds, ",") + `]}}`
	}
	if err := machina.Status().Patch(ctx, m, client.RawPatch(types.MergePatchType,
		[]byte(`{"status":{"authoritativeAPI":"MachineAPI","conditions":[`+synced+","+rolledBack+`]}}`))); err != nil {
		t.Fatal(err)
	}
	mapiController := serviceAccount(t, e, mapiControllerUser)
	const denied = "status.conditions: Forbidden: Machine cond-machine: "
	cases := []struct {
		what    string
		c       client.Client
		patch   string
		message string // "" when allowed
	}{
		{"Machine API controller reports Paused, carrying machina's conditions over", mapiController,
			status(synced, rolledBack, notPaused), ""},
		{"Machine API controller writes the phase alone", mapiController, `{"status":{"phase":"Running"}}`, ""},
		{"Machine API controller puts back the AuthorityMigration condition it read before the rollback", mapiController,
			status(synced, started, notPaused), denied + "AuthorityMigration is a condition only the machina sync and migration controllers write"},
		{"Machine API controller drops both of machina's conditions", mapiController,
			status(notPaused), denied + "Synchronized and AuthorityMigration are conditions"},
		{"cluster admin changes the Synchronized condition", ids[idAdmin],
			status(cond("Synchronized", "False", "ConversionFailed"), rolledBack), denied + "Synchronized is a condition"},
		{"machina's migration controller starts a migration", machina, status(synced, started), ""},
	}
	for _, tc := range cases {
		got := classify(tc.c.Status().Patch(ctx, m.DeepCopy(), client.RawPatch(types.MergePatchType, []byte(tc.patch)), client.DryRunAll))
		checkPolicyOutcome(t, tc.what, got, tc.message)
	}
}
