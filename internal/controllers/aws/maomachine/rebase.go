package maomachine

import (
	"fmt"
	"maps"
	"reflect"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	"k8s.io/utils/ptr"

	"github.com/machina-dev/machina/internal/mapicond"
)

// rebase re-applies what the actuator changed on the Machine (before → after) to fresh, the
// Machine as stored now, and returns the result: the write of those changes lost to another
// writer (a migration starting, the sync). machine-api-operator's controller gives the
// actuator no second chance to record a launch: its next pass may find the Machine paused
// and acknowledge the pause, and a provider ID lost here would let the Cluster API side's
// provider launch a second instance while the first runs on. Only the fields the actuator
// writes are carried: the provider ID, labels and annotations it set or removed, the
// provider status, the addresses and the conditions it changed (by type). A provider ID
// stored meanwhile that names another instance is not overwritten.
func rebase(fresh, before, after *machinev1beta1.Machine) (*machinev1beta1.Machine, error) {
	out := fresh.DeepCopy()
	if id := ptr.Deref(after.Spec.ProviderID, ""); id != ptr.Deref(before.Spec.ProviderID, "") {
		if have := ptr.Deref(fresh.Spec.ProviderID, ""); have != "" && have != id {
			return nil, fmt.Errorf("machine %s records instance %s meanwhile, not %s", fresh.Name, have, id)
		}
		out.Spec.ProviderID = after.Spec.ProviderID
	}
	out.Labels = rebaseMap(fresh.Labels, before.Labels, after.Labels)
	out.Annotations = rebaseMap(fresh.Annotations, before.Annotations, after.Annotations)
	if !reflect.DeepEqual(after.Status.ProviderStatus, before.Status.ProviderStatus) {
		out.Status.ProviderStatus = after.Status.ProviderStatus
	}
	if !reflect.DeepEqual(after.Status.Addresses, before.Status.Addresses) {
		out.Status.Addresses = after.Status.Addresses
	}
	for _, c := range after.Status.Conditions {
		if old := mapicond.Get(before.Status.Conditions, c.Type); old == nil || !reflect.DeepEqual(*old, c) {
			mapicond.Set(&out.Status.Conditions, c)
		}
	}
	return out, nil
}

// rebaseMap is fresh with the keys set or removed between before and after set or removed.
func rebaseMap(fresh, before, after map[string]string) map[string]string {
	out := maps.Clone(fresh)
	for k, v := range after {
		if old, ok := before[k]; !ok || old != v {
			if out == nil {
				out = map[string]string{}
			}
			out[k] = v
		}
	}
	for k := range before {
		if _, ok := after[k]; !ok {
			delete(out, k)
		}
	}
	return out
}
