package migration_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/machina-dev/machina/internal/scheme"
	"github.com/machina-dev/machina/internal/testenv"
)

// testNoReadyFlapAtHandover: a mirrored InfraMachine has never been reconciled by its
// provider, so it reports nothing. Handed to the Cluster API, the Machine must not read that
// as "not provisioned" and drop out of Ready (and of its MachineSet's available count) until
// the provider's first pass: the migration sets the contract's provisioned flag on the
// InfraMachine before unpausing. The provider's first report (the instance state, which both
// the simulated provider and CAPA write with it) is held until the Cluster API Machine
// controller has passed over the unpaused Machine, so the test does not depend on which
// controller is faster.
func testNoReadyFlapAtHandover(t *testing.T, pc platformCase) {
	e := env.For(t)
	ctx := context.Background()
	name := pc.name("noflap")
	if err := e.Client.Create(ctx, pc.machine(name, 1)); err != nil {
		t.Fatal(err)
	}
	e.Eventually(90*time.Second, "Running under the Machine API, mirrored Ready", func(ctx context.Context) (bool, string, error) {
		m, c, err := getBoth(ctx, e, name)
		if err != nil {
			return false, err.Error(), nil
		}
		return m.Status.SynchronizedGeneration == m.Generation && meta.IsStatusConditionTrue(c.Status.Conditions, clusterv1.ReadyCondition),
			fmt.Sprintf("phase %v, capi Ready %v", m.Status.Phase, meta.FindStatusCondition(c.Status.Conditions, clusterv1.ReadyCondition)), nil
	})
	gvk := pc.provider.InfraMachine
	lift := testenv.Hold{What: "the provider's first report on " + name, Group: gvk.Group, Resource: strings.ToLower(gvk.Kind) + "s/status",
		Deny: fmt.Sprintf("%s && has(object.status) && has(object.status.instanceState) && !(has(oldObject.status) && has(oldObject.status.instanceState))",
			celNamed(name))}.Apply(e)
	lifted := false
	defer func() {
		if !lifted {
			lift()
		}
	}()
	readies := watchReady(t, e, name)

	request(t, e, name, machinev1beta1.MachineAuthorityClusterAPI)
	e.Eventually(60*time.Second, "the unpaused Cluster API Machine has been reconciled", func(ctx context.Context) (bool, string, error) {
		m, c, err := getBoth(ctx, e, name)
		if err != nil {
			return false, err.Error(), nil
		}
		ir := meta.FindStatusCondition(c.Status.Conditions, clusterv1.MachineInfrastructureReadyCondition)
		return m.Status.AuthoritativeAPI == machinev1beta1.MachineAuthorityClusterAPI && ir != nil && ir.ObservedGeneration == c.Generation,
			fmt.Sprintf("authority %q, InfrastructureReady %v", m.Status.AuthoritativeAPI, ir), nil
	})
	_, c, err := getBoth(ctx, e, name)
	if err != nil {
		t.Fatal(err)
	}
	if ir := meta.FindStatusCondition(c.Status.Conditions, clusterv1.MachineInfrastructureReadyCondition); ir.Status != metav1.ConditionTrue {
		t.Errorf("before its provider reported, the handed-over Machine has InfrastructureReady %s/%s: %s; want True", ir.Status, ir.Reason, ir.Message)
	}
	lift()
	lifted = true
	e.Eventually(60*time.Second, "the provider reports the instance", func(ctx context.Context) (bool, string, error) {
		_, c, err := getBoth(ctx, e, name)
		if err != nil {
			return false, err.Error(), nil
		}
		ir := meta.FindStatusCondition(c.Status.Conditions, clusterv1.MachineInfrastructureReadyCondition)
		return ir != nil && ir.Status == metav1.ConditionTrue && meta.IsStatusConditionTrue(c.Status.Conditions, clusterv1.ReadyCondition),
			fmt.Sprintf("InfrastructureReady %v", ir), nil
	})
	if seen := readies(); strings.Contains(seen, string(metav1.ConditionFalse)) {
		t.Errorf("the Cluster API Machine's Ready went %s during the handover; want True throughout", seen)
	}
	request(t, e, name, machinev1beta1.MachineAuthorityMachineAPI)
	e.Eventually(60*time.Second, "back under the Machine API", func(ctx context.Context) (bool, string, error) {
		m, _, err := getBoth(ctx, e, name)
		if err != nil {
			return false, err.Error(), nil
		}
		return m.Status.AuthoritativeAPI == machinev1beta1.MachineAuthorityMachineAPI, string(m.Status.AuthoritativeAPI), nil
	})
	if err := e.Client.Delete(ctx, &machinev1beta1.Machine{ObjectMeta: metav1.ObjectMeta{Namespace: mapiNS, Name: name}}); err != nil {
		t.Fatal(err)
	}
}

// watchReady records the Cluster API Machine name's Ready condition statuses as the
// apiserver reports them, in order without repeats; the returned function reads them.
func watchReady(t *testing.T, e *testenv.Env, name string) func() string {
	wc, err := client.NewWithWatch(e.Lab.Config, client.Options{Scheme: scheme.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	w, err := wc.Watch(context.Background(), &clusterv1.MachineList{}, client.InNamespace("openshift-cluster-api"),
		client.MatchingFieldsSelector{Selector: fields.OneTermEqualSelector("metadata.name", name)})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var seen []string
	done := make(chan struct{})
	t.Cleanup(func() { w.Stop(); <-done })
	go func() {
		defer close(done)
		for ev := range w.ResultChan() {
			m, ok := ev.Object.(*clusterv1.Machine)
			if !ok {
				continue
			}
			s := "<none>"
			if c := meta.FindStatusCondition(m.Status.Conditions, clusterv1.ReadyCondition); c != nil {
				s = string(c.Status) + "/" + c.Reason
			}
			mu.Lock()
			if len(seen) == 0 || seen[len(seen)-1] != s {
				seen = append(seen, s)
			}
			mu.Unlock()
		}
	}()
	return func() string {
		mu.Lock()
		defer mu.Unlock()
		return strings.Join(seen, " → ")
	}
}
