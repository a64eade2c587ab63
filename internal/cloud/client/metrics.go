package client

import (
	"errors"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// Every attempt at a cloud call is counted, so operators see throttling, capacity shortages
// and outages of the cloud API (retries included) on the manager's metrics endpoint.
var (
	requestsTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "machina_cloud_api_requests_total",
		Help: `Cloud API requests by operation and outcome: code is "OK", the cloud's error code (for example Throttling, InsufficientInstanceCapacity) or "TransportError" when no answer came.`,
	}, []string{"operation", "code"})
	requestSeconds = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "machina_cloud_api_request_duration_seconds",
		Help:    "Latency of cloud API requests by operation, one observation per attempt.",
		Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30},
	}, []string{"operation"})
)

func init() { metrics.Registry.MustRegister(requestsTotal, requestSeconds) }

// outcome is the code label of one attempt's result.
func outcome(err error) string {
	if err == nil {
		return "OK"
	}
	if ae, ok := AsError(err); ok {
		return ae.Code
	}
	var te *transportError
	if errors.As(err, &te) {
		return "TransportError"
	}
	return "ClientError" // encoding or decoding on this side
}

func observe(op string, start time.Time, err error) {
	requestsTotal.WithLabelValues(op, outcome(err)).Inc()
	requestSeconds.WithLabelValues(op).Observe(time.Since(start).Seconds())
}
