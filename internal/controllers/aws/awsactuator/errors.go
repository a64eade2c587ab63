package awsactuator

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/aws/smithy-go"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/machina-dev/machina/internal/controllers/machineapi/machine"
)

// Retry intervals of conditions that are not the cloud's answer to a call.
const (
	// SecretRetry is how soon a missing or incomplete Secret is looked at again.
	SecretRetry = 10 * time.Second
	// UnavailableRetry is how soon a call that failed for another reason is retried.
	UnavailableRetry = 10 * time.Second
)

// Backoff bounds of throttled calls and of launches refused for lack of capacity: each
// further failure of the same Machine doubles the wait, up to MaxBackoff.
const (
	ThrottleBackoff = 2 * time.Second
	CapacityBackoff = 10 * time.Second
	MaxBackoff      = 5 * time.Minute
)

// throttleCodes are the error codes AWS answers when a caller exceeds its request rate.
var throttleCodes = []string{"RequestLimitExceeded", "Throttling", "ThrottlingException", "RequestThrottled",
	"TooManyRequestsException", "PriorRequestNotComplete", "SlowDown"}

// capacityCodes are the error codes of a launch EC2 cannot serve now but may later.
var capacityCodes = []string{"InsufficientInstanceCapacity", "InsufficientHostCapacity", "InsufficientCapacity",
	"InsufficientReservedInstanceCapacity", "InsufficientCapacityOnHost", "InsufficientFreeAddressesInSubnet",
	"MaxSpotInstanceCountExceeded", "SpotMaxPriceTooLow", "InstanceLimitExceeded", "VcpuLimitExceeded"}

// configCodes are refusals of a launch that name something wrong in the request; what
// else starts with "Invalid" is one too (but the credential codes below).
var configCodes = []string{"MissingParameter", "UnknownParameter", "UnsupportedOperation", "Unsupported"}

// credentialCodes are refusals of the caller, fixed by changing the credentials, not the
// Machine: they are retried.
var credentialCodes = []string{"AuthFailure", "UnauthorizedOperation", "InvalidClientTokenId", "SignatureDoesNotMatch",
	"OptInRequired", "Blocked", "ExpiredToken", "InvalidAccessKeyId"}

// paramFields maps EC2 request parameters (as error messages name them) and error code
// prefixes to providerSpec fields; the first match wins.
var paramFields = []struct{ param, field string }{
	{"InvalidAMIID", "ami"}, {"ImageId", "ami"},
	{"InvalidSubnetID", "subnet"}, {"SubnetId", "subnet"},
	{"InvalidGroup", "securityGroups"}, {"SecurityGroup", "securityGroups"},
	{"InvalidKeyPair", "keyName"}, {"KeyName", "keyName"},
	{"InvalidHostID", "placement.host"}, {"Placement.HostId", "placement.host"},
	{"InvalidPlacementGroup", "placementGroupName"}, {"Placement.GroupName", "placementGroupName"},
	{"Placement.PartitionNumber", "placementGroupPartition"},
	{"Placement.AvailabilityZone", "placement.availabilityZone"}, {"Placement.Tenancy", "placement.tenancy"},
	{"Placement.Affinity", "placement.host.affinity"},
	{"InvalidCapacityReservation", "capacityReservationId"}, {"CapacityReservation", "capacityReservationId"},
	{"InvalidBlockDeviceMapping", "blockDevices"}, {"BlockDeviceMapping", "blockDevices"},
	{"IamInstanceProfile", "iamInstanceProfile"}, {"InstanceType", "instanceType"},
	{"InstanceMarketOptions", "spotMarketOptions"}, {"MetadataOptions", "metadataServiceOptions"},
	{"CpuOptions", "cpuOptions"}, {"NetworkInterface", "networkInterfaceType"}, {"UserData", "userDataSecret"},
	{"TagSpecification", "tags"},
}

// APIErrorCode returns the AWS error code of err ("" when err is not an AWS API error).
func APIErrorCode(err error) string {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		return ae.ErrorCode()
	}
	return ""
}

// reason turns an error code into a condition reason (InvalidAMIID.NotFound →
// InvalidAMIIDNotFound).
func reason(code string) string { return strings.ReplaceAll(code, ".", "") }

// backoffs counts each Machine's consecutive throttled or refused calls.
type backoffs struct {
	mu sync.Mutex
	n  map[types.UID]int
}

func (b *backoffs) next(uid types.UID, base time.Duration) time.Duration {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.n == nil {
		b.n = map[types.UID]int{}
	}
	n := b.n[uid]
	b.n[uid] = n + 1
	d := base << min(n, 16)
	return min(d, MaxBackoff)
}

func (b *backoffs) reset(uid types.UID) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.n, uid)
}

// classify turns a failed AWS call into what the Machine controller does about it:
// throttling and capacity are retried with a growing backoff; a call made for the
// providerSpec field at p (nil: for no field) and refused for its parameters fails the
// Machine naming the field (for the whole providerSpec, the field the error names);
// anything else is retried after UnavailableRetry. The EC2 error code is in the reason
// and the message.
func (a *Actuator) classify(uid types.UID, what string, p *field.Path, err error) error {
	var ae smithy.APIError
	if !errors.As(err, &ae) {
		return machine.RequeueAfter(UnavailableRetry, "AWSUnreachable", fmt.Errorf("%s: %w", what, err))
	}
	code := ae.ErrorCode()
	wrapped := fmt.Errorf("%s: EC2 error %s: %s", what, code, ae.ErrorMessage())
	switch {
	case slices.Contains(throttleCodes, code):
		return machine.RequeueAfter(a.backoff.next(uid, ThrottleBackoff), reason(code), wrapped)
	case slices.Contains(capacityCodes, code):
		return machine.RequeueAfter(a.backoff.next(uid, CapacityBackoff), reason(code), wrapped)
	case p != nil && isConfigCode(code):
		at := p.String()
		if f := fieldOf(code, ae.ErrorMessage()); p == specPath && f != "" {
			at += "." + f
		}
		return machine.InvalidConfiguration("%s: Invalid value: %s: EC2 error %s: %s", at, what, code, ae.ErrorMessage())
	}
	return machine.RequeueAfter(UnavailableRetry, reason(code), wrapped)
}

func isConfigCode(code string) bool {
	if slices.Contains(credentialCodes, code) {
		return false
	}
	return strings.HasPrefix(code, "Invalid") || slices.Contains(configCodes, code)
}

// fieldOf names the providerSpec field an EC2 refusal is about.
func fieldOf(code, msg string) string {
	for _, pf := range paramFields {
		if strings.HasPrefix(code, pf.param) {
			return pf.field
		}
	}
	// Messages name the parameter first ("SubnetId: …", "BlockDeviceMapping.2.Ebs.Iops: …").
	head, _, _ := strings.Cut(msg, " ")
	for _, pf := range paramFields {
		if strings.Contains(head, pf.param) {
			return pf.field
		}
	}
	for _, pf := range paramFields {
		if strings.Contains(msg, pf.param) {
			return pf.field
		}
	}
	return ""
}
