package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/machina-dev/machina/internal/cloud/api"
	cloudclient "github.com/machina-dev/machina/internal/cloud/client"
)

// faultSpecs is the -fault flag: cloud faults in force during mapi-scale's scale-up, in
// machina cloud --fault's syntax (api.FaultSpecHelp), e.g. "throttle,rate=0.05": 5 % of
// the cloud's calls, EC2's included, answered RequestLimitExceeded.
var faultSpecs faultList

type faultList []api.Fault

func (l *faultList) String() string { return fmt.Sprint(len(*l), " faults") }
func (l *faultList) Set(s string) error {
	f, err := api.ParseFaultSpec(s)
	if err != nil {
		return err
	}
	*l = append(*l, f)
	return nil
}

// injectFaults creates the -fault faults in e's cloud through its API; the function it
// returns describes, at the end, what they did: the calls answered with an injected
// throttle or error since now.
func injectFaults(ctx context.Context, e *env) (func() string, error) {
	if len(faultSpecs) == 0 {
		return func() string { return "" }, nil
	}
	c, err := cloudclient.New(e.cloud.URL(), cloudclient.Options{})
	if err != nil {
		return nil, err
	}
	for _, f := range faultSpecs {
		if _, err := c.CreateFault(ctx, f); err != nil {
			return nil, fmt.Errorf("-fault %s: %w", f.Kind, err)
		}
	}
	before := e.cloud.Stats()
	return func() string {
		after := e.cloud.Stats()
		var calls, throttled, failed int64
		var by []string
		for op, st := range after.Operations {
			b := before.Operations[op]
			calls += st.Calls - b.Calls
			throttled += st.Throttled - b.Throttled
			failed += st.Errors - b.Errors
			if d := st.Throttled - b.Throttled; d > 0 {
				by = append(by, fmt.Sprintf("%s %d", op, d))
			}
		}
		return fmt.Sprintf("injected faults: %d of %d cloud calls throttled (%.1f %%: %s), %d failed in all",
			throttled, calls, 100*float64(throttled)/float64(max(calls, 1)), strings.Join(by, ", "), failed)
	}, nil
}
