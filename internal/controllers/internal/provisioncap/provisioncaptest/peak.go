// Package provisioncaptest holds what both APIs' provisioning-limit tests share.
package provisioncaptest

import (
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// PeakProvisioning follows a watch of one API's Machines (type M) until `running` of them
// no longer provision, or the watch ends. provisioning reports a Machine that counts against
// the limit (no Node, not being deleted, not failed). It returns the largest number seen
// provisioning at once and how many did not provision at the end.
func PeakProvisioning[M client.Object](events <-chan watch.Event, running int, provisioning func(M) bool) (peak, up int) {
	state := map[string]bool{}
	for ev := range events {
		m, ok := ev.Object.(M)
		if !ok {
			continue
		}
		if ev.Type == watch.Deleted {
			delete(state, m.GetName())
		} else {
			state[m.GetName()] = provisioning(m)
		}
		now := 0
		up = 0
		for _, p := range state {
			if p {
				now++
			} else {
				up++
			}
		}
		peak = max(peak, now)
		if up >= running {
			return peak, up
		}
	}
	return peak, up
}
