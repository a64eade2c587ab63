package awsmachineset

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/smithy-go"
	"k8s.io/apimachinery/pkg/util/cache"

	"github.com/machina-dev/machina/internal/cloud/api"
	"github.com/machina-dev/machina/internal/controllers/aws/awsclient"
)

// DefaultCacheTTL is how long an instance type's description is reused. EC2 does not change
// an instance type's vCPUs or memory, so this only bounds how stale a corrected catalogue
// (the simulated cloud's) can be.
const DefaultCacheTTL = time.Hour

// cacheSize bounds the number of (region, instance type) answers kept.
const cacheSize = 512

// codeInvalidInstanceType is EC2's error code for an instance type that does not exist.
const codeInvalidInstanceType = "InvalidInstanceType"

// InstanceTypes describes EC2 instance types through aws-sdk-go-v2's EC2 client and caches
// the answers per region. It is safe for concurrent use; the zero value is not: build it
// with NewInstanceTypes.
type InstanceTypes struct {
	cfg     Config
	cache   *cache.LRUExpireCache
	clients *awsclient.Cache[*ec2.Client]
}

// Config is how InstanceTypes reaches EC2; it is configured like the Machine API AWS
// actuator's (awsactuator.Config).
type Config struct {
	// EC2Endpoint overrides the EC2 endpoint URL (machina's --aws-endpoint); empty leaves it
	// to the SDK's standard resolution (AWS_ENDPOINT_URL_EC2, AWS_ENDPOINT_URL, the shared
	// config, the region).
	EC2Endpoint string
	// Credentials sign calls for MachineSets whose providerSpec names no credentialsSecret;
	// nil means the SDK's default chain (environment, shared files, web identity, IMDS).
	Credentials aws.CredentialsProvider
	// MaxAttempts bounds the SDK's own retries of one call; default 2, since the controller
	// retries by requeueing with a backoff.
	MaxAttempts int
	// CacheTTL is how long an answer is reused; DefaultCacheTTL when 0.
	CacheTTL time.Duration
}

// NewInstanceTypes returns a lookup configured by cfg.
func NewInstanceTypes(cfg Config) *InstanceTypes {
	if cfg.MaxAttempts == 0 {
		cfg.MaxAttempts = 2
	}
	if cfg.CacheTTL == 0 {
		cfg.CacheTTL = DefaultCacheTTL
	}
	clients := awsclient.NewCache(awsclient.Config{EC2Endpoint: cfg.EC2Endpoint, Credentials: cfg.Credentials, MaxAttempts: cfg.MaxAttempts},
		func(c aws.Config) *ec2.Client {
			return ec2.NewFromConfig(c, func(o *ec2.Options) { o.BaseEndpoint = awsclient.Endpoint(cfg.EC2Endpoint) })
		})
	return &InstanceTypes{cfg: cfg, cache: cache.NewLRUExpireCache(cacheSize), clients: clients}
}

// Describe returns what instance type name offers in region, asking EC2 (signed with creds,
// the configured default when nil) unless a recent answer is cached. An instance type EC2
// does not know fails with an error IsInvalidInstanceType recognises.
func (it *InstanceTypes) Describe(ctx context.Context, region, name string, creds *aws.Credentials) (api.InstanceType, error) {
	key := region + "/" + name
	if v, ok := it.cache.Get(key); ok {
		return v.(api.InstanceType), nil
	}
	c, err := it.clients.Get(ctx, region, creds)
	if err != nil {
		return api.InstanceType{}, err
	}
	out, err := c.DescribeInstanceTypes(ctx, &ec2.DescribeInstanceTypesInput{InstanceTypes: []types.InstanceType{types.InstanceType(name)}})
	if err != nil {
		return api.InstanceType{}, err
	}
	i := slices.IndexFunc(out.InstanceTypes, func(t types.InstanceTypeInfo) bool { return string(t.InstanceType) == name })
	if i < 0 {
		return api.InstanceType{}, &smithy.GenericAPIError{Code: codeInvalidInstanceType,
			Message: fmt.Sprintf("DescribeInstanceTypes did not return %s", name)}
	}
	t := capacityOf(out.InstanceTypes[i])
	it.cache.Add(key, t, it.cfg.CacheTTL)
	return t, nil
}

// IsInvalidInstanceType reports whether err is EC2's answer that an instance type does not
// exist.
func IsInvalidInstanceType(err error) bool {
	return errorCode(err) == codeInvalidInstanceType
}

// errorCode is the EC2 error code of err ("" when it is not an EC2 answer).
func errorCode(err error) string {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		return ae.ErrorCode()
	}
	return ""
}

// capacityOf is what a Node of the instance type offers, in the catalogue's terms: vCPUs,
// memory, the GPUs of every GPU device, and the architecture (arm64 when the type runs
// arm64, else amd64).
func capacityOf(t types.InstanceTypeInfo) api.InstanceType {
	out := api.InstanceType{Name: string(t.InstanceType), Architecture: "amd64"}
	if t.VCpuInfo != nil {
		out.VCPU = int(aws.ToInt32(t.VCpuInfo.DefaultVCpus))
	}
	if t.MemoryInfo != nil {
		out.MemoryMiB = aws.ToInt64(t.MemoryInfo.SizeInMiB)
	}
	if t.GpuInfo != nil {
		for _, g := range t.GpuInfo.Gpus {
			out.GPU += int(aws.ToInt32(g.Count))
		}
	}
	if t.ProcessorInfo != nil && slices.Contains(t.ProcessorInfo.SupportedArchitectures, types.ArchitectureTypeArm64) {
		out.Architecture = "arm64"
	}
	return out
}
