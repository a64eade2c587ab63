package authority

import (
	"testing"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
)

// The initial authority follows the spec alone, MachineAPI when the spec names none: the rule
// machine-api-operator's controllers apply, and the one the gate and the sync share.
func TestInitialAuthority(t *testing.T) {
	for spec, want := range map[machinev1beta1.MachineAuthority]machinev1beta1.MachineAuthority{
		"": machinev1beta1.MachineAuthorityMachineAPI,
		machinev1beta1.MachineAuthorityMachineAPI: machinev1beta1.MachineAuthorityMachineAPI,
		machinev1beta1.MachineAuthorityClusterAPI: machinev1beta1.MachineAuthorityClusterAPI,
	} {
		if got := InitialAuthority(spec); got != want {
			t.Errorf("InitialAuthority(%q) = %q, want %q", spec, got, want)
		}
	}
}
