package migration_test

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/machina-dev/machina/internal/authority"
	"github.com/machina-dev/machina/internal/controllers/migration"
	"github.com/machina-dev/machina/internal/convert"
	"github.com/machina-dev/machina/internal/gate"
	"github.com/machina-dev/machina/internal/mapicond"
	"github.com/machina-dev/machina/internal/patch"
)

// testUncontrolledMirror: a Machine API-authoritative MachineSet is mirrored as a paused
// Cluster API MachineSet and InfraMachineTemplate, and the Machine the Machine API MachineSet
// controller creates as a paused Cluster API Machine and InfraMachine, each exactly the
// converter's output as the apiserver admits it. A new size and a scale-up flow across; deleting
// the MachineSet removes every copy.
func testUncontrolledMirror(t *testing.T, l *uncontrolledLab, p platformLab) {
	ctx := context.Background()
	name := p.name("workers")
	if err := l.c.Create(ctx, p.machineSet(name, "", 1)); err != nil {
		t.Fatal(err)
	}
	tmpl := l.waitSetMirror(t, p, name, 1, p.sizes[0])
	ms, _, err := getSets(ctx, l.e, name)
	if err != nil {
		t.Fatal(err)
	}
	l.checkSetIsConverted(t, p, ms, tmpl)
	machines := l.waitMachineMirrors(t, p, name, 1)
	l.checkMachineIsConverted(t, p, machines[0])

	// A new size and one more replica: a new hash-named template, the old one pruned, and the
	// new Machine mirrored with the new size.
	base := ms.DeepCopy()
	ms.Spec.Replicas = ptr.To[int32](2)
	ms.Spec.Template.Spec.ProviderSpec.Value = p.spec(p.cluster, p.sizes[1])
	if err := l.c.Patch(ctx, ms, client.MergeFrom(base)); err != nil {
		t.Fatal(err)
	}
	newTmpl := l.waitSetMirror(t, p, name, 2, p.sizes[1])
	if newTmpl == tmpl {
		t.Fatalf("the template %s was kept for a new providerSpec", tmpl)
	}
	machines = l.waitMachineMirrors(t, p, name, 2)
	sizes := map[string]bool{}
	for _, m := range machines {
		im, err := l.infra(ctx, p, false, m)
		if err != nil {
			t.Fatal(err)
		}
		sizes[p.size(im, false)] = true
	}
	if !sizes[p.sizes[0]] || !sizes[p.sizes[1]] {
		t.Errorf("the Machines' %s sizes are %v, want the first Machine's %s and the new one's %s", p.provider.InfraMachine.Kind, sizes, p.sizes[0], p.sizes[1])
	}
	l.e.Eventually(60*time.Second, "the unused template pruned", func(ctx context.Context) (bool, string, error) {
		names, err := listNames(ctx, l.e, p.provider.InfraMachineTemplate)
		return err == nil && !slices.Contains(names, tmpl), fmt.Sprint(names, err), nil
	})

	if err := l.c.Delete(ctx, ms); err != nil {
		t.Fatal(err)
	}
	gone := []client.Object{named(&machinev1beta1.MachineSet{}, mapiNS, name), named(&clusterv1.MachineSet{}, capiNS, name), l.emptyInfra(p, true, newTmpl)}
	for _, m := range machines {
		gone = append(gone, named(&machinev1beta1.Machine{}, mapiNS, m), named(&clusterv1.Machine{}, capiNS, m), l.emptyInfra(p, false, m))
	}
	l.waitGone("the MachineSet, its Machines and every mirror", gone...)
}

// waitSetMirror waits until the Machine API MachineSet name is synchronised with a paused
// Cluster API mirror of replicas whose paused template has size; it returns the template's name.
func (l *uncontrolledLab) waitSetMirror(t *testing.T, p platformLab, name string, replicas int32, size string) string {
	var tmpl string
	l.e.Eventually(60*time.Second, fmt.Sprintf("%s mirrored with %d replicas of %s", name, replicas, size), func(ctx context.Context) (bool, string, error) {
		ms, cms, err := getSets(ctx, l.e, name)
		if err != nil {
			return false, err.Error(), nil
		}
		ref := cms.Spec.Template.Spec.InfrastructureRef
		tmpl = ref.Name
		im, err := l.infra(ctx, p, true, tmpl)
		if err != nil {
			return false, err.Error(), nil
		}
		synced := mapicond.IsTrue(ms.Status.Conditions, authority.SynchronizedCondition) && ms.Status.SynchronizedGeneration == ms.Generation
		return synced && hasPaused(cms) && hasPaused(im) && ptr.Deref(cms.Spec.Replicas, -1) == replicas &&
				ref.Kind == p.provider.InfraMachineTemplate.Kind && p.size(im, true) == size,
			fmt.Sprintf("synchronized %v; capi paused %v replicas %v ref %s/%s; template paused %v size %q", synced, hasPaused(cms),
				ptr.Deref(cms.Spec.Replicas, -1), ref.Kind, ref.Name, hasPaused(im), p.size(im, true)), nil
	})
	return tmpl
}

// checkSetIsConverted: the mirror's template is the converter's, by name and admitted spec.
func (l *uncontrolledLab) checkSetIsConverted(t *testing.T, p platformLab, ms *machinev1beta1.MachineSet, tmpl string) {
	out, _, errs := convert.ToClusterAPIMachineSet(ms, p.cc)
	if len(errs) > 0 {
		t.Fatal(errs.ToAggregate())
	}
	if out.InfraMachineTemplate.GetName() != tmpl {
		t.Errorf("the mirror references template %s, the converter names it %s", tmpl, out.InfraMachineTemplate.GetName())
	}
	stored, err := l.infra(context.Background(), p, true, tmpl)
	if err != nil {
		t.Fatal(err)
	}
	if want, got := l.admittedSpec(t, out.InfraMachineTemplate), specOf(t, stored); want != got {
		t.Errorf("%s %s is not the converter's:\nconverted: %s\nstored:    %s", p.provider.InfraMachineTemplate.Kind, tmpl, want, got)
	}
}

// waitMachineMirrors waits until the MachineSet name has n Machine API Machines, each
// synchronised with a paused Cluster API Machine referencing a paused InfraMachine, and
// returns their names.
func (l *uncontrolledLab) waitMachineMirrors(t *testing.T, p platformLab, set string, n int) []string {
	var names []string
	l.e.Eventually(60*time.Second, fmt.Sprintf("%d Machines of %s mirrored", n, set), func(ctx context.Context) (bool, string, error) {
		names = nil
		var list machinev1beta1.MachineList
		if err := l.c.List(ctx, &list, client.InNamespace(mapiNS), client.MatchingLabels{"machine.openshift.io/cluster-api-machineset": set}); err != nil {
			return false, err.Error(), nil
		}
		if len(list.Items) != n {
			return false, fmt.Sprintf("%d Machine API Machines", len(list.Items)), nil
		}
		for i := range list.Items {
			m := &list.Items[i]
			c := &clusterv1.Machine{}
			if err := l.c.Get(ctx, client.ObjectKey{Namespace: capiNS, Name: m.Name}, c); err != nil {
				return false, err.Error(), nil
			}
			im, err := l.infra(ctx, p, false, c.Spec.InfrastructureRef.Name)
			if err != nil {
				return false, err.Error(), nil
			}
			if !mapicond.IsTrue(m.Status.Conditions, authority.SynchronizedCondition) || !hasPaused(c) || !hasPaused(im) {
				return false, fmt.Sprintf("%s: %s; capi paused %v; %s paused %v", m.Name, cond(m, authority.SynchronizedCondition),
					hasPaused(c), im.GetKind(), hasPaused(im)), nil
			}
			names = append(names, m.Name)
		}
		return true, "", nil
	})
	return names
}

// checkMachineIsConverted: the mirror InfraMachine is the converter's, as admitted, and the
// Cluster API Machine references it in the cluster.
func (l *uncontrolledLab) checkMachineIsConverted(t *testing.T, p platformLab, name string) {
	ctx := context.Background()
	m, c, err := getBoth(ctx, l.e, name)
	if err != nil {
		t.Fatal(err)
	}
	out, _, errs := convert.ToClusterAPIMachine(m, p.cc)
	if len(errs) > 0 {
		t.Fatal(errs.ToAggregate())
	}
	if c.Spec.ClusterName != p.cluster || c.Spec.InfrastructureRef.Kind != p.provider.InfraMachine.Kind || c.Spec.InfrastructureRef.Name != out.InfraMachine.GetName() {
		t.Errorf("the Cluster API Machine's cluster %q and infrastructureRef %+v", c.Spec.ClusterName, c.Spec.InfrastructureRef)
	}
	stored, err := l.infra(ctx, p, false, c.Spec.InfrastructureRef.Name)
	if err != nil {
		t.Fatal(err)
	}
	if want, got := l.admittedSpec(t, out.InfraMachine), specOf(t, stored); want != got {
		t.Errorf("%s %s is not the converter's:\nconverted: %s\nstored:    %s", p.provider.InfraMachine.Kind, name, want, got)
	}
}

// named sets o's namespace and name.
func named(o client.Object, ns, name string) client.Object {
	o.SetNamespace(ns)
	o.SetName(name)
	return o
}

func (l *uncontrolledLab) emptyInfra(p platformLab, template bool, name string) client.Object {
	gvk := p.provider.InfraMachine
	if template {
		gvk = p.provider.InfraMachineTemplate
	}
	o := authority.Metadata(gvk)
	o.SetNamespace(capiNS)
	o.SetName(name)
	return o
}

// testUncontrolledFromClusterAPI: a Cluster API-authoritative MachineSet (born so from its
// Machine API spec) is scaled in the Cluster API; machina's Cluster API MachineSet controller
// creates a Machine and an InfraMachine from the template, and the sync mirrors them to a
// paused Machine API Machine with the platform's providerSpec. A new template flows back to
// the Machine API MachineSet's providerSpec.
func testUncontrolledFromClusterAPI(t *testing.T, l *uncontrolledLab, p platformLab) {
	ctx := context.Background()
	name := p.name("capi-set")
	if err := l.c.Create(ctx, p.machineSet(name, machinev1beta1.MachineAuthorityClusterAPI, 0)); err != nil {
		t.Fatal(err)
	}
	var cms *clusterv1.MachineSet
	l.e.Eventually(60*time.Second, "an unpaused Cluster API MachineSet", func(ctx context.Context) (bool, string, error) {
		ms, c, err := getSets(ctx, l.e, name)
		if err != nil {
			return false, err.Error(), nil
		}
		cms = c
		return ms.Status.AuthoritativeAPI == machinev1beta1.MachineAuthorityClusterAPI && !hasPaused(c), describeSets(ms, c), nil
	})
	scaleTo(t, l.e, name, 1)
	var machineName string
	l.e.Eventually(60*time.Second, "the Cluster API Machine mirrored to the Machine API", func(ctx context.Context) (bool, string, error) {
		var list machinev1beta1.MachineList
		if err := l.c.List(ctx, &list, client.InNamespace(mapiNS), client.MatchingLabels{"machine.openshift.io/cluster-api-machineset": name}); err != nil {
			return false, err.Error(), nil
		}
		if len(list.Items) != 1 {
			return false, fmt.Sprintf("%d Machine API Machines", len(list.Items)), nil
		}
		m := &list.Items[0]
		machineName = m.Name
		kind, size := specKindAndSize(m.Spec.ProviderSpec.Value, p)
		return m.Status.AuthoritativeAPI == machinev1beta1.MachineAuthorityClusterAPI && kind == p.provider.ProviderSpecKinds[0] &&
				size == p.sizes[0] && mapicond.IsTrue(m.Status.Conditions, authority.SynchronizedCondition),
			fmt.Sprintf("%s: authority %q providerSpec %s %q; %s", m.Name, m.Status.AuthoritativeAPI, kind, size, cond(m, authority.SynchronizedCondition)), nil
	})
	if c := (&clusterv1.Machine{}); l.c.Get(ctx, client.ObjectKey{Namespace: capiNS, Name: machineName}, c) != nil || hasPaused(c) {
		t.Errorf("the authoritative Cluster API Machine %s is missing or paused", machineName)
	}

	// A template of the other size, written by the user, flows to the Machine API MachineSet.
	tmpl, err := l.infra(ctx, p, true, cms.Spec.Template.Spec.InfrastructureRef.Name)
	if err != nil {
		t.Fatal(err)
	}
	next := tmpl.DeepCopy()
	next.SetName(name + "-bigger")
	next.SetResourceVersion("")
	next.SetUID("")
	next.SetOwnerReferences(nil)
	next.SetAnnotations(nil)
	path := append([]string{"spec", "template", "spec"}, p.sizeField...)
	if err := unstructured.SetNestedField(next.Object, p.sizes[1], path...); err != nil {
		t.Fatal(err)
	}
	if err := l.c.Create(ctx, next); err != nil {
		t.Fatal(err)
	}
	l.e.Eventually(30*time.Second, "the Cluster API MachineSet pointed at "+next.GetName(), func(ctx context.Context) (bool, string, error) {
		if err := l.c.Get(ctx, client.ObjectKeyFromObject(cms), cms); err != nil {
			return false, err.Error(), nil
		}
		_, err := patch.Locked(ctx, l.c, cms, func() bool {
			cms.Spec.Template.Spec.InfrastructureRef.Name = next.GetName()
			return true
		})
		return err == nil, fmt.Sprint(err), nil
	})
	l.e.Eventually(60*time.Second, "the new template's size in the Machine API MachineSet", func(ctx context.Context) (bool, string, error) {
		ms, _, err := getSets(ctx, l.e, name)
		if err != nil {
			return false, err.Error(), nil
		}
		_, size := specKindAndSize(ms.Spec.Template.Spec.ProviderSpec.Value, p)
		return size == p.sizes[1], fmt.Sprintf("size %q; %s", size, mapicondString(ms.Status.Conditions)), nil
	})

	// Deleting the authoritative (Cluster API) MachineSet takes its Machines and every mirror.
	if err := l.c.Get(ctx, client.ObjectKeyFromObject(cms), cms); err != nil {
		t.Fatal(err)
	}
	if err := l.c.Delete(ctx, cms); err != nil {
		t.Fatal(err)
	}
	l.waitGone("the MachineSet and its Machine in both APIs", named(&clusterv1.MachineSet{}, capiNS, name), named(&machinev1beta1.MachineSet{}, mapiNS, name),
		named(&clusterv1.Machine{}, capiNS, machineName), named(&machinev1beta1.Machine{}, mapiNS, machineName), l.emptyInfra(p, false, machineName))
}

// testUncontrolledHandover hands a Machine API Machine to the Cluster API and asks for it back.
//
// To the Cluster API, the handover waits for the Machine API copy to report Paused=True.
// That report is the platform's Machine API controller's (OpenShift's shared Machine
// controller, which every Machine API provider runs, reports it whenever status.authoritativeAPI
// is not MachineAPI); none runs here, so the test writes it through gate.MachineAPI, the same
// decision machina's own Machine API controller stores. The handover then completes: the
// Cluster API copies unpaused, the provider's finalizer put on the InfraMachine.
//
// Back to the Machine API, the handover waits for the InfraMachine's provider to report
// Paused=True: it has the provider's finalizer, so the provider may have acted. Nothing here
// reports it, and the test does not play it: most of the table's providers write no Paused
// condition on a paused InfraMachine (CAPO v0.13.0's OpenStackMachine and CAPG v1.13.1's
// GCPMachine controllers return at once; CAPZ v1.26.0's AzureMachine controller pauses its
// Azure service operator resources and writes no condition), so with the real provider this
// handover waits the same way. (CAPIBM v0.14.0's IBMPowerVSMachine controller does write it,
// with the Cluster API's paused helper; with it running, this handover would complete.) The
// test checks the wait names the InfraMachine and rolls back. Where the provider acknowledges
// by an annotation the test plays it (handBackByAnnotation); where it acknowledges in no way
// (CAPO, CAPG) the test plays the operator who does (handBackByOperator).
// Deleting the Cluster API-authoritative Machine then waits on the provider's finalizer,
// which the provider removes once it finds no instance to delete (none was ever created);
// the test removes it as the provider would.
func testUncontrolledHandover(t *testing.T, l *uncontrolledLab, p platformLab) {
	ctx := context.Background()
	name := p.name("handover")
	if err := l.c.Create(ctx, p.machine(name, "", 0)); err != nil {
		t.Fatal(err)
	}
	l.waitAuthority(name, machinev1beta1.MachineAuthorityMachineAPI, "")
	request(t, l.e, name, machinev1beta1.MachineAuthorityClusterAPI)
	l.waitMigrationReason(name, migration.WaitingForPausedReason, "Machine API copy")
	l.playMachineAPIController(name)
	l.waitAuthority(name, machinev1beta1.MachineAuthorityClusterAPI, migration.CompletedReason)
	_, c, err := getBoth(ctx, l.e, name)
	if err != nil {
		t.Fatal(err)
	}
	im, err := l.infra(ctx, p, false, c.Spec.InfrastructureRef.Name)
	if err != nil {
		t.Fatal(err)
	}
	if hasPaused(c) || hasPaused(im) || !controllerutil.ContainsFinalizer(c, clusterv1.MachineFinalizer) ||
		!slices.ContainsFunc(p.provider.InfraMachineFinalizers, func(f string) bool { return controllerutil.ContainsFinalizer(im, f) }) {
		t.Fatalf("under the Cluster API: Machine paused %v finalizers %v; %s paused %v finalizers %v", hasPaused(c), c.Finalizers,
			im.GetKind(), hasPaused(im), im.GetFinalizers())
	}

	if ack := p.provider.PauseAckAnnotation; ack != "" {
		l.handBackByAnnotation(t, p, name, im, ack)
		return
	}
	request(t, l.e, name, machinev1beta1.MachineAuthorityMachineAPI)
	l.waitMigrationReason(name, migration.WaitingForPausedReason, p.provider.InfraMachine.Kind+" "+c.Spec.InfrastructureRef.Name)
	request(t, l.e, name, machinev1beta1.MachineAuthorityClusterAPI)
	l.waitAuthority(name, machinev1beta1.MachineAuthorityClusterAPI, migration.RolledBackReason)
	if p.provider.PauseAckByOperator {
		l.handBackByOperator(t, p, name, im)
		return
	}

	// The authoritative copy is the Cluster API one: deleting it deletes the InfraMachine.
	if err := l.c.Get(ctx, client.ObjectKeyFromObject(c), c); err != nil {
		t.Fatal(err)
	}
	if err := l.c.Delete(ctx, c); err != nil {
		t.Fatal(err)
	}
	l.e.Eventually(60*time.Second, "the "+im.GetKind()+" deleted", func(ctx context.Context) (bool, string, error) {
		err := l.c.Get(ctx, client.ObjectKeyFromObject(im), im)
		return err == nil && !im.GetDeletionTimestamp().IsZero(), fmt.Sprint(err), nil
	})
	l.removeFinalizers(im, p.provider.InfraMachineFinalizers...)
	l.waitGone("both copies", named(&machinev1beta1.Machine{}, mapiNS, name), named(&clusterv1.Machine{}, capiNS, name), l.emptyInfra(p, false, im.GetName()))
}

// handBackByAnnotation hands a Machine whose InfraMachine its provider has taken over back to
// the Machine API on a platform whose provider acknowledges a pause by removing an
// annotation (CAPZ): the test plays that provider, which marks the InfraMachine while it acts
// on it and unmarks it in the pass that finds it paused. The handover waits for the removal,
// then completes, taking the provider's finalizer off the paused InfraMachine.
func (l *uncontrolledLab) handBackByAnnotation(t *testing.T, p platformLab, name string, im *unstructured.Unstructured, ack string) {
	ctx := context.Background()
	setAck := func(on bool) {
		l.e.Eventually(30*time.Second, fmt.Sprintf("%s marked %v", im.GetName(), on), func(ctx context.Context) (bool, string, error) {
			if err := l.c.Get(ctx, client.ObjectKeyFromObject(im), im); err != nil {
				return false, err.Error(), nil
			}
			_, err := patch.Locked(ctx, l.c, im, func() bool {
				a := im.GetAnnotations()
				if _, has := a[ack]; has == on {
					return false
				}
				if on {
					a = map[string]string{ack: "true"}
					maps.Copy(a, im.GetAnnotations())
				} else {
					delete(a, ack)
				}
				im.SetAnnotations(a)
				return true
			})
			return err == nil, fmt.Sprint(err), nil
		})
	}
	setAck(true)
	request(t, l.e, name, machinev1beta1.MachineAuthorityMachineAPI)
	l.waitMigrationReason(name, migration.WaitingForPausedReason, "still carries "+ack)
	if err := l.c.Get(ctx, client.ObjectKeyFromObject(im), im); err != nil || !hasPaused(im) {
		t.Fatalf("the %s is not paused while the handover waits on it (err %v)", im.GetKind(), err)
	}
	setAck(false)
	l.handedBack(t, p, name, im)
}

// handedBack waits for a handback to the Machine API to complete, checks the InfraMachine stays
// paused without its provider's finalizers, and deletes the Machine: the Machine API copy is
// authoritative now, its finalizer the (absent) actuator's.
func (l *uncontrolledLab) handedBack(t *testing.T, p platformLab, name string, im *unstructured.Unstructured) {
	ctx := context.Background()
	l.waitAuthority(name, machinev1beta1.MachineAuthorityMachineAPI, migration.CompletedReason)
	if err := l.c.Get(ctx, client.ObjectKeyFromObject(im), im); err != nil {
		t.Fatal(err)
	}
	if !hasPaused(im) || slices.ContainsFunc(p.provider.InfraMachineFinalizers, func(f string) bool { return controllerutil.ContainsFinalizer(im, f) }) {
		t.Fatalf("after the handback the %s is paused %v with finalizers %v", im.GetKind(), hasPaused(im), im.GetFinalizers())
	}
	m := named(&machinev1beta1.Machine{}, mapiNS, name)
	if err := l.c.Delete(ctx, m); err != nil {
		t.Fatal(err)
	}
	l.removeFinalizers(m, machinev1beta1.MachineFinalizer)
	l.waitGone("both copies", m, named(&clusterv1.Machine{}, capiNS, name), l.emptyInfra(p, false, im.GetName()))
}

// handBackByOperator hands a Machine whose InfraMachine its provider has taken over back to
// the Machine API on a platform whose provider acknowledges a pause in no way (CAPO, CAPG):
// the handover waits, saying what an operator can do, until the operator annotates the paused
// InfraMachine machina.dev/provider-paused, then completes, taking the provider's finalizer off.
func (l *uncontrolledLab) handBackByOperator(t *testing.T, p platformLab, name string, im *unstructured.Unstructured) {
	request(t, l.e, name, machinev1beta1.MachineAuthorityMachineAPI)
	l.waitMigrationReason(name, migration.WaitingForPausedReason, "annotate it "+authority.ProviderPausedAnnotation)
	l.e.Eventually(30*time.Second, im.GetName()+" acknowledged by the operator", func(ctx context.Context) (bool, string, error) {
		if err := l.c.Get(ctx, client.ObjectKeyFromObject(im), im); err != nil {
			return false, err.Error(), nil
		}
		if !hasPaused(im) {
			return false, "not paused yet", nil
		}
		_, err := patch.Locked(ctx, l.c, im, func() bool {
			a := maps.Clone(im.GetAnnotations())
			a[authority.ProviderPausedAnnotation] = ""
			im.SetAnnotations(a)
			return true
		})
		return err == nil, fmt.Sprint(err), nil
	})
	l.handedBack(t, p, name, im)
}

// testUncontrolledBornClusterAPI: a Machine born Cluster API-authoritative has an InfraMachine
// no provider ever acted on (no provider finalizer), so nothing can be in flight there: the
// handover to the Machine API completes with machina's own Cluster API Machine controller's
// Paused=True alone.
func testUncontrolledBornClusterAPI(t *testing.T, l *uncontrolledLab, p platformLab) {
	ctx := context.Background()
	name := p.name("born-capi")
	if err := l.c.Create(ctx, p.machine(name, machinev1beta1.MachineAuthorityClusterAPI, 1)); err != nil {
		t.Fatal(err)
	}
	l.waitAuthority(name, machinev1beta1.MachineAuthorityClusterAPI, "")
	request(t, l.e, name, machinev1beta1.MachineAuthorityMachineAPI)
	l.waitAuthority(name, machinev1beta1.MachineAuthorityMachineAPI, migration.CompletedReason)
	m, c, err := getBoth(ctx, l.e, name)
	if err != nil {
		t.Fatal(err)
	}
	im, err := l.infra(ctx, p, false, c.Spec.InfrastructureRef.Name)
	if err != nil {
		t.Fatal(err)
	}
	if !hasPaused(c) || !hasPaused(im) || controllerutil.ContainsFinalizer(c, clusterv1.MachineFinalizer) ||
		!controllerutil.ContainsFinalizer(m, machinev1beta1.MachineFinalizer) {
		t.Errorf("under the Machine API: Cluster API Machine paused %v finalizers %v; %s paused %v; Machine API finalizers %v",
			hasPaused(c), c.Finalizers, im.GetKind(), hasPaused(im), m.Finalizers)
	}
	if _, size := specKindAndSize(m.Spec.ProviderSpec.Value, p); size != p.sizes[1] {
		t.Errorf("the Machine API copy's size %q, want %q", size, p.sizes[1])
	}
	// The Machine API finalizer is now the (absent) actuator's to remove: the test removes it
	// as that controller would for a Machine that never had an instance.
	if err := l.c.Delete(ctx, m); err != nil {
		t.Fatal(err)
	}
	l.removeFinalizers(m, machinev1beta1.MachineFinalizer)
	l.waitGone("both copies", named(&machinev1beta1.Machine{}, mapiNS, name), named(&clusterv1.Machine{}, capiNS, name), l.emptyInfra(p, false, im.GetName()))
}

// removeFinalizers removes finalizers from o, retrying on conflicts with the controllers.
func (l *uncontrolledLab) removeFinalizers(o client.Object, fs ...string) {
	l.e.Eventually(30*time.Second, "finalizers removed from "+o.GetName(), func(ctx context.Context) (bool, string, error) {
		if err := l.c.Get(ctx, client.ObjectKeyFromObject(o), o); err != nil {
			return client.IgnoreNotFound(err) == nil, err.Error(), nil
		}
		_, err := patch.RemoveFinalizer(ctx, l.c, o, fs...)
		return err == nil, fmt.Sprint(err), nil
	})
}

// waitAuthority waits until the Machine is held by want, synchronised, and (with reason
// set) its AuthorityMigration condition has that reason.
func (l *uncontrolledLab) waitAuthority(name string, want machinev1beta1.MachineAuthority, reason string) {
	l.e.Eventually(60*time.Second, fmt.Sprintf("%s held by %s", name, want), func(ctx context.Context) (bool, string, error) {
		m, c, err := getBoth(ctx, l.e, name)
		if err != nil {
			return false, err.Error(), nil
		}
		mc := mapicond.Get(m.Status.Conditions, migration.MigrationCondition)
		ok := m.Status.AuthoritativeAPI == want && mapicond.IsTrue(m.Status.Conditions, authority.SynchronizedCondition) &&
			(reason == "" || mc != nil && mc.Reason == reason)
		return ok, describeMachine(m, c) + "; " + cond(m, migration.MigrationCondition), nil
	})
}

// waitMigrationReason waits until the Machine is Migrating with the AuthorityMigration reason
// and a message naming what it waits for.
func (l *uncontrolledLab) waitMigrationReason(name, reason, naming string) {
	l.e.Eventually(60*time.Second, fmt.Sprintf("%s waiting (%s) on %s", name, reason, naming), func(ctx context.Context) (bool, string, error) {
		m, _, err := getBoth(ctx, l.e, name)
		if err != nil {
			return false, err.Error(), nil
		}
		mc := mapicond.Get(m.Status.Conditions, migration.MigrationCondition)
		ok := m.Status.AuthoritativeAPI == machinev1beta1.MachineAuthorityMigrating && mc != nil && mc.Reason == reason && strings.Contains(mc.Message, naming)
		return ok, fmt.Sprintf("authority %q %s", m.Status.AuthoritativeAPI, cond(m, migration.MigrationCondition)), nil
	})
}

// playMachineAPIController stores, as the platform's Machine API Machine controller would,
// the Paused condition the authority gate decides for the Machine.
func (l *uncontrolledLab) playMachineAPIController(name string) {
	l.e.Eventually(30*time.Second, name+" reports Paused=True", func(ctx context.Context) (bool, string, error) {
		m := &machinev1beta1.Machine{}
		if err := l.c.Get(ctx, client.ObjectKey{Namespace: mapiNS, Name: name}, m); err != nil {
			return false, err.Error(), nil
		}
		base := m.DeepCopy()
		d, changed, err := gate.MachineAPI(m)
		if err != nil {
			return false, "", err
		}
		if changed {
			if err := l.c.Status().Patch(ctx, m, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})); err != nil {
				return false, err.Error(), nil
			}
		}
		return d.Paused && mapicond.IsTrue(m.Status.Conditions, gate.PausedCondition), cond(m, gate.PausedCondition), nil
	})
}

// specKindAndSize reads a providerSpec value's kind and the platform's size field in it.
func specKindAndSize(raw *runtime.RawExtension, p platformLab) (string, string) {
	var v map[string]any
	if raw == nil || json.Unmarshal(raw.Raw, &v) != nil {
		return "", ""
	}
	kind, _ := v["kind"].(string)
	size, _, _ := unstructured.NestedString(v, p.specSizeField...)
	return kind, size
}

func mapicondString(conds []machinev1beta1.Condition) string {
	var s []string
	for _, c := range conds {
		s = append(s, fmt.Sprintf("%s=%s %s", c.Type, c.Status, c.Message))
	}
	return strings.Join(s, "; ")
}
