package ec2

import (
	"context"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/machina-dev/machina/internal/cloud/api"
)

// Error is an EC2 (or STS/ELB) error answer: an HTTP status and EC2's error code.
type Error struct {
	Status  int
	Code    string
	Message string
}

func (e *Error) Error() string { return e.Code + ": " + e.Message }

func errorf(status int, code, format string, args ...any) *Error {
	return &Error{Status: status, Code: code, Message: fmt.Sprintf(format, args...)}
}

// badParam is InvalidParameterValue naming the parameter.
func badParam(name, format string, args ...any) *Error {
	return errorf(http.StatusBadRequest, "InvalidParameterValue", "%s: %s", name, fmt.Sprintf(format, args...))
}

// ec2Error turns a model error into EC2's code for it. field maps the model's field names
// to the request's parameter names.
func ec2Error(err error, field map[string]string) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	var ae *api.Error
	if !errors.As(err, &ae) {
		if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
			return errorf(http.StatusServiceUnavailable, "Unavailable", "request cancelled: %v", err)
		}
		return errorf(http.StatusInternalServerError, "InternalError", "An internal error has occurred: %v", err)
	}
	msg := ae.Message
	if p := field[ae.Field]; p != "" {
		msg = p + ": " + strings.TrimPrefix(msg, ae.Field+": ")
	}
	switch ae.Code {
	case api.CodeThrottling:
		return errorf(http.StatusServiceUnavailable, "RequestLimitExceeded", "Request limit exceeded. (%s)", msg)
	case api.CodeInternalError:
		return errorf(http.StatusInternalServerError, "InternalError", "%s", msg)
	case api.CodeServiceUnavailable:
		return errorf(http.StatusServiceUnavailable, "Unavailable", "%s", msg)
	case api.CodeInsufficientCapacity:
		return errorf(http.StatusInternalServerError, "InsufficientInstanceCapacity", "%s", msg)
	case api.CodeInsufficientAddresses:
		return errorf(http.StatusBadRequest, "InsufficientFreeAddressesInSubnet", "%s", msg)
	case api.CodeIdempotentMismatch:
		return errorf(http.StatusBadRequest, "IdempotentParameterMismatch", "%s", msg)
	case api.CodeInstanceNotFound:
		return errorf(http.StatusBadRequest, "InvalidInstanceID.NotFound", "%s", msg)
	case api.CodeIncorrectState:
		return errorf(http.StatusBadRequest, "IncorrectInstanceState", "%s", msg)
	case api.CodeInvalidImage:
		return errorf(http.StatusBadRequest, "InvalidAMIID.NotFound", "%s", msg)
	case api.CodeMissingParameter:
		return errorf(http.StatusBadRequest, "MissingParameter", "%s", msg)
	}
	return errorf(http.StatusBadRequest, "InvalidParameterValue", "%s", msg)
}

// ec2ErrorResponse is EC2's error body.
type ec2ErrorResponse struct {
	Errors    []errorElem `xml:"Errors>Error"`
	RequestID string      `xml:"RequestID"`
}

type errorElem struct {
	Type    string `xml:"Type,omitempty"`
	Code    string `xml:"Code"`
	Message string `xml:"Message"`
}

// queryErrorResponse is the error body of STS and ELB.
type queryErrorResponse struct {
	Error     errorElem `xml:"Error"`
	RequestID string    `xml:"RequestId"`
}

func (f *Front) writeError(w http.ResponseWriter, svc *service, reqID string, err error) {
	e := ec2Error(err, nil)
	if e.Status >= 500 && e.Code == "InternalError" {
		f.log.Error(err, "EC2 front internal error")
	}
	var body any = &ec2ErrorResponse{Errors: []errorElem{{Code: e.Code, Message: e.Message}}, RequestID: reqID}
	if !svc.ec2 {
		typ := "Sender"
		if e.Status >= 500 {
			typ = "Receiver"
		}
		body = &queryErrorResponse{Error: errorElem{Type: typ, Code: e.Code, Message: e.Message}, RequestID: reqID}
	}
	w.Header().Set("X-Amzn-Requestid", reqID)
	name := "Response"
	if !svc.ec2 {
		name = "ErrorResponse"
	}
	writeXML(w, e.Status, body, xml.StartElement{Name: xml.Name{Local: name}})
}

// writeResult wraps an action's result in the service's envelope: EC2 answers
// <ActionResponse xmlns=…><requestId/>fields…</ActionResponse> (results embed head), STS
// and ELB answer <ActionResponse><ActionResult>fields…</ActionResult><ResponseMetadata>.
func (f *Front) writeResult(w http.ResponseWriter, c *call, result any) {
	w.Header().Set("X-Amzn-Requestid", c.reqID)
	name := xml.Name{Local: c.action + "Response"}
	ns := []xml.Attr{{Name: xml.Name{Local: "xmlns"}, Value: c.svc.ns}}
	if c.svc.ec2 {
		if h, ok := result.(interface{ setRequestID(string) }); ok {
			h.setRequestID(c.reqID)
		}
		writeXML(w, http.StatusOK, result, xml.StartElement{Name: name, Attr: ns})
		return
	}
	writeXML(w, http.StatusOK, &queryEnvelope{Result: result, ResultName: c.action + "Result", RequestID: c.reqID},
		xml.StartElement{Name: name, Attr: ns})
}

// head starts every EC2 result.
type head struct {
	RequestID string `xml:"requestId"`
}

func (h *head) setRequestID(id string) { h.RequestID = id }

type queryEnvelope struct {
	Result     any
	ResultName string
	RequestID  string
}

// MarshalXML writes <ActionResult> and <ResponseMetadata> inside start.
func (q *queryEnvelope) MarshalXML(enc *xml.Encoder, start xml.StartElement) error {
	if err := enc.EncodeToken(start); err != nil {
		return err
	}
	if err := enc.EncodeElement(q.Result, xml.StartElement{Name: xml.Name{Local: q.ResultName}}); err != nil {
		return err
	}
	meta := struct {
		RequestID string `xml:"RequestId"`
	}{q.RequestID}
	if err := enc.EncodeElement(meta, xml.StartElement{Name: xml.Name{Local: "ResponseMetadata"}}); err != nil {
		return err
	}
	return enc.EncodeToken(start.End())
}

func writeXML(w http.ResponseWriter, status int, body any, start xml.StartElement) {
	w.Header().Set("Content-Type", "text/xml;charset=UTF-8")
	w.WriteHeader(status)
	_, _ = io.WriteString(w, xml.Header)
	enc := xml.NewEncoder(w)
	_ = enc.EncodeElement(body, start)
	_ = enc.Flush()
}
