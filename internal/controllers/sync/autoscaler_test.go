package sync_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/machina-dev/machina/internal/testenv"
)

// The identity and field manager of OpenShift's cluster autoscaler.
const (
	autoscalerUser    = "system:serviceaccount:openshift-machine-api:cluster-autoscaler"
	autoscalerManager = "cluster-autoscaler"
)

func clientAs(t *testing.T, e *testenv.Env, user string, groups ...string) client.Client {
	t.Helper()
	cfg, err := e.Lab.UserConfig(user, groups...)
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.New(cfg, client.Options{Scheme: e.Client.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// A replicas change written to the Cluster API MachineSet by the cluster autoscaler's identity
// is mirrored onto the authoritative Machine API MachineSet; writes by anyone else are still
// overwritten by the sync, or refused by admission.
func testAutoscalerReplicas(t *testing.T, p platform) {
	e := env.For(t)
	ctx := context.Background()
	if err := e.Client.Create(ctx, p.machineSet(p.name("scaled"), 1)); err != nil {
		t.Fatal(err)
	}
	waitCounts := func(what string, replicas int32) {
		e.Eventually(120*time.Second, what, func(ctx context.Context) (bool, string, error) {
			m, c, err := getMS(ctx, e, p.name("scaled"))
			if err != nil {
				return false, err.Error(), nil
			}
			nm, nc, desc := countBoth(ctx, e, p.name("scaled"))
			return ptr.Deref(m.Spec.Replicas, -1) == replicas && ptr.Deref(c.Spec.Replicas, -1) == replicas &&
					nm == int(replicas) && nc == int(replicas) && m.Status.SynchronizedGeneration == m.Generation,
				fmt.Sprintf("mapi replicas %d capi replicas %d machines:%s", ptr.Deref(m.Spec.Replicas, -1), ptr.Deref(c.Spec.Replicas, -1), desc), nil
		})
	}
	waitCounts("one mirrored Machine", 1)
	autoscaler := clientAs(t, e, autoscalerUser, "system:serviceaccounts", "system:serviceaccounts:openshift-machine-api", "system:masters")
	capiKey := client.ObjectKey{Namespace: capiNS, Name: p.name("scaled")}

	t.Run("AutoscalerWriteMirroredAndMachineAPIScales", func(t *testing.T) {
		c := &clusterv1.MachineSet{}
		// The sync writes the mirror's status meanwhile: like the autoscaler, retry a conflict.
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			if err := autoscaler.Get(ctx, capiKey, c); err != nil {
				return err
			}
			c.Spec.Replicas = ptr.To[int32](2)
			return autoscaler.Update(ctx, c, client.FieldOwner(autoscalerManager))
		})
		if err != nil {
			t.Fatalf("the autoscaler's write was refused: %v", err)
		}
		waitCounts("the Machine API MachineSet scaled up to the autoscaler's 2", 2)
		// Through the scale subresource, as the autoscaler really does it.
		scale := &autoscalingv1.Scale{ObjectMeta: metav1.ObjectMeta{Namespace: capiNS, Name: p.name("scaled")}, Spec: autoscalingv1.ScaleSpec{Replicas: 1}}
		if err := autoscaler.SubResource("scale").Update(ctx, c, client.WithSubResourceBody(scale), client.FieldOwner(autoscalerManager)); err != nil {
			t.Fatalf("the autoscaler's scale was refused: %v", err)
		}
		waitCounts("the Machine API MachineSet scaled down to the autoscaler's 1", 1)
	})

	t.Run("AdministratorWriteOverwritten", func(t *testing.T) {
		m, _, err := getMS(ctx, e, p.name("scaled"))
		if err != nil {
			t.Fatal(err)
		}
		generation := m.Generation
		// An administrator scales the mirror with kubectl scale (the scale subresource, which
		// admission cannot tell apart from a scale of an authoritative MachineSet).
		admin := clientAs(t, e, "alice", "system:masters")
		c := &clusterv1.MachineSet{}
		if err := admin.Get(ctx, capiKey, c); err != nil {
			t.Fatal(err)
		}
		scale := &autoscalingv1.Scale{ObjectMeta: metav1.ObjectMeta{Namespace: capiNS, Name: p.name("scaled")}, Spec: autoscalingv1.ScaleSpec{Replicas: 3}}
		if err := admin.SubResource("scale").Update(ctx, c, client.WithSubResourceBody(scale), client.FieldOwner("kubectl-scale")); err != nil {
			t.Fatal(err)
		}
		e.Eventually(60*time.Second, "the administrator's replicas overwritten from the Machine API", func(ctx context.Context) (bool, string, error) {
			m, c, err := getMS(ctx, e, p.name("scaled"))
			if err != nil {
				return false, err.Error(), nil
			}
			return ptr.Deref(c.Spec.Replicas, -1) == 1 && ptr.Deref(m.Spec.Replicas, -1) == 1,
				fmt.Sprintf("capi %d mapi %d", ptr.Deref(c.Spec.Replicas, -1), ptr.Deref(m.Spec.Replicas, -1)), nil
		})
		if m, _, _ = getMS(ctx, e, p.name("scaled")); m.Generation != generation {
			t.Fatalf("the Machine API MachineSet changed (generation %d -> %d) after an administrator scaled its mirror", generation, m.Generation)
		}
		waitCounts("still one Machine", 1)
	})

	t.Run("RandomUserWriteRefused", func(t *testing.T) {
		bob := clientAs(t, e, "bob", "system:masters")
		c := &clusterv1.MachineSet{}
		// Other writers (the paused controller acknowledging the generations the previous
		// case made) may move the object between the read and the write: a conflict is retried,
		// so the refusal is what is tested (CI once met the conflict instead).
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			if err := bob.Get(ctx, capiKey, c); err != nil {
				return err
			}
			c.Spec.Replicas = ptr.To[int32](5)
			// Even claiming to be the autoscaler's field manager.
			return bob.Update(ctx, c, client.FieldOwner(autoscalerManager))
		})
		want := "spec: Forbidden: MachineSet " + p.name("scaled") + " is a paused mirror of an authoritative Machine API resource"
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("a random user's replicas write: %v; want it refused with %q", err, want)
		}
	})

	m, _, _ := getMS(ctx, e, p.name("scaled"))
	if m != nil {
		_ = e.Client.Delete(ctx, m)
	}
}
