package ec2_test

import (
	"fmt"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsec2 "github.com/aws/aws-sdk-go-v2/service/ec2"

	"github.com/machina-dev/machina/internal/cloud/api"
	"github.com/machina-dev/machina/internal/cloud/cloudtest"
	"github.com/machina-dev/machina/internal/cloud/server"
)

// BenchmarkRunDescribe measures one RunInstances plus one DescribeInstances (by ID) per
// op through aws-sdk-go-v2 (SigV4, XML) against the EC2 front, with zero delays: the
// counterpart of the JSON API's BenchmarkRunDescribe in internal/cloud/server.
func BenchmarkRunDescribe(b *testing.B) {
	b.Run("fsync", func(b *testing.B) {
		benchRunDescribe(b, cloudtest.WithOptions(func(o *server.Options) { o.NoSync = false }))
	})
	b.Run("nosync", func(b *testing.B) { benchRunDescribe(b) })
}

func benchRunDescribe(b *testing.B, opts ...cloudtest.Option) {
	// A /9 subnet, so that no run of the benchmark exhausts the addresses.
	cat := api.DefaultAWSCatalogue()
	cat.AWS.VPC.CIDR, cat.AWS.Subnets = "10.0.0.0/8", []api.AWSSubnet{{ID: privateA, Zone: "us-east-1a", CIDR: "10.0.0.0/9"}}
	opts = append(opts, cloudtest.WithOptions(func(o *server.Options) { o.Catalogue = &api.Catalogue{AWS: cat.AWS} }))
	e := start(b, opts...)
	cx := ctx(b)
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			out, err := e.ec2.RunInstances(cx, runInput(map[string]string{"bench": "yes"}))
			if err != nil {
				b.Error(err)
				return
			}
			id := aws.ToString(out.Instances[0].InstanceId)
			d, err := e.ec2.DescribeInstances(cx, &awsec2.DescribeInstancesInput{InstanceIds: []string{id}})
			if err != nil || len(d.Reservations) != 1 {
				b.Error(fmt.Sprint(d, err))
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "run+describe/s")
}
