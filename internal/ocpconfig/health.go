package ocpconfig

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/machina-dev/machina/internal/authority"
	"github.com/machina-dev/machina/internal/mapicond"
)

// The conditions the health reads on Machine API resources: the sync's and the migration's
// (authority.SynchronizedCondition, migration.MigrationCondition; named here, as this
// package sits below both).
const (
	synchronizedCondition machinev1beta1.ConditionType = "Synchronized"
	migrationCondition    machinev1beta1.ConditionType = "AuthorityMigration"
)

// StuckAfter is how long an authority migration may stay open before the migration group's
// condition calls it stuck (the example alert MachinaMigrationStuck in docs/metrics.md uses
// the same bound).
const StuckAfter = 15 * time.Minute

// examples is how many resources a condition message names.
const examples = 3

// item is one Machine API resource a condition message may name.
type item struct {
	kind, name, detail string
}

func (i item) String() string { return i.kind + " " + i.name + " (" + i.detail + ")" }

// mapiResources lists the Machine API Machines, MachineSets and MachineHealthChecks in ns, and
// calls each with the kind, the object and its conditions.
func mapiResources(ctx context.Context, r client.Reader, ns string, each func(kind string, o client.Object, conds []machinev1beta1.Condition)) error {
	var mm machinev1beta1.MachineList
	if err := r.List(ctx, &mm, client.InNamespace(ns)); err != nil {
		return err
	}
	for i := range mm.Items {
		each("Machine", &mm.Items[i], mm.Items[i].Status.Conditions)
	}
	var ms machinev1beta1.MachineSetList
	if err := r.List(ctx, &ms, client.InNamespace(ns)); err != nil {
		return err
	}
	for i := range ms.Items {
		each("MachineSet", &ms.Items[i], ms.Items[i].Status.Conditions)
	}
	var mhcs machinev1beta1.MachineHealthCheckList
	if err := r.List(ctx, &mhcs, client.InNamespace(ns)); err != nil {
		return err
	}
	for i := range mhcs.Items {
		each("MachineHealthCheck", &mhcs.Items[i], mhcs.Items[i].Status.Conditions)
	}
	return nil
}

// SyncHealth is the sync group's health: degraded while any Machine API Machine, MachineSet or
// MachineHealthCheck in ns reports Synchronized=False (the count and a few of them, with the
// condition's reason and message, are in the message). r is normally the manager's cache,
// which the sync's controllers fill.
func SyncHealth(r client.Reader, ns string) func(context.Context) (Health, error) {
	return func(ctx context.Context) (Health, error) {
		var bad []item
		err := mapiResources(ctx, r, ns, func(kind string, o client.Object, conds []machinev1beta1.Condition) {
			if c := mapicond.Get(conds, synchronizedCondition); c != nil && c.Status == corev1.ConditionFalse {
				bad = append(bad, item{kind, o.GetName(), c.Reason + ": " + shorten(c.Message)})
			}
		})
		if err != nil {
			return Health{}, err
		}
		if len(bad) == 0 {
			return Health{Reason: AsExpectedReason, Message: "no Machine API Machine, MachineSet or MachineHealthCheck in " + ns + " reports Synchronized=False"}, nil
		}
		return Health{Degraded: true, Reason: NotSynchronizedReason, Message: fmt.Sprintf(
			"%s in %s %s not synchronized with the Cluster API (Synchronized=False): %s",
			count(len(bad), "Machine API resource"), ns, isAre(len(bad)), list(bad))}, nil
	}
}

// MigrationHealth is the migration group's health: degraded while an authority migration
// (a Machine or MachineSet whose spec.authoritativeAPI differs from its status, a
// MachineHealthCheck whose requested authority annotation differs from its current one) has
// been open longer than stuckAfter. How long is measured from when this process first saw the
// request open, as the migration's own machina_migration_pending_seconds is: a restart starts
// the count again, which may report a stuck migration late but never one that is not.
func MigrationHealth(r client.Reader, ns string, stuckAfter time.Duration, now func() time.Time) func(context.Context) (Health, error) {
	var mu sync.Mutex
	firstSeen := map[string]time.Time{}
	return func(ctx context.Context) (Health, error) {
		mu.Lock()
		defer mu.Unlock()
		t := now()
		seen := map[string]bool{}
		var stuck []item
		err := mapiResources(ctx, r, ns, func(kind string, o client.Object, conds []machinev1beta1.Condition) {
			requested, current := authorities(o)
			if requested == "" || current == "" || requested == current {
				return
			}
			key := kind + "/" + o.GetName()
			seen[key] = true
			since, ok := firstSeen[key]
			if !ok {
				since = t
				firstSeen[key] = t
			}
			if t.Sub(since) < stuckAfter {
				return
			}
			detail := fmt.Sprintf("to %s, open since %s", requested, since.UTC().Format(time.RFC3339))
			if c := mapicond.Get(conds, migrationCondition); c != nil && c.Status == corev1.ConditionFalse {
				detail += "; " + c.Reason + ": " + shorten(c.Message)
			}
			stuck = append(stuck, item{kind, o.GetName(), detail})
		})
		if err != nil {
			return Health{}, err
		}
		for k := range firstSeen {
			if !seen[k] {
				delete(firstSeen, k)
			}
		}
		if len(stuck) == 0 {
			return Health{Reason: AsExpectedReason, Message: "no authority migration in " + ns + " has been open longer than " + stuckAfter.String()}, nil
		}
		return Health{Degraded: true, Reason: MigrationStuckReason, Message: fmt.Sprintf(
			"%s in %s %s been open longer than %s: %s",
			count(len(stuck), "authority migration"), ns, hasHave(len(stuck)), stuckAfter, list(stuck))}, nil
	}
}

// authorities returns a Machine API resource's requested and current authority; current is
// empty while the sync has not decided it.
func authorities(o client.Object) (requested, current string) {
	switch x := o.(type) {
	case *machinev1beta1.Machine:
		return string(x.Spec.AuthoritativeAPI), string(x.Status.AuthoritativeAPI)
	case *machinev1beta1.MachineSet:
		return string(x.Spec.AuthoritativeAPI), string(x.Status.AuthoritativeAPI)
	case *machinev1beta1.MachineHealthCheck:
		current = x.Annotations[authority.MHCStatusAuthoritativeAPIAnnotation]
		if current == "" {
			current = string(machinev1beta1.MachineAuthorityMachineAPI)
		}
		return x.Annotations[authority.MHCAuthoritativeAPIAnnotation], current
	}
	return "", ""
}

// list names the first few items, sorted by kind and name, and how many more there are.
func list(items []item) string {
	sort.Slice(items, func(i, j int) bool {
		if items[i].kind != items[j].kind {
			return items[i].kind < items[j].kind
		}
		return items[i].name < items[j].name
	})
	var parts []string
	for i, it := range items {
		if i == examples {
			parts = append(parts, fmt.Sprintf("and %d more", len(items)-examples))
			break
		}
		parts = append(parts, it.String())
	}
	return strings.Join(parts, "; ")
}

// shorten keeps a condition message to a length a ClusterOperator message can carry a few of.
func shorten(s string) string {
	const max = 200
	r := []rune(s)
	if len(r) <= max {
		return s
	}
	return string(r[:max]) + "…"
}

func count(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}

func isAre(n int) string {
	if n == 1 {
		return "is"
	}
	return "are"
}

func hasHave(n int) string {
	if n == 1 {
		return "has"
	}
	return "have"
}
