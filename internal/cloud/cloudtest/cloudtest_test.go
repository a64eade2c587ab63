package cloudtest

import (
	"context"
	"testing"

	"github.com/machina-dev/machina/internal/cloud/api"
	"github.com/machina-dev/machina/internal/cloud/server"
)

func TestStart(t *testing.T) {
	c := Start(t, WithOptions(func(o *server.Options) { o.Seed = 7 }))
	out, err := c.Client.RunInstances(context.Background(), api.RunInstancesRequest{ClientToken: "t", Region: "sim-east-1",
		Zone: "sim-east-1a", InstanceType: "s1.small", Image: "sim-rhcos-9"})
	if err != nil || out.Instance.State != api.StateRunning || c.URL != c.Server.URL() {
		t.Fatalf("RunInstances on a test cloud: %+v, %v", out, err)
	}
}
