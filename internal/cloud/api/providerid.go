package api

import (
	"fmt"
	"strings"
)

// ProviderIDScheme is the scheme of the simulated cloud's provider IDs.
const ProviderIDScheme = "sim"

// ProviderID identifies an instance as Kubernetes sees it (Node.spec.providerID,
// Machine.spec.providerID): sim://<region>/<zone>/<instance-id>.
type ProviderID struct {
	Region     string
	Zone       string
	InstanceID string
}

// String formats the provider ID.
func (p ProviderID) String() string {
	return FormatProviderID(p.Region, p.Zone, p.InstanceID)
}

// FormatProviderID returns sim://<region>/<zone>/<instance-id>.
func FormatProviderID(region, zone, instanceID string) string {
	return ProviderIDScheme + "://" + region + "/" + zone + "/" + instanceID
}

// ParseProviderID parses sim://<region>/<zone>/<instance-id>. All three parts must be
// non-empty and free of slashes.
func ParseProviderID(s string) (ProviderID, error) {
	rest, ok := strings.CutPrefix(s, ProviderIDScheme+"://")
	if !ok {
		return ProviderID{}, fmt.Errorf("provider ID %q: want the form %s://<region>/<zone>/<instance-id>", s, ProviderIDScheme)
	}
	parts := strings.Split(rest, "/")
	if len(parts) != 3 || parts[0] == "" || parts[1] == "" || parts[2] == "" {
		return ProviderID{}, fmt.Errorf("provider ID %q: want the form %s://<region>/<zone>/<instance-id>", s, ProviderIDScheme)
	}
	return ProviderID{Region: parts[0], Zone: parts[1], InstanceID: parts[2]}, nil
}
