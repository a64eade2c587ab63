package migration

import (
	"testing"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
)

// Which side carries out a deletion that interrupted a handover: the side holding its
// controller finalizer (the old one when both do, the new one when neither does), except
// that a Cluster API side the handover to it has already unpaused is the one acting, even
// once its controller has let go.
func TestDeletionSide(t *testing.T) {
	const mapiSide, capiSide = machinev1beta1.MachineAuthorityMachineAPI, machinev1beta1.MachineAuthorityClusterAPI
	for _, tc := range []struct {
		name                 string
		previous             machinev1beta1.MachineAuthority
		noCAPI               bool
		mapiHolds, capiHolds bool
		capiPaused           bool
		want                 machinev1beta1.MachineAuthority
	}{
		{"to CAPI: paused, only MAPI holds", mapiSide, false, true, false, true, mapiSide},
		{"to CAPI: paused, both hold", mapiSide, false, true, true, true, mapiSide},
		{"to CAPI: unpaused, both hold", mapiSide, false, true, true, false, capiSide},
		{"to CAPI: unpaused, CAPI already let go", mapiSide, false, true, false, false, capiSide},
		{"to CAPI: unpaused, MAPI let go", mapiSide, false, false, true, false, capiSide},
		{"to CAPI: neither holds", mapiSide, false, false, false, true, capiSide},
		{"to CAPI: no Cluster API copy", mapiSide, true, true, false, false, mapiSide},
		{"to MAPI: both hold", capiSide, false, true, true, true, capiSide},
		{"to MAPI: unpaused, both hold", capiSide, false, true, true, false, capiSide},
		{"to MAPI: CAPI let go", capiSide, false, true, false, true, mapiSide},
		{"to MAPI: neither holds", capiSide, false, false, false, true, mapiSide},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &machineSubject{mapi: &machinev1beta1.Machine{}}
			s.mapi.Status.AuthoritativeAPI = machinev1beta1.MachineAuthorityMigrating
			s.mapi.Status.SynchronizedAPI = machinev1beta1.SynchronizedAPI(tc.previous)
			if tc.mapiHolds {
				s.mapi.Finalizers = []string{machinev1beta1.MachineFinalizer}
			}
			if !tc.noCAPI {
				s.capi = &clusterv1.Machine{}
				if tc.capiHolds {
					s.capi.Finalizers = []string{clusterv1.MachineFinalizer}
				}
				if tc.capiPaused {
					s.capi.Annotations = map[string]string{clusterv1.PausedAnnotation: ""}
				}
			}
			if got := deletionSide(s); got != tc.want {
				t.Errorf("deletionSide = %s, want %s", got, tc.want)
			}
		})
	}
}
