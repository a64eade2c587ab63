package api

import (
	"fmt"
	"net/http"
	"time"
)

// Operation names. Each is served as POST /v1/<name>.
const (
	OpRunInstances                    = "RunInstances"
	OpDescribeInstances               = "DescribeInstances"
	OpTerminateInstances              = "TerminateInstances"
	OpKillInstances                   = "KillInstances"
	OpDescribeRegions                 = "DescribeRegions"
	OpDescribeInstanceTypes           = "DescribeInstanceTypes"
	OpDescribeImages                  = "DescribeImages"
	OpCreateNetwork                   = "CreateNetwork"
	OpDeleteNetwork                   = "DeleteNetwork"
	OpDescribeNetworks                = "DescribeNetworks"
	OpCreateScalingGroup              = "CreateScalingGroup"
	OpUpdateScalingGroup              = "UpdateScalingGroup"
	OpDeleteScalingGroup              = "DeleteScalingGroup"
	OpDescribeScalingGroups           = "DescribeScalingGroups"
	OpTerminateInstanceInScalingGroup = "TerminateInstanceInScalingGroup"
	OpSetInstanceHealth               = "SetInstanceHealth"
	OpCreateFault                     = "CreateFault"
	OpDescribeFaults                  = "DescribeFaults"
	OpDeleteFaults                    = "DeleteFaults"
	OpGetStats                        = "GetStats"
	OpResetStats                      = "ResetStats"
)

// Error codes. The HTTP status of each is given by StatusFor.
const (
	// 400: the request is wrong; Field names the offending JSON field.
	CodeMalformedRequest      = "MalformedRequest"
	CodeMissingParameter      = "MissingParameter"
	CodeInvalidParameterValue = "InvalidParameterValue"
	CodeInvalidRegion         = "InvalidRegion"
	CodeInvalidZone           = "InvalidZone"
	CodeInvalidInstanceType   = "InvalidInstanceType"
	CodeInvalidImage          = "InvalidImage"
	CodeUserDataTooLarge      = "UserDataTooLarge"
	// 404 and others: see StatusFor.
	CodeUnknownOperation     = "UnknownOperation"
	CodeInstanceNotFound     = "InstanceNotFound"
	CodeNetworkNotFound      = "NetworkNotFound"
	CodeScalingGroupNotFound = "ScalingGroupNotFound"
	CodeNotInScalingGroup    = "InstanceNotInScalingGroup"
	CodeMethodNotAllowed     = "MethodNotAllowed"
	CodeRequestTooLarge      = "RequestTooLarge"
	CodeIdempotentMismatch   = "IdempotentParameterMismatch"
	CodeAlreadyExists        = "AlreadyExists"
	CodeDependencyViolation  = "DependencyViolation"
	// CodeIncorrectState: the instance's state does not allow the call (stop, start).
	CodeIncorrectState        = "IncorrectInstanceState"
	CodeThrottling            = "Throttling"
	CodeInternalError         = "InternalError"
	CodeServiceUnavailable    = "ServiceUnavailable"
	CodeInsufficientCapacity  = "InsufficientInstanceCapacity"
	CodeInsufficientAddresses = "InsufficientAddressCapacity"
)

// StatusFor returns the HTTP status the server uses for an error code.
func StatusFor(code string) int {
	switch code {
	case CodeMalformedRequest, CodeMissingParameter, CodeInvalidParameterValue, CodeInvalidRegion,
		CodeInvalidZone, CodeInvalidInstanceType, CodeInvalidImage, CodeUserDataTooLarge:
		return http.StatusBadRequest
	case CodeUnknownOperation, CodeInstanceNotFound, CodeNetworkNotFound, CodeScalingGroupNotFound,
		CodeNotInScalingGroup:
		return http.StatusNotFound
	case CodeMethodNotAllowed:
		return http.StatusMethodNotAllowed
	case CodeRequestTooLarge:
		return http.StatusRequestEntityTooLarge
	case CodeIdempotentMismatch, CodeAlreadyExists, CodeDependencyViolation, CodeIncorrectState:
		return http.StatusConflict
	case CodeThrottling:
		return http.StatusTooManyRequests
	case CodeServiceUnavailable, CodeInsufficientCapacity, CodeInsufficientAddresses:
		return http.StatusServiceUnavailable
	}
	return http.StatusInternalServerError
}

// Error is the body of every non-2xx response, and the error the client returns.
type Error struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	// Field is the JSON name of the request field at fault, when there is one
	// (for nested fields a dotted path such as launchTemplate.instanceType).
	Field     string `json:"field,omitempty"`
	RequestID string `json:"requestID,omitempty"`

	// StatusCode and RetryAfter are filled in by the client from the HTTP response.
	StatusCode int           `json:"-"`
	RetryAfter time.Duration `json:"-"`
}

func (e *Error) Error() string {
	s := e.Code + ": " + e.Message
	if e.Field != "" {
		s += " (field " + e.Field + ")"
	}
	return s
}

// Errorf builds an Error with a code, the field at fault (may be empty) and a message.
func Errorf(code, field, format string, args ...any) *Error {
	return &Error{Code: code, Field: field, Message: fmt.Sprintf(format, args...)}
}
