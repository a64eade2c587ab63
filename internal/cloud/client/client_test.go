package client

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/machina-dev/machina/internal/cloud/api"
)

// scripted serves the given responses in order (the last one repeats) and counts calls.
func scripted(t *testing.T, responses ...func(w http.ResponseWriter)) (*Client, *atomic.Int32) {
	t.Helper()
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := int(calls.Add(1)) - 1
		if n >= len(responses) {
			n = len(responses) - 1
		}
		responses[n](w)
	}))
	t.Cleanup(srv.Close)
	c, err := New(srv.URL, Options{MinBackoff: time.Millisecond, MaxBackoff: 5 * time.Millisecond, MaxRetries: 4})
	if err != nil {
		t.Fatal(err)
	}
	return c, &calls
}

func fail(status int, code, field string) func(w http.ResponseWriter) {
	return func(w http.ResponseWriter) {
		w.WriteHeader(status)
		_ = json.NewEncoder(w).Encode(api.Error{Code: code, Message: "m", Field: field})
	}
}

func ok(v any) func(w http.ResponseWriter) {
	return func(w http.ResponseWriter) { _ = json.NewEncoder(w).Encode(v) }
}

func TestRetriesServerErrors(t *testing.T) {
	c, calls := scripted(t, fail(500, api.CodeInternalError, ""), fail(503, api.CodeServiceUnavailable, ""),
		ok(api.DescribeRegionsResponse{Regions: []api.Region{{Name: "r"}}}))
	regions, err := c.DescribeRegions(context.Background())
	if err != nil || len(regions) != 1 || calls.Load() != 3 {
		t.Fatalf("got %v, %v after %d calls", regions, err, calls.Load())
	}
}

func TestGivesUpAfterMaxRetries(t *testing.T) {
	c, calls := scripted(t, fail(500, api.CodeInternalError, ""))
	_, err := c.DescribeRegions(context.Background())
	if !HasCode(err, api.CodeInternalError) || calls.Load() != 5 {
		t.Fatalf("err %v after %d calls, want InternalError after 5", err, calls.Load())
	}
}

func TestDoesNotRetryClientErrorsOrCapacity(t *testing.T) {
	for _, tc := range []struct {
		status      int
		code, field string
		is          func(error) bool
	}{
		{400, api.CodeInvalidZone, "zone", IsInvalid},
		{404, api.CodeInstanceNotFound, "instanceIDs", IsNotFound},
		{409, api.CodeIdempotentMismatch, "clientToken", IsConflict},
		{503, api.CodeInsufficientCapacity, "zone", IsCapacity},
	} {
		c, calls := scripted(t, fail(tc.status, tc.code, tc.field))
		_, err := c.RunInstances(context.Background(), api.RunInstancesRequest{})
		if !tc.is(err) || InvalidField(err) != tc.field || calls.Load() != 1 {
			t.Errorf("%s: err %v (field %q) after %d calls", tc.code, err, InvalidField(err), calls.Load())
		}
		if ae, _ := AsError(err); ae.StatusCode != tc.status {
			t.Errorf("%s: status %d", tc.code, ae.StatusCode)
		}
	}
}

func TestThrottledWaitsForRetryAfter(t *testing.T) {
	throttle := func(w http.ResponseWriter) {
		w.Header().Set("Retry-After", "1")
		fail(429, api.CodeThrottling, "")(w)
	}
	c, calls := scripted(t, throttle, ok(api.DescribeFaultsResponse{}))
	began := time.Now()
	if _, err := c.DescribeFaults(context.Background()); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(began); d < time.Second || calls.Load() != 2 {
		t.Errorf("retried after %s (%d calls), want after Retry-After 1s", d, calls.Load())
	}
}

func TestNonJSONErrorBody(t *testing.T) {
	c, _ := scripted(t, func(w http.ResponseWriter) {
		w.WriteHeader(http.StatusBadRequest)
		_, _ = w.Write([]byte("plain text"))
	})
	_, err := c.DescribeFaults(context.Background())
	if !HasCode(err, "HTTP400") || !IsInvalid(err) {
		t.Errorf("err = %v", err)
	}
}

func TestConnectionRefusedRetriedUntilDeadline(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	c, err := New("http://"+addr, Options{MinBackoff: 20 * time.Millisecond, MaxBackoff: 20 * time.Millisecond, MaxRetries: 1000})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	began := time.Now()
	_, err = c.DescribeFaults(ctx)
	if err == nil {
		t.Fatal("call to a closed port succeeded")
	}
	if d := time.Since(began); d > 2*time.Second {
		t.Errorf("gave up after %s, deadline was 300ms", d)
	}
}

func TestNewRejectsBadURL(t *testing.T) {
	for _, u := range []string{"", "127.0.0.1:80", "ftp://x", "http://"} {
		if _, err := New(u, Options{}); err == nil {
			t.Errorf("New(%q) succeeded", u)
		}
	}
}

func TestMetricsCountEveryAttemptByOutcome(t *testing.T) {
	before := func(code string) float64 {
		return testutil.ToFloat64(requestsTotal.WithLabelValues(api.OpDescribeRegions, code))
	}
	okBefore, throttledBefore := before("OK"), before(api.CodeThrottling)
	c, _ := scripted(t, fail(429, api.CodeThrottling, ""), fail(429, api.CodeThrottling, ""), //nolint:gocritic // two throttled answers in a row are the scenario
		ok(api.DescribeRegionsResponse{Regions: []api.Region{{Name: "r"}}}))
	if _, err := c.DescribeRegions(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := before(api.CodeThrottling) - throttledBefore; got != 2 {
		t.Errorf("throttled attempts counted: %v, want 2", got)
	}
	if got := before("OK") - okBefore; got != 1 {
		t.Errorf("successful attempts counted: %v, want 1", got)
	}
	if n := testutil.CollectAndCount(requestSeconds, "machina_cloud_api_request_duration_seconds"); n == 0 {
		t.Error("no latency observed")
	}
}

func TestMetricsTransportError(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close() // nothing listens there now
	c, err := New("http://"+addr, Options{MaxRetries: -1})
	if err != nil {
		t.Fatal(err)
	}
	before := testutil.ToFloat64(requestsTotal.WithLabelValues(api.OpDescribeRegions, "TransportError"))
	if _, err := c.DescribeRegions(context.Background()); err == nil {
		t.Fatal("a call to a closed port succeeded")
	}
	if got := testutil.ToFloat64(requestsTotal.WithLabelValues(api.OpDescribeRegions, "TransportError")) - before; got != 1 {
		t.Errorf("transport errors counted: %v, want 1", got)
	}
}
