package sync_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/machina-dev/machina/internal/authority"
	"github.com/machina-dev/machina/internal/testenv"
)

// editMeta reads o afresh and applies edit to its labels and annotations (nil values remove
// keys), as the lab administrator.
func editMeta(t *testing.T, e *testenv.Env, o client.Object, labels, annotations map[string]*string) {
	t.Helper()
	ctx := context.Background()
	if err := e.Client.Get(ctx, client.ObjectKeyFromObject(o), o); err != nil {
		t.Fatal(err)
	}
	base := o.DeepCopyObject().(client.Object)
	apply := func(m map[string]string, edit map[string]*string) map[string]string {
		if m == nil {
			m = map[string]string{}
		}
		for k, v := range edit {
			if v == nil {
				delete(m, k)
			} else {
				m[k] = *v
			}
		}
		return m
	}
	o.SetLabels(apply(o.GetLabels(), labels))
	o.SetAnnotations(apply(o.GetAnnotations(), annotations))
	if err := e.Client.Patch(ctx, o, client.MergeFrom(base)); err != nil {
		t.Fatalf("editing %T %s: %v", o, o.GetName(), err)
	}
}

func str(s string) *string { return &s }

// checkMetadataRemoval proves, on one pair of copies: keys added on the authoritative side
// reach the mirror; keys a third party puts on the mirror survive; keys removed on the
// authoritative side leave the mirror. extra checks what else the mirror must show.
func checkMetadataRemoval(t *testing.T, e *testenv.Env, authoritative, mirror client.Object, extra func(mirror client.Object) string) {
	t.Helper()
	read := func(ctx context.Context) (map[string]string, map[string]string, string, error) {
		if err := e.Client.Get(ctx, client.ObjectKeyFromObject(mirror), mirror); err != nil {
			return nil, nil, "", err
		}
		more := ""
		if extra != nil {
			more = extra(mirror)
		}
		return mirror.GetLabels(), mirror.GetAnnotations(), more, nil
	}
	editMeta(t, e, authoritative, map[string]*string{"team": str("blue")}, map[string]*string{"note": str("from the authoritative copy")})
	e.Eventually(60*time.Second, "label and annotation copied to the mirror", func(ctx context.Context) (bool, string, error) {
		l, a, _, err := read(ctx)
		if err != nil {
			return false, err.Error(), nil
		}
		return l["team"] == "blue" && a["note"] == "from the authoritative copy", fmt.Sprintf("labels %v annotations %v", l, a), nil
	})
	// Someone else's keys on the mirror.
	editMeta(t, e, mirror, map[string]*string{"owner": str("someone-else")}, map[string]*string{"remark": str("not the sync's")})
	editMeta(t, e, authoritative, map[string]*string{"team": nil}, map[string]*string{"note": nil})
	e.Eventually(60*time.Second, "removed keys gone from the mirror, the others' kept", func(ctx context.Context) (bool, string, error) {
		l, a, more, err := read(ctx)
		if err != nil {
			return false, err.Error(), nil
		}
		_, hasTeam := l["team"]
		_, hasNote := a["note"]
		return !hasTeam && !hasNote && l["owner"] == "someone-else" && a["remark"] == "not the sync's" && more == "",
			fmt.Sprintf("labels %v annotations %v %s", l, a, more), nil
	})
}

func hasPaused(o client.Object) string {
	if _, ok := o.GetAnnotations()[clusterv1.PausedAnnotation]; !ok {
		return "paused annotation lost"
	}
	return ""
}

func testMetadataRemovalMachine(t *testing.T, p platform) {
	e := env.For(t)
	ctx := context.Background()
	t.Run("MachineAPIToClusterAPI", func(t *testing.T) {
		e := env.For(t)
		if err := e.Client.Create(ctx, p.mapiMachine(p.name("meta-m"), "")); err != nil {
			t.Fatal(err)
		}
		waitSynchronized(t, e, p.name("meta-m"))
		checkMetadataRemoval(t, e, &machinev1beta1.Machine{ObjectMeta: metav1.ObjectMeta{Namespace: mapiNS, Name: p.name("meta-m")}},
			&clusterv1.Machine{ObjectMeta: metav1.ObjectMeta{Namespace: capiNS, Name: p.name("meta-m")}}, hasPaused)
	})
	t.Run("ClusterAPIToMachineAPI", func(t *testing.T) {
		e := env.For(t)
		if err := e.Client.Create(ctx, p.mapiMachine(p.name("meta-m-capi"), machinev1beta1.MachineAuthorityClusterAPI)); err != nil {
			t.Fatal(err)
		}
		waitSynchronized(t, e, p.name("meta-m-capi"))
		checkMetadataRemoval(t, e, &clusterv1.Machine{ObjectMeta: metav1.ObjectMeta{Namespace: capiNS, Name: p.name("meta-m-capi")}},
			&machinev1beta1.Machine{ObjectMeta: metav1.ObjectMeta{Namespace: mapiNS, Name: p.name("meta-m-capi")}}, nil)
	})
	for _, n := range []string{p.name("meta-m"), p.name("meta-m-capi")} {
		_ = e.Client.Delete(ctx, &machinev1beta1.Machine{ObjectMeta: metav1.ObjectMeta{Namespace: mapiNS, Name: n}})
	}
}

func testMetadataRemovalMachineSet(t *testing.T, p platform) {
	ctx := context.Background()
	t.Run("MachineAPIToClusterAPI", func(t *testing.T) {
		e := env.For(t)
		ms := p.machineSet(p.name("meta-ms"), 0)
		tl := map[string]string{"tier": "web"} // beyond the selector's labels
		for k, v := range ms.Spec.Selector.MatchLabels {
			tl[k] = v
		}
		ms.Spec.Template.ObjectMeta.Labels = tl
		if err := e.Client.Create(ctx, ms); err != nil {
			t.Fatal(err)
		}
		e.Eventually(60*time.Second, "mirror with the template label", func(ctx context.Context) (bool, string, error) {
			_, c, err := getMS(ctx, e, p.name("meta-ms"))
			if err != nil {
				return false, err.Error(), nil
			}
			return c.Spec.Template.Labels["tier"] == "web", fmt.Sprint(c.Spec.Template.Labels), nil
		})
		// The template's metadata is part of the spec the sync overwrites: removing a key there
		// removes it from the mirror's template.
		m, _, _ := getMS(ctx, e, p.name("meta-ms"))
		base := m.DeepCopy()
		delete(m.Spec.Template.ObjectMeta.Labels, "tier")
		if err := e.Client.Patch(ctx, m, client.MergeFrom(base)); err != nil {
			t.Fatal(err)
		}
		checkMetadataRemoval(t, e, &machinev1beta1.MachineSet{ObjectMeta: metav1.ObjectMeta{Namespace: mapiNS, Name: p.name("meta-ms")}},
			&clusterv1.MachineSet{ObjectMeta: metav1.ObjectMeta{Namespace: capiNS, Name: p.name("meta-ms")}}, func(o client.Object) string {
				if _, ok := o.(*clusterv1.MachineSet).Spec.Template.Labels["tier"]; ok {
					return "template label tier still mirrored"
				}
				return hasPaused(o)
			})
		_ = e.Client.Delete(ctx, m)
	})
	t.Run("ClusterAPIToMachineAPI", func(t *testing.T) {
		e := env.For(t)
		ms := p.machineSet(p.name("meta-ms-capi"), 0)
		ms.Spec.AuthoritativeAPI = machinev1beta1.MachineAuthorityClusterAPI
		if err := e.Client.Create(ctx, ms); err != nil {
			t.Fatal(err)
		}
		e.Eventually(60*time.Second, "Cluster API copy", func(ctx context.Context) (bool, string, error) {
			_, _, err := getMS(ctx, e, p.name("meta-ms-capi"))
			return err == nil, fmt.Sprint(err), nil
		})
		checkMetadataRemoval(t, e, &clusterv1.MachineSet{ObjectMeta: metav1.ObjectMeta{Namespace: capiNS, Name: p.name("meta-ms-capi")}},
			&machinev1beta1.MachineSet{ObjectMeta: metav1.ObjectMeta{Namespace: mapiNS, Name: p.name("meta-ms-capi")}}, nil)
		_ = e.Client.Delete(ctx, ms)
	})
}

func testMetadataRemovalMHC(t *testing.T) {
	ctx := context.Background()
	t.Run("MachineAPIToClusterAPI", func(t *testing.T) {
		e := env.For(t)
		if err := e.Client.Create(ctx, mapiMHC("meta-mhc")); err != nil {
			t.Fatal(err)
		}
		checkMetadataRemoval(t, e, &machinev1beta1.MachineHealthCheck{ObjectMeta: metav1.ObjectMeta{Namespace: mapiNS, Name: "meta-mhc"}},
			&clusterv1.MachineHealthCheck{ObjectMeta: metav1.ObjectMeta{Namespace: capiNS, Name: "meta-mhc"}}, hasPaused)
	})
	t.Run("ClusterAPIToMachineAPI", func(t *testing.T) {
		e := env.For(t)
		m := mapiMHC("meta-mhc-capi")
		m.Annotations = map[string]string{authority.MHCAuthoritativeAPIAnnotation: "ClusterAPI"}
		if err := e.Client.Create(ctx, m); err != nil {
			t.Fatal(err)
		}
		e.Eventually(60*time.Second, "unpaused Cluster API copy", func(ctx context.Context) (bool, string, error) {
			c := &clusterv1.MachineHealthCheck{}
			if err := e.Client.Get(ctx, client.ObjectKey{Namespace: capiNS, Name: "meta-mhc-capi"}, c); err != nil {
				return false, err.Error(), nil
			}
			return hasPaused(c) != "", fmt.Sprint(c.Annotations), nil
		})
		checkMetadataRemoval(t, e, &clusterv1.MachineHealthCheck{ObjectMeta: metav1.ObjectMeta{Namespace: capiNS, Name: "meta-mhc-capi"}},
			&machinev1beta1.MachineHealthCheck{ObjectMeta: metav1.ObjectMeta{Namespace: mapiNS, Name: "meta-mhc-capi"}},
			func(o client.Object) string {
				// The Machine API copy's own authority annotations are never touched.
				a := o.GetAnnotations()
				if a[authority.MHCAuthoritativeAPIAnnotation] != "ClusterAPI" || a[authority.MHCStatusAuthoritativeAPIAnnotation] != "ClusterAPI" {
					return "authority annotations changed: " + fmt.Sprint(a)
				}
				return ""
			})
	})
}
