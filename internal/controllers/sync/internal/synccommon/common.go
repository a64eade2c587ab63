// Package synccommon holds what only the three sync controllers (machinesync,
// machinesetsync, mhcsync) share, beyond the authority vocabulary every component shares
// (internal/authority): deciding an empty authority, loading both copies (copies.go), a
// pass's hold on the Machine API copy that writes it once and records the sync's outcome in
// it (scope.go), finalizers, specs and providerIDs (helpers.go), the records of
// the labels and annotations copied onto a mirror (metadata.go), the autoscaler's delete
// marks carried from a mirror (deletemark.go), telling a mirror from someone else's resource
// (notmirror.go), unpausing an authoritative Cluster API copy at its first pairing
// (pairing.go) and watching the platforms' infrastructure kinds (watch.go). It lives under
// the sync's internal directory so that nothing outside the sync can import it.
package synccommon

import (
	"context"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/machina-dev/machina/internal/authority"
	"github.com/machina-dev/machina/internal/patch"
)

// DecideAuthority initialises an empty status.authoritativeAPI of a Machine API Machine or
// MachineSet (status points at its status fields) from its spec, by the rule the Machine API
// controllers' gate follows (authority.InitialAuthority), in one locked status patch. The sync
// decides too because machina's Machine API controllers may not run beside it; when one of
// them decided first, the lock makes this write fail and the next pass sees the decision.
func DecideAuthority(ctx context.Context, c client.Client, mapi client.Object, spec machinev1beta1.MachineAuthority,
	status *machinev1beta1.MachineAuthority, synced *machinev1beta1.SynchronizedAPI) error {
	_, err := patch.LockedStatus(ctx, c, mapi, func() bool {
		*status = authority.InitialAuthority(spec)
		*synced = authority.SynchronizedAPIOf(*status)
		return true
	})
	return err
}
