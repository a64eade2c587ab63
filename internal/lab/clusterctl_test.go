package lab

import (
	"context"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"testing"
)

// The clusterctl the tests build must be the Cluster API release machina's go.mod pins, and
// its embedded module must pin that release too.
func TestClusterctlVersionMatchesGoMod(t *testing.T) {
	mainMod, err := os.ReadFile("../../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	re := regexp.MustCompile(`(?m)^\s*(?:require\s+)?sigs\.k8s\.io/cluster-api (v\S+)`)
	for name, mod := range map[string][]byte{"go.mod": mainMod, "clusterapimod/go.mod.txt": clusterAPIGoMod} {
		m := re.FindSubmatch(mod)
		if m == nil {
			t.Fatalf("%s does not require sigs.k8s.io/cluster-api", name)
		}
		if string(m[1]) != ClusterctlVersion {
			t.Errorf("%s pins sigs.k8s.io/cluster-api %s, ClusterctlVersion is %s", name, m[1], ClusterctlVersion)
		}
	}
}

// Concurrent callers get one clusterctl (built once, on a fresh machine, under the lock)
// that reports the pinned version.
func TestEnsureClusterctlBuildsPinnedVersion(t *testing.T) {
	if testing.Short() {
		t.Skip("may build clusterctl from source")
	}
	var wg sync.WaitGroup
	paths := make([]string, 2)
	errs := make([]error, 2)
	for i := range paths {
		wg.Go(func() { paths[i], errs[i] = EnsureClusterctl(context.Background(), t.Output()) })
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if paths[0] != paths[1] {
		t.Fatalf("two callers got two binaries: %s, %s", paths[0], paths[1])
	}
	cmd := exec.Command(paths[0], "version", "-o", "short")
	cmd.Env = append(os.Environ(), "CLUSTERCTL_DISABLE_VERSIONCHECK=true", "HOME="+t.TempDir())
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("clusterctl version: %v\n%s", err, out)
	}
	if got := strings.TrimSpace(string(out)); got != ClusterctlVersion {
		t.Errorf("clusterctl version -o short = %q, want %s", got, ClusterctlVersion)
	}
}
