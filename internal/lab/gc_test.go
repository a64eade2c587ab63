package lab_test

import (
	"context"
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
	"testing"

	"k8s.io/client-go/kubernetes"
)

// checkAPIServerGC reads the kube-apiserver's garbage collector setting from its own
// metrics and compares it with what the lab should have given it: its GOGC=400 below a
// 1-GiB soft limit, or with goDefaults Go's (100, no limit). A GOGC or GOMEMLIMIT in the
// test's environment reaches the API server instead, as the lab promises.
func checkAPIServerGC(ctx context.Context, t *testing.T, admin *kubernetes.Clientset, goDefaults bool) {
	t.Helper()
	gogc, limit := 400.0, float64(1<<30)
	if goDefaults {
		gogc, limit = 100, math.MaxInt64
	}
	if env := os.Getenv("GOGC"); env != "" || os.Getenv("GOMEMLIMIT") != "" {
		t.Logf("GOGC=%q GOMEMLIMIT=%q in the environment: the API server's setting is not the lab's to check", env, os.Getenv("GOMEMLIMIT"))
		return
	}
	raw, err := admin.RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		t.Fatalf("reading the API server's metrics: %v", err)
	}
	got := map[string]float64{}
	for line := range strings.SplitSeq(string(raw), "\n") {
		name, value, ok := strings.Cut(line, " ")
		if ok && (name == "go_gc_gogc_percent" || name == "go_gc_gomemlimit_bytes") {
			if got[name], err = strconv.ParseFloat(value, 64); err != nil {
				t.Fatalf("metric %s: %v", name, err)
			}
		}
	}
	want := map[string]float64{"go_gc_gogc_percent": gogc, "go_gc_gomemlimit_bytes": limit}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("the API server's collector: %v, want %v", got, want)
	}
}
