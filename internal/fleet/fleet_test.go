package fleet

import (
	"bytes"
	"strings"
	"testing"
	"time"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/machina-dev/machina/internal/authority"
	"github.com/machina-dev/machina/internal/controllers/migration"
)

// Waves put MachineSets first, Machines next and MachineHealthChecks last, keep each kind's
// order and drop repeats (a Machine named and also owned by a named MachineSet).
func TestWaves(t *testing.T) {
	got := Waves([]Item{{MachineHealthCheck, "h"}, {Machine, "m2"}, {MachineSet, "s"}, {Machine, "m1"}, {Machine, "m2"}})
	var s []string
	for _, w := range got {
		var names []string
		for _, it := range w.Items {
			names = append(names, it.Name)
		}
		s = append(s, w.Kind+":"+strings.Join(names, ","))
	}
	if want := "MachineSet:s Machine:m2,m1 MachineHealthCheck:h"; strings.Join(s, " ") != want {
		t.Fatalf("waves %q, want %q", strings.Join(s, " "), want)
	}
	if len(Waves(nil)) != 0 {
		t.Fatal("waves of nothing")
	}
}

// stateOf reads a MachineHealthCheck's authority from its annotation (unset: the Machine
// API) and the same conditions as the other kinds.
func TestStateOfMachineHealthCheck(t *testing.T) {
	to := machinev1beta1.MachineAuthorityClusterAPI
	mhc := &machinev1beta1.MachineHealthCheck{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{
		authority.MHCStatusAuthoritativeAPIAnnotation: "Migrating"}}}
	mhc.Status.Conditions = []machinev1beta1.Condition{{Type: migration.MigrationCondition, Status: corev1.ConditionFalse, Reason: migration.WaitingForPausedReason}}
	if s := stateOf(mhc, to); s.state != "migrating: pausing the old side" || s.done || s.failure != "" {
		t.Errorf("migrating: %+v", s)
	}
	mhc.Annotations[authority.MHCStatusAuthoritativeAPIAnnotation] = "ClusterAPI"
	if s := stateOf(mhc, to); !s.done {
		t.Errorf("moved: %+v", s)
	}
	delete(mhc.Annotations, authority.MHCStatusAuthoritativeAPIAnnotation)
	if s := stateOf(mhc, machinev1beta1.MachineAuthorityMachineAPI); !s.done {
		t.Errorf("no status annotation is the Machine API: %+v", s)
	}
	mhc.Status.Conditions = []machinev1beta1.Condition{{Type: authority.SynchronizedCondition, Status: corev1.ConditionFalse,
		Reason: authority.ConversionFailedReason, Message: "spec.remediationTemplate.namespace: Invalid value"}}
	if s := stateOf(mhc, to); s.done || !strings.Contains(s.failure, "spec.remediationTemplate.namespace") {
		t.Errorf("unconvertible: %+v", s)
	}
}

// Without a terminal every event is a line with the counts; on a terminal the bar is
// redrawn in place and failures get lines of their own; the rate and time left appear once
// something has finished.
func TestProgress(t *testing.T) {
	events := []Event{
		{Type: WaveStarted, Wave: Machine, Counts: Counts{Total: 4, Waiting: 4}},
		{Type: ItemRequested, Item: Item{Machine, "a"}, Counts: Counts{Total: 4, Waiting: 3, InFlight: 1}, Elapsed: time.Second},
		{Type: ItemProgress, Item: Item{Machine, "a"}, State: "migrating", Counts: Counts{Total: 4, Waiting: 3, InFlight: 1}, Elapsed: 2 * time.Second},
		{Type: ItemMigrated, Item: Item{Machine, "a"}, Took: 2 * time.Second, Counts: Counts{Total: 4, Done: 1, Waiting: 3}, Elapsed: 3 * time.Second},
		{Type: ItemFailed, Item: Item{Machine, "b"}, Reason: "request refused: no", Counts: Counts{Total: 4, Done: 1, Failed: 1, Waiting: 2}, Elapsed: 3 * time.Second},
		{Type: Paused, Item: Item{Machine, "b"}, Counts: Counts{Total: 4, Done: 1, Failed: 1, Waiting: 2}, Elapsed: 3 * time.Second},
		{Type: Ended, Counts: Counts{Total: 2, Done: 1, Failed: 1}, Elapsed: 4 * time.Second},
	}
	var lines bytes.Buffer
	p := NewProgress(&lines, false)
	for _, e := range events {
		p.Event(e)
	}
	want := "[0/4] wave: Machines\n[0/4] machine/a: requested\n[0/4] machine/a: migrating\n[1/4] machine/a: done in 2s\n" +
		"[1/4] machine/b: FAILED: request refused: no\n[1/4] paused: no new requests after machine/b failed; waiting for 0 in flight\n"
	if lines.String() != want {
		t.Errorf("lines:\n%s\nwant:\n%s", lines.String(), want)
	}

	var term bytes.Buffer
	p = NewProgress(&term, true)
	for _, e := range events {
		p.Event(e)
	}
	out := term.String()
	for _, w := range []string{"\r\033[K", "machine/b: FAILED: request refused: no\n", "[======", "1/4 done, 0 in flight, 2 waiting, 1 failed, 1.0/s, ETA 2s (3s)"} {
		if !strings.Contains(out, w) {
			t.Errorf("terminal output lacks %q:\n%q", w, out)
		}
	}
	if !strings.HasSuffix(out, "\n") {
		t.Errorf("terminal output does not end its last line: %q", out)
	}
}
