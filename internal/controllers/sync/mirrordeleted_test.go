package sync_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// testMachineSetMirrorDeleted: deleting the paused Cluster API mirror of a Machine API
// authoritative MachineSet — with background or foreground cascading — never acts on it: the
// mirror is recreated, no Machine of either API is deleted and no instance is terminated.
func testMachineSetMirrorDeleted(t *testing.T, p platform) {
	for _, policy := range []metav1.DeletionPropagation{metav1.DeletePropagationBackground, metav1.DeletePropagationForeground} {
		t.Run(string(policy), func(t *testing.T) {
			e := env.For(t)
			ctx := context.Background()
			name := p.name("mirror-gone-") + map[metav1.DeletionPropagation]string{metav1.DeletePropagationBackground: "bg", metav1.DeletePropagationForeground: "fg"}[policy]
			if err := e.Client.Create(ctx, p.machineSet(name, 2)); err != nil {
				t.Fatal(err)
			}
			var mapiUIDs []types.UID
			var oldUID types.UID
			e.Eventually(120*time.Second, "two running mirrored Machines", func(ctx context.Context) (bool, string, error) {
				m, c, desc := countBoth(ctx, e, name)
				var list machinev1beta1.MachineList
				_ = e.Client.List(ctx, &list, client.InNamespace(mapiNS), client.MatchingLabels{"machine.openshift.io/cluster-api-machineset": name})
				mapiUIDs = mapiUIDs[:0]
				running := 0
				for _, x := range list.Items {
					mapiUIDs = append(mapiUIDs, x.UID)
					if x.Status.Phase != nil && *x.Status.Phase == "Running" {
						running++
					}
				}
				_, cms, _ := getMS(ctx, e, name)
				if cms != nil {
					oldUID = cms.UID
				}
				return m == 2 && c == 2 && running == 2 && cms != nil, fmt.Sprintf("%s running %d", desc, running), nil
			})
			before, err := e.Cloud.Stats(ctx)
			if err != nil {
				t.Fatal(err)
			}
			cms := &clusterv1.MachineSet{ObjectMeta: metav1.ObjectMeta{Namespace: capiNS, Name: name}}
			if err := e.Client.Delete(ctx, cms, client.PropagationPolicy(policy)); err != nil {
				t.Fatal(err)
			}
			e.Eventually(120*time.Second, "the mirror recreated, every Machine kept", func(ctx context.Context) (bool, string, error) {
				_, cms, err := getMS(ctx, e, name)
				if err != nil {
					return false, err.Error(), nil
				}
				m, c, desc := countBoth(ctx, e, name)
				owned := 0
				var list clusterv1.MachineList
				_ = e.Client.List(ctx, &list, client.InNamespace(capiNS), client.MatchingLabels{"machine.openshift.io/cluster-api-machineset": name})
				for _, x := range list.Items {
					if ref := metav1.GetControllerOf(&x); ref != nil && ref.UID == cms.UID {
						owned++
					}
				}
				// Its template, let go with the old mirror, is the new one's again.
				var tmplOwner *metav1.OwnerReference
				if tmpl, err := p.infraTemplate(ctx, e, cms.Spec.Template.Spec.InfrastructureRef.Name); err == nil {
					tmplOwner = metav1.GetControllerOf(tmpl)
				}
				return cms.UID != oldUID && cms.DeletionTimestamp.IsZero() && m == 2 && c == 2 && owned == 2 && tmplOwner != nil && tmplOwner.UID == cms.UID,
					fmt.Sprintf("new mirror %v, %d owned by it, template controller %v, %s", cms.UID != oldUID, owned, tmplOwner, desc), nil
			})
			var list machinev1beta1.MachineList
			if err := e.Client.List(ctx, &list, client.InNamespace(mapiNS), client.MatchingLabels{"machine.openshift.io/cluster-api-machineset": name}); err != nil {
				t.Fatal(err)
			}
			for _, x := range list.Items {
				if !x.DeletionTimestamp.IsZero() || !slices.Contains(mapiUIDs, x.UID) {
					t.Errorf("Machine API Machine %s replaced or deleted", x.Name)
				}
			}
			after, err := e.Cloud.Stats(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if after.InstancesCreated != before.InstancesCreated || after.Operations["TerminateInstances"].Calls != before.Operations["TerminateInstances"].Calls {
				t.Errorf("instances launched %d, terminate calls %d during the mirror's deletion",
					after.InstancesCreated-before.InstancesCreated, after.Operations["TerminateInstances"].Calls-before.Operations["TerminateInstances"].Calls)
			}
		})
	}
}

// testMHCMirrorDeleted: the paused Cluster API mirror of a Machine API authoritative health
// check, deleted, does not hang on the sync finalizer: it is recreated.
func testMHCMirrorDeleted(t *testing.T) {
	e := env.For(t)
	ctx := context.Background()
	if err := e.Client.Create(ctx, mapiMHC("check-gone")); err != nil {
		t.Fatal(err)
	}
	var oldUID types.UID
	e.Eventually(60*time.Second, "the health check mirrored", func(ctx context.Context) (bool, string, error) {
		c := &clusterv1.MachineHealthCheck{}
		if err := e.Client.Get(ctx, client.ObjectKey{Namespace: capiNS, Name: "check-gone"}, c); err != nil {
			return false, err.Error(), nil
		}
		oldUID = c.UID
		return true, "", nil
	})
	if err := e.Client.Delete(ctx, &clusterv1.MachineHealthCheck{ObjectMeta: metav1.ObjectMeta{Namespace: capiNS, Name: "check-gone"}}); err != nil {
		t.Fatal(err)
	}
	e.Eventually(60*time.Second, "the health check mirror recreated", func(ctx context.Context) (bool, string, error) {
		c := &clusterv1.MachineHealthCheck{}
		if err := e.Client.Get(ctx, client.ObjectKey{Namespace: capiNS, Name: "check-gone"}, c); err != nil {
			return false, err.Error(), nil
		}
		_, paused := c.Annotations[clusterv1.PausedAnnotation]
		return c.UID != oldUID && c.DeletionTimestamp.IsZero() && paused, fmt.Sprintf("same %v deleting %v paused %v", c.UID == oldUID, !c.DeletionTimestamp.IsZero(), paused), nil
	})
}
