package client

import (
	"errors"
	"net/http"

	"github.com/machina-dev/machina/internal/cloud/api"
)

// AsError returns the cloud's error inside err, if there is one.
func AsError(err error) (*api.Error, bool) {
	var ae *api.Error
	if errors.As(err, &ae) {
		return ae, true
	}
	return nil, false
}

func status(err error) int {
	if ae, ok := AsError(err); ok {
		if ae.StatusCode != 0 {
			return ae.StatusCode
		}
		return api.StatusFor(ae.Code)
	}
	return 0
}

// IsNotFound means the instance, network or scaling group does not exist (or was purged).
func IsNotFound(err error) bool {
	ae, ok := AsError(err)
	return ok && status(err) == http.StatusNotFound && ae.Code != api.CodeUnknownOperation
}

// IsInvalid means the request was refused as wrong (unknown region/zone/type/image, missing
// token, malformed, user data too large...). InvalidField names the field.
func IsInvalid(err error) bool {
	s := status(err)
	return s == http.StatusBadRequest || s == http.StatusRequestEntityTooLarge
}

// InvalidField returns the request field an error names ("" if none).
func InvalidField(err error) string {
	if ae, ok := AsError(err); ok {
		return ae.Field
	}
	return ""
}

// IsCapacity means the zone or instance type has no capacity (or the network no addresses).
// Retrying the same launch does not help; try elsewhere or later.
func IsCapacity(err error) bool {
	ae, ok := AsError(err)
	return ok && (ae.Code == api.CodeInsufficientCapacity || ae.Code == api.CodeInsufficientAddresses)
}

// IsThrottled means the cloud answered 429 (after the client's retries ran out).
func IsThrottled(err error) bool { return status(err) == http.StatusTooManyRequests }

// IsConflict means idempotency mismatch, name already taken, a dependency still in use.
func IsConflict(err error) bool { return status(err) == http.StatusConflict }

// HasCode reports whether err is a cloud error with the given code.
func HasCode(err error, code string) bool {
	ae, ok := AsError(err)
	return ok && ae.Code == code
}
