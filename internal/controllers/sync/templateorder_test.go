package sync_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/machina-dev/machina/internal/authority"
	"github.com/machina-dev/machina/internal/mapicond"
	"github.com/machina-dev/machina/internal/testenv"
)

// testTemplateBeforeMachineSet: a MachineSet born Cluster API-authoritative on the Machine
// API side gets its Cluster API copy only once that copy's InfraMachineTemplate exists. While
// the kube-apiserver refuses the template (as a crash between the two writes, or an
// admission outage, would leave it) there is no Cluster API MachineSet naming a missing
// template, and the Machine API copy says why in Synchronized=False; once the template can be
// written the pair is synchronised, the template controlled by the Cluster API MachineSet.
// A Cluster API MachineSet later pointed at a template that does not exist is reported in
// Synchronized=False naming it, not waited on silently.
func testTemplateBeforeMachineSet(t *testing.T, p platform) {
	e := env.For(t)
	ctx := context.Background()
	name := p.name("tmpl-first")
	gvk := p.provider.InfraMachineTemplate
	mapping, err := e.Client.RESTMapper().RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		t.Fatal(err)
	}
	lift := testenv.Hold{What: "creating the " + gvk.Kind + " of " + name, Group: gvk.Group, Resource: mapping.Resource.Resource,
		Deny: fmt.Sprintf("object.metadata.name.startsWith(%q)", name+"-"), Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create}}.Apply(e)
	lifted := false
	defer func() {
		if !lifted {
			lift()
		}
	}()
	ms := p.machineSet(name, 0)
	ms.Spec.AuthoritativeAPI = machinev1beta1.MachineAuthorityClusterAPI
	if err := e.Client.Create(ctx, ms); err != nil {
		t.Fatal(err)
	}
	e.Eventually(60*time.Second, "the refused template reported on the Machine API copy", func(ctx context.Context) (bool, string, error) {
		m := &machinev1beta1.MachineSet{}
		if err := e.Client.Get(ctx, client.ObjectKey{Namespace: mapiNS, Name: name}, m); err != nil {
			return false, err.Error(), nil
		}
		c := mapicond.Get(m.Status.Conditions, authority.SynchronizedCondition)
		return c != nil && c.Status == "False" && c.Reason == authority.MirrorWriteFailedReason && strings.Contains(c.Message, "held by the test"),
			fmt.Sprintf("Synchronized %+v", c), nil
	})
	if err := e.Client.Get(ctx, client.ObjectKey{Namespace: capiNS, Name: name}, &clusterv1.MachineSet{}); !apierrors.IsNotFound(err) {
		t.Fatalf("a Cluster API MachineSet exists before its template (get: %v)", err)
	}
	lift()
	lifted = true

	var templateName string
	e.Eventually(90*time.Second, "the pair synchronised, the template owned by the Cluster API MachineSet", func(ctx context.Context) (bool, string, error) {
		m, c, err := getMS(ctx, e, name)
		if err != nil {
			return false, err.Error(), nil
		}
		templateName = c.Spec.Template.Spec.InfrastructureRef.Name
		tmpl, err := p.infraTemplate(ctx, e, templateName)
		if err != nil {
			return false, err.Error(), nil
		}
		ref := metav1.GetControllerOf(tmpl)
		return mapicond.IsTrue(m.Status.Conditions, authority.SynchronizedCondition) && m.Status.SynchronizedGeneration == c.Generation &&
				ref != nil && ref.UID == c.UID,
			fmt.Sprintf("Synchronized %+v at %d (Cluster API generation %d), template controller %v",
				mapicond.Get(m.Status.Conditions, authority.SynchronizedCondition), m.Status.SynchronizedGeneration, c.Generation, ref), nil
	})

	// A pass stopped between writing the Cluster API MachineSet and adopting its template
	// leaves the template with no controller; the MachineSet, now the source, claims it.
	tmpl, err := p.infraTemplate(ctx, e, templateName)
	if err != nil {
		t.Fatal(err)
	}
	orphan := tmpl.DeepCopy()
	orphan.SetOwnerReferences(nil)
	if err := e.Client.Patch(ctx, orphan, client.MergeFromWithOptions(tmpl, client.MergeFromWithOptimisticLock{})); err != nil {
		t.Fatal(err)
	}
	e.Eventually(60*time.Second, "the orphaned template claimed by the Cluster API MachineSet", func(ctx context.Context) (bool, string, error) {
		_, c, err := getMS(ctx, e, name)
		if err != nil {
			return false, err.Error(), nil
		}
		tmpl, err := p.infraTemplate(ctx, e, templateName)
		if err != nil {
			return false, err.Error(), nil
		}
		ref := metav1.GetControllerOf(tmpl)
		return ref != nil && ref.UID == c.UID, fmt.Sprintf("template controller %v", ref), nil
	})

	// The Cluster API copy, now the source, pointed at a template that is not there.
	setTemplate := func(to string) {
		t.Helper()
		c := &clusterv1.MachineSet{}
		if err := e.Client.Get(ctx, client.ObjectKey{Namespace: capiNS, Name: name}, c); err != nil {
			t.Fatal(err)
		}
		base := c.DeepCopy()
		c.Spec.Template.Spec.InfrastructureRef.Name = to
		if err := e.Client.Patch(ctx, c, client.MergeFrom(base)); err != nil {
			t.Fatal(err)
		}
	}
	setTemplate(name + "-missing")
	e.Eventually(60*time.Second, "the missing template named in Synchronized=False", func(ctx context.Context) (bool, string, error) {
		m := &machinev1beta1.MachineSet{}
		if err := e.Client.Get(ctx, client.ObjectKey{Namespace: mapiNS, Name: name}, m); err != nil {
			return false, err.Error(), nil
		}
		c := mapicond.Get(m.Status.Conditions, authority.SynchronizedCondition)
		return c != nil && c.Status == "False" && c.Reason == authority.TemplateNotFoundReason && strings.Contains(c.Message, name+"-missing"),
			fmt.Sprintf("Synchronized %+v", c), nil
	})
	setTemplate(templateName)
	e.Eventually(60*time.Second, "synchronised again", func(ctx context.Context) (bool, string, error) {
		m, c, err := getMS(ctx, e, name)
		if err != nil {
			return false, err.Error(), nil
		}
		return mapicond.IsTrue(m.Status.Conditions, authority.SynchronizedCondition) && m.Status.SynchronizedGeneration == c.Generation,
			fmt.Sprintf("Synchronized %+v", mapicond.Get(m.Status.Conditions, authority.SynchronizedCondition)), nil
	})
	// The authoritative copy's deletion takes the pair.
	if err := e.Client.Delete(ctx, &clusterv1.MachineSet{ObjectMeta: metav1.ObjectMeta{Namespace: capiNS, Name: name}}); err != nil {
		t.Fatal(err)
	}
}
