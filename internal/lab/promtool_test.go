package lab

import (
	"context"
	"os/exec"
	"regexp"
	"strings"
	"testing"
)

// The embedded module must require the Prometheus release the lab says it builds, name
// promtool as its only tool (so `make prometheus-mod` keeps its dependencies and nothing
// else), and hold the module's own checksum, or the build would ask the checksum database.
func TestPrometheusModulePinsVersion(t *testing.T) {
	var pinned string
	if m := regexp.MustCompile(`(?m)^\s*(?:require\s+)?` + regexp.QuoteMeta(prometheusModule) + ` (v\S+)`).FindSubmatch(prometheusGoMod); m != nil {
		pinned = string(m[1])
	}
	if pinned != PrometheusVersion {
		t.Errorf("prometheusmod/go.mod.txt requires %s %q, the lab builds PrometheusVersion %s", prometheusModule, pinned, PrometheusVersion)
	}
	if got, want := maoTools(prometheusGoMod), []string{prometheusModule + "/cmd/promtool"}; strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("prometheusmod/go.mod.txt names tools %v, want %v", got, want)
	}
	if !regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(prometheusModule+" "+PrometheusVersion) + ` h1:`).Match(prometheusGoSum) {
		t.Errorf("prometheusmod/go.sum.txt lacks %s %s", prometheusModule, PrometheusVersion)
	}
}

func TestPrometheusRelease(t *testing.T) {
	for module, want := range map[string]string{"v0.316.0": "3.16.0", "v0.305.2": "3.5.2", "v0.300.1": "3.0.1", "v0.310.0": "3.10.0"} {
		if got := prometheusRelease(module); got != want {
			t.Errorf("prometheusRelease(%s) = %s, want %s", module, got, want)
		}
	}
}

// The promtool built from the pinned module reports the pinned release.
func TestEnsurePromtoolBuildsPinnedVersion(t *testing.T) {
	if testing.Short() {
		t.Skip("may build promtool from source")
	}
	bin, err := EnsurePromtool(context.Background(), t.Output())
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(bin, "--version").CombinedOutput()
	if err != nil {
		t.Fatalf("promtool --version: %v\n%s", err, out)
	}
	if want := "promtool, version " + PrometheusRelease(); !strings.Contains(string(out), want) {
		t.Errorf("promtool --version says %q, want %q", out, want)
	}
}
