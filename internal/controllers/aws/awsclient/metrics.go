package awsclient

import (
	"context"
	"errors"
	"time"

	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	"github.com/aws/smithy-go"
	"github.com/aws/smithy-go/middleware"
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// Every attempt at an AWS call (EC2, Elastic Load Balancing) is counted by service, operation
// and outcome, so operators see what the controllers spend of the account's request rate and
// alert on throttling (RequestLimitExceeded) before Machines wait on it.
var (
	awsRequestsTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "machina_aws_api_requests_total",
		Help: `AWS API requests (each attempt, the SDK's retries included) by service, operation and outcome: code is "OK", AWS's error code (for example RequestLimitExceeded, InsufficientInstanceCapacity) or "TransportError" when no answer came.`,
	}, []string{"service", "operation", "code"})
	awsRequestSeconds = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "machina_aws_api_request_duration_seconds",
		Help:    "Latency of AWS API requests by service and operation, one observation per attempt.",
		Buckets: []float64{.01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30},
	}, []string{"service", "operation"})
)

func init() { metrics.Registry.MustRegister(awsRequestsTotal, awsRequestSeconds) }

// countAttempts adds the metrics middleware to a client's stack: first in the deserialize
// step, which runs once per attempt inside the SDK's retry loop, outside the operation's
// deserializer (so an error answer arrives as AWS's API error).
func countAttempts(stack *middleware.Stack) error {
	return stack.Deserialize.Add(middleware.DeserializeMiddlewareFunc("machinaAPIMetrics",
		func(ctx context.Context, in middleware.DeserializeInput, next middleware.DeserializeHandler) (middleware.DeserializeOutput, middleware.Metadata, error) {
			start := time.Now()
			out, md, err := next.HandleDeserialize(ctx, in)
			service, op := awsmiddleware.GetServiceID(ctx), awsmiddleware.GetOperationName(ctx)
			awsRequestsTotal.WithLabelValues(service, op, awsOutcome(err)).Inc()
			awsRequestSeconds.WithLabelValues(service, op).Observe(time.Since(start).Seconds())
			return out, md, err
		}), middleware.Before)
}

// awsOutcome is the code label of one attempt's result.
func awsOutcome(err error) string {
	if err == nil {
		return "OK"
	}
	var ae smithy.APIError
	if errors.As(err, &ae) {
		return ae.ErrorCode()
	}
	return "TransportError"
}
