package controllers_test

import (
	"context"
	"strings"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/machina-dev/machina/internal/authority"
	"github.com/machina-dev/machina/internal/controllers"
	"github.com/machina-dev/machina/internal/lab/labtest"
	"github.com/machina-dev/machina/internal/manager"
	"github.com/machina-dev/machina/internal/scheme"
)

var authorityFields = []string{"spec.authoritativeAPI", "status.authoritativeAPI", "status.synchronizedGeneration", "status.synchronizedAPI"}

const installDoc = `docs/install.md "Install on OpenShift"`

// The sync and migration refuse to start when an installed Machine API CRD lacks the
// authority fields (an OpenShift cluster without the MachineAPIMigration CRDs would prune
// every write of them), naming the CRD and each missing field; the lab's CRDs carry them.
// The check runs as the manager's ServiceAccount, so its RBAC is exercised too.
func TestMachineAPICRDCheck(t *testing.T) {
	t.Parallel()
	l := labtest.Start(t)
	ctx := context.Background()
	admin, err := client.New(l.Config, client.Options{Scheme: scheme.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	mcfg, err := l.ManagerConfig()
	if err != nil {
		t.Fatal(err)
	}
	reader, err := client.New(mcfg, client.Options{Scheme: scheme.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	// newManager builds a manager with one group; New runs the group's Setup.
	newManager := func(group string) error {
		groups, err := controllers.Select(nil, group)
		if err != nil {
			t.Fatal(err)
		}
		_, err = manager.New(mcfg, manager.Options{MetricsAddr: "0", HealthProbeAddr: "0", Groups: groups})
		return err
	}

	if err := authority.CheckMachineAPICRDs(ctx, reader); err != nil {
		t.Fatalf("the lab's CRDs carry the authority fields, yet the check says: %v", err)
	}
	for _, g := range []string{"sync", "migration"} {
		if err := newManager(g); err != nil {
			t.Fatalf("manager with group %s on the lab's CRDs: %v", g, err)
		}
	}

	// The Machine CRD without any of the fields, the MachineSet CRD without two: the message
	// lists exactly the missing ones.
	for _, tc := range []struct {
		name   string
		fields []string
	}{
		{"machines.machine.openshift.io", authorityFields},
		{"machinesets.machine.openshift.io", []string{"spec.authoritativeAPI", "status.synchronizedAPI"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			restore := prune(t, admin, tc.name, tc.fields)
			defer restore()
			err := authority.CheckMachineAPICRDs(ctx, reader)
			wantLacks(t, err, tc.name, tc.fields)
			for _, g := range []string{"sync", "migration"} {
				err := newManager(g)
				wantLacks(t, err, tc.name, tc.fields)
				if err != nil && !strings.HasPrefix(err.Error(), "controller group "+g+": CRD ") {
					t.Errorf("manager with group %s: %v", g, err)
				}
			}
		})
	}

	// A missing CRD is its own error. Deleting one is asynchronous: wait for it to go.
	crd := &apiextensionsv1.CustomResourceDefinition{}
	crd.Name = "machinesets.machine.openshift.io"
	if err := admin.Delete(ctx, crd); err != nil {
		t.Fatal(err)
	}
	want := "CRD machinesets.machine.openshift.io is not installed: the sync and migration need the Machine API CRDs (" + installDoc + ")"
	var last error
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		last = authority.CheckMachineAPICRDs(ctx, reader)
		return last != nil && last.Error() == want, nil
	}); err != nil {
		t.Fatalf("check without the MachineSet CRD: %v, want %q", last, want)
	}
}

// prune removes fields from the installed CRD's v1beta1 schema, as the CRDs of an OpenShift
// cluster without the MachineAPIMigration feature gate lack them, and returns a function that
// puts the original schema back.
func prune(t *testing.T, c client.Client, name string, fields []string) (restore func()) {
	t.Helper()
	ctx := context.Background()
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := c.Get(ctx, client.ObjectKey{Name: name}, crd); err != nil {
		t.Fatal(err)
	}
	original := crd.Spec.DeepCopy()
	for i := range crd.Spec.Versions {
		root := crd.Spec.Versions[i].Schema.OpenAPIV3Schema
		for _, f := range fields {
			parent, field, _ := strings.Cut(f, ".")
			delete(root.Properties[parent].Properties, field)
		}
		// The CEL rules on status read fields the schema no longer has.
		status := root.Properties["status"]
		status.XValidations = nil
		root.Properties["status"] = status
	}
	if err := c.Update(ctx, crd); err != nil {
		t.Fatalf("pruning %s: %v", name, err)
	}
	return func() {
		if err := c.Get(ctx, client.ObjectKey{Name: name}, crd); err != nil {
			t.Fatal(err)
		}
		crd.Spec = *original
		if err := c.Update(ctx, crd); err != nil {
			t.Fatalf("restoring %s: %v", name, err)
		}
	}
}

// wantLacks checks that err is the one message naming the CRD, the missing fields, the feature
// gate and the docs section, and not the other CRD.
func wantLacks(t *testing.T, err error, name string, fields []string) {
	t.Helper()
	if err == nil {
		t.Errorf("CRD %s without the authority fields: no error", name)
		return
	}
	msg := err.Error()
	want := "CRD " + name + " lacks " + strings.Join(fields, ", ") + ": the sync and migration need"
	if !strings.Contains(msg, want) || !strings.Contains(msg, installDoc) || !strings.Contains(msg, "MachineAPIMigration") {
		t.Errorf("error %q\nwant it to contain %q, the feature gate and %s", msg, want, installDoc)
	}
	if strings.Count(msg, "CRD ") != 1 {
		t.Errorf("error %q names another CRD", msg)
	}
}
