package server

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/machina-dev/machina/internal/cloud/api"
)

// operation is one API call: decode, fault scope, execute.
type operation struct {
	// serve decodes body and runs the call; scope is filled before faults are applied.
	serve func(s *Server, ctx context.Context, body []byte) (any, error)
	// injectable says whether error/latency/throttle faults apply.
	injectable bool
}

// faultScope is what a call is about, for scoped faults.
type faultScope struct {
	ids  []string
	tags map[string]string
}

// op builds an operation from a typed handler and a scope function.
func op[Req any](scope func(s *Server, r *Req) faultScope, fn func(s *Server, ctx context.Context, r *Req) (any, error)) operation {
	return operation{
		injectable: scope != nil,
		serve: func(s *Server, ctx context.Context, body []byte) (any, error) {
			var req Req
			if err := decodeStrict(body, &req); err != nil {
				return nil, err
			}
			if scope != nil {
				if err := s.injectFaults(ctx, operationName(ctx), scope(s, &req)); err != nil {
					return nil, err
				}
			}
			return fn(s, ctx, &req)
		},
	}
}

type ctxKey struct{}

func operationName(ctx context.Context) string { v, _ := ctx.Value(ctxKey{}).(string); return v }

func noScope[Req any](*Server, *Req) faultScope { return faultScope{} }

// operations is filled by init: the fault validation it leads to reads it.
var operations map[string]operation

func init() { operations = operationTable() }

func operationTable() map[string]operation {
	return map[string]operation{
		api.OpRunInstances: op(func(s *Server, r *api.RunInstancesRequest) faultScope {
			return faultScope{tags: r.Tags}
		}, (*Server).runInstances),
		api.OpDescribeInstances: op(func(s *Server, r *api.DescribeInstancesRequest) faultScope {
			return faultScope{ids: r.InstanceIDs, tags: r.Tags}
		}, (*Server).describeInstances),
		api.OpTerminateInstances: op(func(s *Server, r *api.TerminateInstancesRequest) faultScope {
			return faultScope{ids: r.InstanceIDs}
		}, (*Server).terminateInstances),
		api.OpDescribeRegions:       op(noScope[api.DescribeRegionsRequest], (*Server).describeRegions),
		api.OpDescribeInstanceTypes: op(noScope[api.DescribeInstanceTypesRequest], (*Server).describeInstanceTypes),
		api.OpDescribeImages:        op(noScope[api.DescribeImagesRequest], (*Server).describeImages),
		api.OpCreateNetwork: op(func(s *Server, r *api.CreateNetworkRequest) faultScope {
			return faultScope{tags: r.Tags}
		}, (*Server).createNetwork),
		api.OpDeleteNetwork:    op(noScope[api.DeleteNetworkRequest], (*Server).deleteNetwork),
		api.OpDescribeNetworks: op(noScope[api.DescribeNetworksRequest], (*Server).describeNetworks),
		api.OpCreateScalingGroup: op(func(s *Server, r *api.CreateScalingGroupRequest) faultScope {
			return faultScope{tags: r.Tags}
		}, (*Server).createScalingGroup),
		api.OpUpdateScalingGroup:    op(noScope[api.UpdateScalingGroupRequest], (*Server).updateScalingGroup),
		api.OpDeleteScalingGroup:    op(noScope[api.DeleteScalingGroupRequest], (*Server).deleteScalingGroup),
		api.OpDescribeScalingGroups: op(noScope[api.DescribeScalingGroupsRequest], (*Server).describeScalingGroups),
		api.OpTerminateInstanceInScalingGroup: op(func(s *Server, r *api.TerminateInstanceInScalingGroupRequest) faultScope {
			return faultScope{ids: []string{r.InstanceID}}
		}, (*Server).terminateInstanceInScalingGroup),
		api.OpSetInstanceHealth: op(func(s *Server, r *api.SetInstanceHealthRequest) faultScope {
			return faultScope{ids: []string{r.InstanceID}}
		}, (*Server).setInstanceHealth),
		// Fault administration and stats are never subject to faults.
		api.OpKillInstances:  op(nil, (*Server).killInstances),
		api.OpCreateFault:    op(nil, (*Server).createFaultOp),
		api.OpDescribeFaults: op(nil, (*Server).describeFaults),
		api.OpDeleteFaults:   op(nil, (*Server).deleteFaults),
		api.OpGetStats:       op(nil, (*Server).getStats),
		api.OpResetStats:     op(nil, (*Server).resetStats),
	}
}

// Handler returns the HTTP handler of the API: POST /v1/<Operation>, GET /v1/stats and
// GET /healthz.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		_, _ = io.WriteString(w, "ok\n")
	})
	mux.HandleFunc("/v1/{op}", s.serveOperation)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		s.writeError(w, r, "", api.Errorf(api.CodeUnknownOperation, "", "no such endpoint %s; operations are POST /v1/<Operation>", r.URL.Path))
	})
	return mux
}

func (s *Server) serveOperation(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("op")
	if name == "stats" && r.Method == http.MethodGet {
		name = api.OpGetStats
		r.Method = http.MethodPost
	}
	o, ok := operations[name]
	if !ok {
		s.writeError(w, r, "", api.Errorf(api.CodeUnknownOperation, "", "unknown operation %q", name))
		return
	}
	s.stats.call(name)
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		s.writeError(w, r, name, api.Errorf(api.CodeMethodNotAllowed, "", "%s takes POST, not %s", name, r.Method))
		return
	}
	defer func() {
		if p := recover(); p != nil {
			s.log.Error(fmt.Errorf("panic: %v", p), "operation panicked", "operation", name)
			s.writeError(w, r, name, api.Errorf(api.CodeInternalError, "", "internal error"))
		}
	}()
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxRequestBytes))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			s.writeError(w, r, name, api.Errorf(api.CodeRequestTooLarge, "", "request body exceeds %d bytes", maxRequestBytes))
			return
		}
		s.writeError(w, r, name, api.Errorf(api.CodeMalformedRequest, "", "reading request body: %v", err))
		return
	}
	ctx := context.WithValue(r.Context(), ctxKey{}, name)
	resp, err := o.serve(s, ctx, body)
	if err != nil {
		s.writeError(w, r, name, err)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Request-Id", s.requestID())
	_ = json.NewEncoder(w).Encode(resp)
}

func (s *Server) requestID() string {
	s.reqMu.Lock()
	defer s.reqMu.Unlock()
	s.reqSeq++
	return fmt.Sprintf("req-%08x", s.reqSeq)
}

// writeError answers with err's code, status and message. Errors that are not *api.Error
// are internal failures (e.g. the state file) and become 500 InternalError.
func (s *Server) writeError(w http.ResponseWriter, r *http.Request, op string, err error) {
	var ae *api.Error
	switch {
	case errors.As(err, &ae):
	case errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded):
		// The caller went away or the server is stopping.
		ae = api.Errorf(api.CodeServiceUnavailable, "", "request cancelled: %v", err)
	default:
		s.log.Error(err, "internal error", "operation", op)
		ae = api.Errorf(api.CodeInternalError, "", "internal error: %v", err)
	}
	out := *ae
	out.RequestID = s.requestID()
	if out.Field != "" && !strings.Contains(out.Message, out.Field) {
		out.Message = out.Field + ": " + out.Message
	}
	status := api.StatusFor(out.Code)
	if out.StatusCode != 0 {
		status = out.StatusCode
	}
	if status == http.StatusTooManyRequests {
		secs := int(out.RetryAfter.Seconds())
		if secs < 1 {
			secs = 1
		}
		w.Header().Set("Retry-After", strconv.Itoa(secs))
	}
	if op != "" {
		s.stats.failure(op, status == http.StatusTooManyRequests)
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Request-Id", out.RequestID)
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(&out)
}

// decodeStrict decodes one JSON object into v, refusing unknown fields and trailing data,
// and turns decoding errors into MalformedRequest naming the field.
func decodeStrict(body []byte, v any) error {
	if len(bytes.TrimSpace(body)) == 0 {
		body = []byte("{}")
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return decodeError(err)
	}
	if dec.More() {
		return api.Errorf(api.CodeMalformedRequest, "", "request body has data after the JSON object")
	}
	var extra json.RawMessage
	if err := dec.Decode(&extra); err != io.EOF {
		return api.Errorf(api.CodeMalformedRequest, "", "request body has data after the JSON object")
	}
	return nil
}

func decodeError(err error) error {
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	var b64 base64.CorruptInputError
	switch {
	case errors.As(err, &syn):
		return api.Errorf(api.CodeMalformedRequest, "", "request body is not valid JSON: %v (at byte %d)", syn, syn.Offset)
	case errors.As(err, &typ):
		return api.Errorf(api.CodeMalformedRequest, typ.Field, "field %s: cannot use a JSON %s as %s", typ.Field, typ.Value, typ.Type)
	case errors.As(err, &b64):
		return api.Errorf(api.CodeMalformedRequest, "userData", "userData must be base64: %v", err)
	case errors.Is(err, io.ErrUnexpectedEOF):
		return api.Errorf(api.CodeMalformedRequest, "", "request body is truncated JSON")
	}
	msg := err.Error()
	if f, ok := strings.CutPrefix(msg, "json: unknown field "); ok {
		f = strings.Trim(f, `"`)
		return api.Errorf(api.CodeMalformedRequest, f, "unknown field %q", f)
	}
	return api.Errorf(api.CodeMalformedRequest, "", "request body: %v", strings.TrimPrefix(msg, "json: "))
}
