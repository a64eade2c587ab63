package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/machina-dev/machina/internal/authority"
	"github.com/machina-dev/machina/internal/demo"
	"github.com/machina-dev/machina/internal/mapicond"
	"github.com/machina-dev/machina/internal/testenv"
)

// runCommand runs a command built by newCmd in-process, returning stdout, stderr and the exit
// code Execute would return.
func runCommand(t *testing.T, newCmd func() *cobra.Command, args ...string) (string, string, int) {
	t.Helper()
	return runCommandIn(t, newCmd, "", args...)
}

// runCommandIn is runCommand with stdin.
func runCommandIn(t *testing.T, newCmd func() *cobra.Command, stdin string, args ...string) (string, string, int) {
	t.Helper()
	cmd := newCmd()
	cmd.SetIn(strings.NewReader(stdin))
	cmd.SilenceErrors, cmd.SilenceUsage = true, true
	var out, errOut bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&errOut)
	cmd.SetArgs(args)
	cmd.SetContext(context.Background())
	err := cmd.Execute()
	code := 0
	if err != nil {
		code = 1
		var ee *ExitError
		if errors.As(err, &ee) {
			code = ee.Code
		}
		errOut.WriteString("Error: " + err.Error() + "\n")
	}
	return out.String(), errOut.String(), code
}

func wantAll(t *testing.T, what, text string, want ...string) {
	t.Helper()
	for _, w := range want {
		if !strings.Contains(text, w) {
			t.Errorf("%s lacks %q:\n%s", what, w, text)
		}
	}
}

func TestPlanFiles(t *testing.T) {
	t.Run("convertible", func(t *testing.T) {
		out, errOut, code := runCommand(t, newPlanCommand, "-f", docTestdata+"aws/worker.yaml", "--infrastructure", docTestdata+"aws/context.yaml")
		if code != 0 {
			t.Fatalf("exit %d, want 0\n%s%s", code, out, errOut)
		}
		wantAll(t, "plan", out, "KIND", "TO ClusterAPI", "MachineSet", "ci-op-7x2kq-abcde-worker-us-east-1a", "ready",
			"offline: conversion checked only", "1 ready, 0 blocked")
	})
	t.Run("blocked fields are named with their paths", func(t *testing.T) {
		out, errOut, code := runCommand(t, newPlanCommand, "-f", docTestdata+"aws/unconvertible.yaml", "--infrastructure", docTestdata+"aws/context.yaml")
		if code != planExitBlocked {
			t.Fatalf("exit %d, want %d\n%s%s", code, planExitBlocked, out, errOut)
		}
		wantAll(t, "plan", out, "blocked",
			`blocks: spec.template.spec.providerSpec.value.placement.region: Invalid value: "us-west-2"`,
			`blocks: spec.deletePolicy: Unsupported value: "Smallest"`, "0 ready, 1 blocked")
		wantAll(t, "stderr", errOut, "1 of 1 resource(s) cannot migrate to ClusterAPI yet")
	})
	t.Run("bad input", func(t *testing.T) {
		_, errOut, code := runCommand(t, newPlanCommand, "-f", "testdata/convert/bad-yaml.yaml")
		if code != planExitBadInput {
			t.Fatalf("exit %d, want %d: %s", code, planExitBadInput, errOut)
		}
		_, errOut, code = runCommand(t, newPlanCommand, "--to", "Elsewhere")
		if code != planExitBadInput || !strings.Contains(errOut, `--to "Elsewhere"`) {
			t.Fatalf("exit %d, want %d naming --to: %s", code, planExitBadInput, errOut)
		}
	})
}

// TestPlanAndBlockedMigration runs plan, migrate and describe against a lab: a MachineSet
// whose providerSpec names another region cannot convert, so plan lists it as blocked with
// the field's path, a migration request for it stays pending with the reason in describe,
// and migrate --wait fails with that reason while the convertible MachineSets are ready.
func TestPlanAndBlockedMigration(t *testing.T) {
	e := testenv.Start(t, testenv.Options{Groups: "machineapi,sync,migration,clusterapi,sim"})
	ctx := context.Background()
	cl := e.SeedCluster("lab")
	if err := demo.EnsureWorkload(ctx, e.Client, cl); err != nil {
		t.Fatal(err)
	}
	good := &machinev1beta1.MachineSet{}
	if err := e.Client.Get(ctx, client.ObjectKey{Namespace: cl.MachineAPINamespace, Name: "lab-worker-a"}, good); err != nil {
		t.Fatal(err)
	}
	bad := &machinev1beta1.MachineSet{ObjectMeta: metav1.ObjectMeta{Name: "lab-elsewhere", Namespace: cl.MachineAPINamespace, Labels: good.Labels},
		Spec: *good.Spec.DeepCopy()}
	bad.Spec.Replicas = ptr.To[int32](0)
	var ps map[string]any
	if err := json.Unmarshal(good.Spec.Template.Spec.ProviderSpec.Value.Raw, &ps); err != nil {
		t.Fatal(err)
	}
	ps["region"], ps["zone"] = "sim-west-1", "sim-west-1a"
	raw, _ := json.Marshal(ps)
	bad.Spec.Template.Spec.ProviderSpec.Value.Raw = raw
	bad.Spec.Selector.MatchLabels["machine.openshift.io/cluster-api-machineset"] = bad.Name
	bad.Spec.Template.Labels["machine.openshift.io/cluster-api-machineset"] = bad.Name
	if err := e.Client.Create(ctx, bad); err != nil {
		t.Fatal(err)
	}

	// Wait until the sync has had its say on every MachineSet and Machine.
	e.Eventually(2*time.Minute, "every Machine API resource has a Synchronized condition, the demo's True", func(ctx context.Context) (bool, string, error) {
		var sets machinev1beta1.MachineSetList
		var machines machinev1beta1.MachineList
		if err := e.Client.List(ctx, &sets, client.InNamespace(cl.MachineAPINamespace)); err != nil {
			return false, "", err
		}
		if err := e.Client.List(ctx, &machines, client.InNamespace(cl.MachineAPINamespace)); err != nil {
			return false, "", err
		}
		if len(machines.Items) != 4 {
			return false, fmt.Sprintf("%d Machines", len(machines.Items)), nil
		}
		for _, ms := range sets.Items {
			c := mapicond.Get(ms.Status.Conditions, authority.SynchronizedCondition)
			if c == nil || (ms.Name != bad.Name && (c.Status != corev1.ConditionTrue || ms.Status.SynchronizedGeneration != ms.Generation)) {
				return false, "MachineSet " + ms.Name + " not synchronised", nil
			}
		}
		for _, m := range machines.Items {
			c := mapicond.Get(m.Status.Conditions, authority.SynchronizedCondition)
			if c == nil || c.Status != corev1.ConditionTrue || m.Status.SynchronizedGeneration != m.Generation {
				return false, "Machine " + m.Name + " not synchronised", nil
			}
		}
		mhc := &machinev1beta1.MachineHealthCheck{}
		if err := e.Client.Get(ctx, client.ObjectKey{Namespace: cl.MachineAPINamespace, Name: "lab-workers"}, mhc); err != nil {
			return false, "", err
		}
		if c := mapicond.Get(mhc.Status.Conditions, authority.SynchronizedCondition); c == nil || c.Status != corev1.ConditionTrue {
			return false, "MachineHealthCheck not synchronised", nil
		}
		return true, "", nil
	})

	kc := "--kubeconfig=" + e.Lab.KubeconfigPath
	out, errOut, code := runCommand(t, newPlanCommand, kc)
	if code != planExitBlocked {
		t.Fatalf("plan: exit %d, want %d\n%s%s", code, planExitBlocked, out, errOut)
	}
	t.Logf("machina plan:\n%s", out)
	wantAll(t, "plan", out, "AUTHORITY", "TO ClusterAPI", "MachineHealthCheck", "lab-workers",
		"MachineSet lab-elsewhere:", "blocks: spec.template.spec.providerSpec.value.region",
		"7 ready, 1 blocked, 0 already ClusterAPI-authoritative")
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) == 4 && f[0] == "MachineSet" && f[1] == "lab-worker-a" && f[3] != "ready" {
			t.Errorf("lab-worker-a should be ready: %q", line)
		}
	}

	// The blocked request stays pending; describe says why; migrate --wait fails with the reason.
	if _, errOut, code := runCommand(t, newMigrateCommand, kc, "machineset/lab-elsewhere", "--to", "ClusterAPI"); code != 0 {
		t.Fatalf("migrate (no wait): exit %d: %s", code, errOut)
	}
	_, errOut, code = runCommand(t, newMigrateCommand, kc, "machineset/lab-elsewhere", "--to", "ClusterAPI", "--wait", "--timeout", "1m")
	if code != 1 {
		t.Fatalf("migrate --wait of an unconvertible MachineSet: exit %d, want 1: %s", code, errOut)
	}
	wantAll(t, "migrate --wait", errOut, "machineset/lab-elsewhere failed: cannot migrate to ClusterAPI", "spec.template.spec.providerSpec.value.region")
	got := &machinev1beta1.MachineSet{}
	if err := e.Client.Get(ctx, client.ObjectKeyFromObject(bad), got); err != nil {
		t.Fatal(err)
	}
	if got.Status.AuthoritativeAPI != machinev1beta1.MachineAuthorityMachineAPI {
		t.Fatalf("blocked MachineSet's authority is %q, want it to stay MachineAPI", got.Status.AuthoritativeAPI)
	}
	e.Eventually(time.Minute, "describe shows the pending request and why", func(ctx context.Context) (bool, string, error) {
		out, errOut, code := runCommand(t, newDescribeCommand, kc, "cluster/lab", "--color=never")
		for _, line := range strings.Split(out, "\n") {
			if strings.Contains(line, "MachineSet lab-elsewhere") {
				ok := strings.Contains(line, "authority MachineAPI → ClusterAPI") &&
					strings.Contains(line, "NOT Synchronized: spec.template.spec.providerSpec.value.region") &&
					strings.Contains(line, "migration: ")
				return ok, line, nil
			}
		}
		return false, fmt.Sprintf("%s%s exit %d", out, errOut, code), nil
	})
	out, _, code = runCommand(t, newPlanCommand, kc)
	if code != planExitBlocked {
		t.Fatalf("plan after the request: exit %d\n%s", code, out)
	}
	wantAll(t, "plan after the request", out, "note:   a migration to ClusterAPI has been requested")
}
