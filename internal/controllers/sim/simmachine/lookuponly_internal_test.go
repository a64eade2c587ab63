package simmachine

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	infrav1 "github.com/machina-dev/machina/api/infrastructure/v1alpha1"
)

// A pass may end a pause in its own status write only when it can do nothing but look up the
// instance spec.providerID names: not when it could launch (no providerID), terminate (being
// deleted) or has yet to store its finalizer.
func TestLookupOnly(t *testing.T) {
	now := metav1.Now()
	for _, tc := range []struct {
		name       string
		providerID string
		finalizer  bool
		deleting   bool
		want       bool
	}{
		{"names its instance", "sim://sim-east-1/sim-east-1a/i-1", true, false, true},
		{"may launch", "", true, false, false},
		{"being deleted", "sim://sim-east-1/sim-east-1a/i-1", true, true, false},
		{"finalizer not stored yet", "sim://sim-east-1/sim-east-1a/i-1", false, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sm := &infrav1.SimMachine{}
			sm.Spec.ProviderID = tc.providerID
			if tc.finalizer {
				sm.Finalizers = []string{infrav1.SimMachineFinalizer}
			}
			if tc.deleting {
				sm.DeletionTimestamp = &now
			}
			if got := lookupOnly(sm); got != tc.want {
				t.Errorf("lookupOnly = %v, want %v", got, tc.want)
			}
		})
	}
}
