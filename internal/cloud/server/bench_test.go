package server_test

import (
	"fmt"
	"testing"

	"github.com/machina-dev/machina/internal/cloud/api"
	"github.com/machina-dev/machina/internal/cloud/server"
)

// BenchmarkRunDescribe measures one RunInstances plus one DescribeInstances (by ID) per
// op, through the real HTTP server, client and state file, with zero delays.
func BenchmarkRunDescribe(b *testing.B) {
	b.Run("fsync", func(b *testing.B) { benchRunDescribe(b, server.Options{}) })
	b.Run("nosync", func(b *testing.B) { benchRunDescribe(b, server.Options{NoSync: true}) })
}

func benchRunDescribe(b *testing.B, opts server.Options) {
	_, c := start(b, opts)
	cx := ctx(b)
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			req := runReq(map[string]string{"bench": "yes"})
			out, err := c.RunInstances(cx, req)
			if err != nil {
				b.Error(err)
				return
			}
			l, err := c.DescribeInstances(cx, api.DescribeInstancesRequest{InstanceIDs: []string{out.Instance.InstanceID}})
			if err != nil || len(l) != 1 {
				b.Error(fmt.Sprint(l, err))
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "run+describe/s")
}
