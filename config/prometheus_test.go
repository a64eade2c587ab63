package config_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/machina-dev/machina/config"
	"github.com/machina-dev/machina/internal/lab"
)

// rulesTestFile holds promtool's unit tests of the shipped alerts.
const rulesTestFile = "testdata/prometheus_rules_test.yaml"

// prometheusRule is the one PrometheusRule config/prometheus renders.
func prometheusRule(t *testing.T) *unstructured.Unstructured {
	t.Helper()
	var rules []*unstructured.Unstructured
	for _, o := range renderDir(t, "prometheus") {
		if o.GetKind() == "PrometheusRule" {
			rules = append(rules, o)
		}
	}
	if len(rules) != 1 {
		t.Fatalf("config/prometheus renders %d PrometheusRules, want 1", len(rules))
	}
	if rules[0].GetAPIVersion() != "monitoring.coreos.com/v1" || rules[0].GetNamespace() != config.Namespace {
		t.Errorf("PrometheusRule %s is %s in %q, want monitoring.coreos.com/v1 in %s",
			rules[0].GetName(), rules[0].GetAPIVersion(), rules[0].GetNamespace(), config.Namespace)
	}
	return rules[0]
}

// alertRules are the rules of the PrometheusRule's groups, in order: the maps of rule itself,
// so that a change to one changes rule.
func alertRules(t *testing.T, rule *unstructured.Unstructured) []map[string]any {
	t.Helper()
	spec, _ := rule.Object["spec"].(map[string]any)
	groups, _ := spec["groups"].([]any)
	if len(groups) == 0 {
		t.Fatalf("PrometheusRule %s has no spec.groups", rule.GetName())
	}
	var out []map[string]any
	for _, g := range groups {
		group, _ := g.(map[string]any)
		rules, _ := group["rules"].([]any)
		for _, r := range rules {
			if m, ok := r.(map[string]any); ok {
				out = append(out, m)
			}
		}
	}
	return out
}

func alertNames(t *testing.T, rule *unstructured.Unstructured) []string {
	t.Helper()
	var names []string
	for _, r := range alertRules(t, rule) {
		if name, _ := r["alert"].(string); name != "" {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	return names
}

// The alerts are machina's contract with an operator's on-call: the ones docs/metrics.md
// promises are shipped, the doc names every shipped one, and each has a promtool test that
// expects it to fire.
func TestPrometheusRuleAlertsDocumentedAndTested(t *testing.T) {
	shipped := alertNames(t, prometheusRule(t))
	for _, want := range []string{"MachinaBothSidesActive", "MachinaMigrationStuck", "MachinaNotSynchronized",
		"MachinaReconcileErrors", "MachinaCloudErrors", "MachinaAWSThrottled", "MachinaMachinesFailed"} {
		if !slices.Contains(shipped, want) {
			t.Errorf("config/prometheus ships no alert %s (it has %v)", want, shipped)
		}
	}
	doc, err := os.ReadFile("../docs/metrics.md")
	if err != nil {
		t.Fatal(err)
	}
	documented := regexp.MustCompile("\\| `(Machina\\w+)` \\|").FindAllStringSubmatch(string(doc), -1)
	var docNames []string
	for _, m := range documented {
		docNames = append(docNames, m[1])
	}
	slices.Sort(docNames)
	if !slices.Equal(docNames, shipped) {
		t.Errorf("docs/metrics.md's alert table names %v, config/prometheus ships %v", docNames, shipped)
	}
	if fired := firingTests(t); !slices.Equal(fired, shipped) {
		t.Errorf("%s expects %v to fire, config/prometheus ships %v: every alert needs a test that fires it", rulesTestFile, fired, shipped)
	}
}

// firingTests are the alerts the promtool tests expect to fire at least once, sorted.
func firingTests(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile(rulesTestFile)
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Tests []struct {
			AlertRuleTest []struct {
				Alertname string           `json:"alertname"`
				ExpAlerts []map[string]any `json:"exp_alerts"`
			} `json:"alert_rule_test"`
		} `json:"tests"`
	}
	if err := yaml.Unmarshal(b, &f); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tc := range f.Tests {
		for _, a := range tc.AlertRuleTest {
			if len(a.ExpAlerts) > 0 && !slices.Contains(names, a.Alertname) {
				names = append(names, a.Alertname)
			}
		}
	}
	slices.Sort(names)
	return names
}

// The shipped rules pass `promtool check rules` and `promtool test rules` of the pinned
// Prometheus: each alert fires on the series it is for, after its `for:`, and not on the
// healthy, brief or foreign series beside them. A rule without its `for:` fails the tests,
// so they do test the rules.
func TestPrometheusRuleWithPromtool(t *testing.T) {
	if testing.Short() {
		t.Skip("may build promtool from source")
	}
	promtool, err := lab.EnsurePromtool(context.Background(), t.Output())
	if err != nil {
		t.Fatalf("building promtool: %v", err)
	}
	rule := prometheusRule(t)
	dir := t.TempDir()
	writeRules(t, dir, rule)
	if out, err := runPromtool(promtool, dir, "check", "rules", "rules.yaml"); err != nil {
		t.Fatalf("promtool check rules: %v\n%s", err, out)
	}
	if out, err := runPromtool(promtool, dir, "test", "rules", "rules_test.yaml"); err != nil {
		t.Fatalf("promtool test rules: %v\n%s", err, out)
	}

	hasty := rule.DeepCopy()
	for _, r := range alertRules(t, hasty) {
		if r["alert"] == "MachinaBothSidesActive" {
			delete(r, "for")
		}
	}
	writeRules(t, dir, hasty)
	out, err := runPromtool(promtool, dir, "test", "rules", "rules_test.yaml")
	if err == nil || !strings.Contains(out, "MachinaBothSidesActive") {
		t.Errorf("MachinaBothSidesActive without its for: still passed promtool test rules (%v)\n%s", err, out)
	}
}

// writeRules writes the PrometheusRule's spec (the rule file promtool reads: its groups) to
// dir/rules.yaml, and the unit tests beside it.
func writeRules(t *testing.T, dir string, rule *unstructured.Unstructured) {
	t.Helper()
	spec, err := yaml.Marshal(rule.Object["spec"])
	if err != nil {
		t.Fatal(err)
	}
	tests, err := os.ReadFile(rulesTestFile)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "rules.yaml"), spec, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "rules_test.yaml"), tests, 0o600); err != nil {
		t.Fatal(err)
	}
}

func runPromtool(promtool, dir string, args ...string) (string, error) {
	cmd := exec.Command(promtool, args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	return string(out), err
}
