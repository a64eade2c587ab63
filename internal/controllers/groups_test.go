package controllers_test

import (
	"testing"

	"github.com/machina-dev/machina/internal/controllers"
	"github.com/machina-dev/machina/internal/opsmetrics"
)

// The list is well formed: unique names that --controllers can select, each with a
// description for --help and a Setup; only the operator metrics always run.
func TestGroups(t *testing.T) {
	seen := map[string]bool{}
	for _, g := range controllers.Groups() {
		if g.Name == "" || g.Description == "" || g.Setup == nil {
			t.Errorf("group %q: description %q, setup set %v", g.Name, g.Description, g.Setup != nil)
		}
		if seen[g.Name] {
			t.Errorf("group %q listed twice", g.Name)
		}
		seen[g.Name] = true
		if g.Always != (g.Name == opsmetrics.GroupName) {
			t.Errorf("group %q: Always %v", g.Name, g.Always)
		}
	}
	for _, name := range []string{"machineapi", "clusterapi", "sim", "aws", "autoscaling", "sync", "migration", "admission", "opsmetrics"} {
		if !seen[name] {
			t.Errorf("group %q is missing", name)
		}
	}
	groups, err := controllers.Select("sync,migration")
	if err != nil || len(groups) != 3 {
		t.Fatalf("Select(sync,migration) = %d groups, %v; want sync, migration and opsmetrics", len(groups), err)
	}
}
