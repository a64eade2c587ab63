package cli

import (
	"context"
	"strings"
	"testing"
	"time"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/machina-dev/machina/internal/authority"
	"github.com/machina-dev/machina/internal/gate"
	"github.com/machina-dev/machina/internal/mapicond"
	"github.com/machina-dev/machina/internal/testenv"
)

func TestMigrateTargets(t *testing.T) {
	got, err := parseTargets([]string{"mhc/a", "machinehealthchecks/b", "MachineHealthCheck/c", "ms/d", "machine/e"})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"MachineHealthCheck/a", "MachineHealthCheck/b", "MachineHealthCheck/c", "MachineSet/d", "Machine/e"}
	for i, tg := range got {
		if tg.kind+"/"+tg.name != want[i] {
			t.Errorf("target %d: %s/%s, want %s", i, tg.kind, tg.name, want[i])
		}
	}
	if _, err := parseTargets([]string{"node/x"}); err == nil || !strings.Contains(err.Error(), "want machine, machineset or machinehealthcheck") {
		t.Errorf("unknown kind: %v", err)
	}
	if _, err := parseTargets([]string{"mhc"}); err == nil || !strings.Contains(err.Error(), "want KIND/NAME") {
		t.Errorf("missing name: %v", err)
	}
}

// Flags that cannot go together, or values out of range, exit 2 naming the flag.
func TestMigrateBadFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"ms/a"}, "--to"},
		{[]string{"ms/a", "--to", "Elsewhere"}, "--to"},
		{[]string{"--to", "ClusterAPI"}, "name at least one resource"},
		{[]string{"ms/a", "--all", "--to", "ClusterAPI"}, "not both"},
		{[]string{"-l", "a=b", "--with-machines", "--to", "ClusterAPI"}, "--with-machines"},
		{[]string{"--all", "--max-in-flight", "0", "--to", "ClusterAPI"}, "--max-in-flight"},
		{[]string{"--all", "--timeout", "0s", "--to", "ClusterAPI"}, "--timeout"},
	} {
		_, errOut, code := runCommand(t, newMigrateCommand, append(tc.args, "--kubeconfig=/nonexistent")...)
		if code != migrateExitBadInput || !strings.Contains(errOut, tc.want) {
			t.Errorf("%v: exit %d, %q; want %d naming %q", tc.args, code, errOut, migrateExitBadInput, tc.want)
		}
	}
}

// TestMigrateMachineHealthCheckCommand moves a MachineHealthCheck to the Cluster API and back
// with `machina migrate --wait` against a lab, and shows a check that cannot convert failing
// with the reason.
func TestMigrateMachineHealthCheckCommand(t *testing.T) {
	e := testenv.Start(t, testenv.Options{Groups: "machineapi,sync,migration,clusterapi,sim"})
	cl := e.SeedCluster("lab")
	ctx := context.Background()
	check := func(name string) *machinev1beta1.MachineHealthCheck {
		return &machinev1beta1.MachineHealthCheck{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: cl.MachineAPINamespace},
			Spec: machinev1beta1.MachineHealthCheckSpec{Selector: metav1.LabelSelector{MatchLabels: map[string]string{"pool": name}},
				UnhealthyConditions: []machinev1beta1.UnhealthyCondition{
					{Type: corev1.NodeReady, Status: corev1.ConditionFalse, Timeout: metav1.Duration{Duration: time.Minute}}}}}
	}
	if err := e.Client.Create(ctx, check("cli-check")); err != nil {
		t.Fatal(err)
	}
	e.Eventually(60*time.Second, "cli-check synchronised", func(ctx context.Context) (bool, string, error) {
		m := &machinev1beta1.MachineHealthCheck{}
		if err := e.Client.Get(ctx, client.ObjectKey{Namespace: cl.MachineAPINamespace, Name: "cli-check"}, m); err != nil {
			return false, err.Error(), nil
		}
		return mapicond.IsTrue(m.Status.Conditions, authority.SynchronizedCondition) &&
			m.Annotations[authority.MHCSynchronizedGenerationAnnotation] != "", "", nil
	})
	kc := "--kubeconfig=" + e.Lab.KubeconfigPath
	capiPaused := func() bool {
		c := &clusterv1.MachineHealthCheck{}
		if err := e.Client.Get(ctx, client.ObjectKey{Namespace: cl.ClusterAPINamespace, Name: "cli-check"}, c); err != nil {
			t.Fatal(err)
		}
		return gate.HasPausedAnnotation(c)
	}
	for _, to := range []string{"ClusterAPI", "MachineAPI"} {
		out, errOut, code := runCommand(t, newMigrateCommand, kc, "mhc/cli-check", "--to", to, "--wait", "--timeout", "2m")
		t.Logf("machina migrate mhc/cli-check --to %s --wait:\n%s%s", to, out, errOut)
		if code != 0 {
			t.Fatalf("exit %d", code)
		}
		for _, want := range []string{"machinehealthcheck/cli-check: requested", "machinehealthcheck/cli-check: done",
			"all 1 resource(s) are " + to + "-authoritative"} {
			if !strings.Contains(out, want) {
				t.Errorf("output lacks %q", want)
			}
		}
		if paused := capiPaused(); paused != (to == "MachineAPI") {
			t.Errorf("after the move to %s the Cluster API copy's paused annotation is %v", to, paused)
		}
	}

	bad := check("cli-unmovable")
	bad.Spec.RemediationTemplate = &corev1.ObjectReference{APIVersion: "remediation.example.com/v1", Kind: "RebootTemplate", Name: "r", Namespace: "elsewhere"}
	if err := e.Client.Create(ctx, bad); err != nil {
		t.Fatal(err)
	}
	e.Eventually(60*time.Second, "cli-unmovable decided", func(ctx context.Context) (bool, string, error) {
		m := &machinev1beta1.MachineHealthCheck{}
		if err := e.Client.Get(ctx, client.ObjectKeyFromObject(bad), m); err != nil {
			return false, err.Error(), nil
		}
		c := mapicond.Get(m.Status.Conditions, authority.SynchronizedCondition)
		return c != nil && c.Status == corev1.ConditionFalse, "", nil
	})
	_, errOut, code := runCommand(t, newMigrateCommand, kc, "machinehealthcheck/cli-unmovable", "--to", "ClusterAPI", "--wait", "--timeout", "1m")
	if code != 1 || !strings.Contains(errOut, "machinehealthcheck/cli-unmovable failed: cannot migrate to ClusterAPI") ||
		!strings.Contains(errOut, "spec.remediationTemplate.namespace") {
		t.Fatalf("unconvertible check: exit %d, want 1 with the reason: %s", code, errOut)
	}
}
