package controllers_test

import (
	"context"
	"strings"
	"testing"
	"time"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/machina-dev/machina/internal/controllers"
	"github.com/machina-dev/machina/internal/lab/labtest"
	"github.com/machina-dev/machina/internal/manager"
	"github.com/machina-dev/machina/internal/opsmetrics"
	"github.com/machina-dev/machina/internal/scheme"
)

// The list is well formed: unique names that --controllers can select, each with a
// description for --help and a Setup; only the operator metrics always run.
func TestGroups(t *testing.T) {
	seen := map[string]bool{}
	for _, g := range controllers.Groups(nil) {
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
	for _, name := range []string{"machineapi", "clusterapi", "sim", "aws", "sync", "migration", "admission", "opsmetrics"} {
		if !seen[name] {
			t.Errorf("group %q is missing", name)
		}
	}
	groups, err := controllers.Select(nil, "sync,migration")
	if err != nil || len(groups) != 3 {
		t.Fatalf("Select(sync,migration) = %d groups, %v; want sync, migration and opsmetrics", len(groups), err)
	}
}

// The platform-neutral Machine API group and the AWS group talk to no simulated cloud: a
// manager running them starts without --cloud-url, as on real AWS, and its MachineSet
// controller acts. The simulated platform's group refuses to start without it, naming the flag.
func TestGroupsNeedOnlyTheirOwnSettings(t *testing.T) {
	t.Parallel()
	l := labtest.Start(t)
	cfg, err := l.ManagerConfig()
	if err != nil {
		t.Fatal(err)
	}
	groups, err := controllers.Select(&controllers.Settings{}, "machineapi,aws")
	if err != nil {
		t.Fatal(err)
	}
	mgr, err := manager.New(cfg, manager.Options{MetricsAddr: "0", HealthProbeAddr: "0", Groups: groups})
	if err != nil {
		t.Fatalf("manager with machineapi,aws and no cloud URL: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("manager: %v", err)
		}
	}()

	c, err := client.New(l.Config, client.Options{Scheme: scheme.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	ms := &machinev1beta1.MachineSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "no-cloud"},
		Spec: machinev1beta1.MachineSetSpec{
			Selector: metav1.LabelSelector{MatchLabels: map[string]string{"set": "no-cloud"}},
			Template: machinev1beta1.MachineTemplateSpec{
				ObjectMeta: machinev1beta1.ObjectMeta{Labels: map[string]string{"set": "no-cloud"}},
				Spec: machinev1beta1.MachineSpec{ProviderSpec: machinev1beta1.ProviderSpec{Value: &runtime.RawExtension{Raw: []byte(
					`{"apiVersion":"machine.openshift.io/v1beta1","kind":"AWSMachineProviderConfig","instanceType":"m6i.large",` +
						`"ami":{"id":"ami-0123456789abcdef0"},"placement":{"region":"us-east-1","availabilityZone":"us-east-1a"}}`)}}},
			},
		},
	}
	if err := c.Create(ctx, ms); err != nil {
		t.Fatal(err)
	}
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		if err := c.Get(ctx, client.ObjectKeyFromObject(ms), ms); err != nil {
			return false, err
		}
		return ms.Status.ObservedGeneration == ms.Generation && ms.Status.LabelSelector != "", nil
	}); err != nil {
		t.Fatalf("the MachineSet controller did not report on %s: %v (status %+v)", ms.Name, err, ms.Status)
	}

	groups, err = controllers.Select(&controllers.Settings{}, "sim")
	if err != nil {
		t.Fatal(err)
	}
	_, err = manager.New(cfg, manager.Options{MetricsAddr: "0", HealthProbeAddr: "0", Groups: groups})
	if err == nil || !strings.Contains(err.Error(), "controller group sim:") || !strings.Contains(err.Error(), "--cloud-url") {
		t.Errorf("manager with the sim group and no cloud URL: %v, want an error naming --cloud-url", err)
	}
}
