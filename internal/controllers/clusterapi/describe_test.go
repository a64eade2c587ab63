package clusterapi_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/machina-dev/machina/internal/controllers/clusterapi/internal/capitest"
	"github.com/machina-dev/machina/internal/lab"
)

// testClusterctlDescribe runs the upstream `clusterctl describe cluster` (built from the
// pinned Cluster API module) against the lab: the Cluster and every Machine and SimMachine
// of a MachineSet and a MachineDeployment show a status, and the Cluster reports its
// v1beta2 conditions and worker counts.
func testClusterctlDescribe(t *testing.T) {
	e := env.For(t)
	ctx := context.Background()
	start := time.Now()
	clusterctl, err := lab.EnsureClusterctl(ctx, os.Stderr)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("clusterctl ready after %s", time.Since(start).Round(time.Second))

	capitest.NewTemplate(t, e, "describe", "s1.small")
	ms := capitest.MachineSet("describe-ms", 2, "describe")
	if err := e.Client.Create(ctx, ms); err != nil {
		t.Fatal(err)
	}
	mdLabels := map[string]string{"deployment": "describe-md"}
	md := &clusterv1.MachineDeployment{ObjectMeta: metav1.ObjectMeta{Name: "describe-md", Namespace: ns},
		Spec: clusterv1.MachineDeploymentSpec{ClusterName: "main", Replicas: ptr.To[int32](1),
			Selector: metav1.LabelSelector{MatchLabels: mdLabels},
			Template: clusterv1.MachineTemplateSpec{ObjectMeta: clusterv1.ObjectMeta{Labels: mdLabels},
				Spec: ms.Spec.Template.Spec}}}
	if err := e.Client.Create(ctx, md); err != nil {
		t.Fatal(err)
	}
	capitest.WaitRunning(t, e, ms, 2, 90*time.Second)
	cl := &clusterv1.Cluster{}
	e.Eventually(120*time.Second, "Cluster status settled", func(ctx context.Context) (bool, string, error) {
		if err := e.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "main"}, cl); err != nil {
			return false, err.Error(), nil
		}
		w := cl.Status.Workers
		if w == nil || w.ReadyReplicas == nil || w.UpToDateReplicas == nil || w.DesiredReplicas == nil {
			return false, conds(cl.Status.Conditions), nil
		}
		return *w.ReadyReplicas == *w.DesiredReplicas && *w.UpToDateReplicas == *w.DesiredReplicas &&
				isTrue(cl.Status.Conditions, clusterv1.ClusterAvailableCondition) &&
				isTrue(cl.Status.Conditions, clusterv1.ClusterWorkerMachinesUpToDateCondition),
			fmt.Sprintf("workers %+v %s", *w, conds(cl.Status.Conditions)), nil
	})
	for _, c := range []string{clusterv1.ClusterRemoteConnectionProbeCondition, clusterv1.ClusterWorkersAvailableCondition,
		clusterv1.ClusterWorkerMachinesReadyCondition, clusterv1.ClusterControlPlaneInitializedCondition, clusterv1.ClusterRemediatingCondition,
		clusterv1.ClusterRollingOutCondition, clusterv1.ClusterScalingUpCondition, clusterv1.ClusterScalingDownCondition} {
		if condition(cl.Status.Conditions, c) == "<none>" {
			t.Errorf("Cluster has no %s condition: %s", c, conds(cl.Status.Conditions))
		}
	}

	// With every condition listed, the Cluster's v1beta2 conditions are all there.
	all := runClusterctl(t, clusterctl, "describe", "cluster", "main", "--kubeconfig", e.Lab.KubeconfigPath, "-n", ns,
		"--show-conditions", "all", "--show-machinesets", "--echo", "--grouping=false")
	t.Logf("clusterctl describe cluster --show-conditions all:\n%s", all)
	for _, c := range []string{"Available", "RemoteConnectionProbe", "WorkersAvailable", "WorkerMachinesReady", "WorkerMachinesUpToDate",
		"ControlPlaneInitialized", "RollingOut", "ScalingUp", "ScalingDown", "Remediating"} {
		if !regexp.MustCompile(`─` + c + `\s+(True|False|Unknown)\s`).MatchString(all) {
			t.Errorf("clusterctl shows no %s condition", c)
		}
	}
	// In the summary view each object's line carries its status and counters.
	out := runClusterctl(t, clusterctl, "describe", "cluster", "main", "--kubeconfig", e.Lab.KubeconfigPath, "-n", ns,
		"--show-machinesets", "--echo", "--grouping=false")
	t.Logf("clusterctl describe cluster:\n%s", out)
	var list clusterv1.MachineList
	if err := e.Client.List(ctx, &list, client.InNamespace(ns), client.MatchingLabels{clusterv1.ClusterNameLabel: "main"}); err != nil {
		t.Fatal(err)
	}
	objects := []string{"Cluster " + ns + "/main"}
	for _, m := range list.Items {
		if m.DeletionTimestamp.IsZero() && m.Status.NodeRef.IsDefined() {
			objects = append(objects, "Machine "+ns+"/"+m.Name, "SimMachine "+ns+"/"+m.Name)
		}
	}
	status := regexp.MustCompile(`\s(True|False|Unknown)\s`)
	for _, obj := range objects {
		line := lineOf(out, obj)
		switch {
		case line == "":
			t.Errorf("clusterctl does not show %s", obj)
		case !status.MatchString(line + " "):
			t.Errorf("clusterctl shows no status for %s: %q", obj, line)
		case strings.HasPrefix(obj, "Machine ") && !regexp.MustCompile(`\s1\s+1\s+1\s+1\s+True\s`).MatchString(line+" "):
			t.Errorf("Machine should be 1 replica, 1 available, 1 ready, 1 up to date, Ready True: %q", line)
		}
	}
	if line := lineOf(out, "Cluster "+ns+"/main"); !regexp.MustCompile(`\s3/3\s+3\s+3\s+3\s+True\s`).MatchString(line + " ") {
		t.Errorf("Cluster should show 3/3 workers, 3 available, ready and up to date, and be Available: %q", line)
	}
	for _, o := range []client.Object{md, ms} {
		if err := e.Client.Delete(ctx, o); err != nil {
			t.Fatal(err)
		}
		waitGone(t, e, o, 120*time.Second)
	}
}

// runClusterctl runs clusterctl without version checks, with its configuration under a
// temporary directory.
func runClusterctl(t *testing.T, bin string, args ...string) string {
	t.Helper()
	home := t.TempDir()
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), "CLUSTERCTL_DISABLE_VERSIONCHECK=true", "HOME="+home, "XDG_CONFIG_HOME="+home, "NO_COLOR=1")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("clusterctl %s: %v\n%s%s", strings.Join(args, " "), err, stdout.String(), stderr.String())
	}
	return stdout.String()
}

// lineOf returns the first output line naming obj ("Kind namespace/name" as whole words).
func lineOf(out, obj string) string {
	re := regexp.MustCompile(`(^|[^\w])` + regexp.QuoteMeta(obj) + `($|[\s,])`)
	for _, l := range strings.Split(out, "\n") {
		if re.MatchString(l) {
			return l
		}
	}
	return ""
}
