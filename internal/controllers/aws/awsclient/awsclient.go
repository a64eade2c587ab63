// Package awsclient builds the aws-sdk-go-v2 clients of machina's AWS controllers: one set per
// region and credential, from the SDK's shared configuration loaded once, with the endpoints
// and default credentials machina was started with and a retry policy for controllers that
// back off per object themselves.
package awsclient

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	corev1 "k8s.io/api/core/v1"
)

// The keys of a credentials Secret, as OpenShift's cloud credential operator writes them.
const (
	SecretAccessKeyID     = "aws_access_key_id"
	SecretSecretAccessKey = "aws_secret_access_key" //nolint:gosec // a key name, not a credential
)

// DefaultMaxAttempts bounds the SDK's own retries of one call: the controllers retry by
// requeueing with a backoff.
const DefaultMaxAttempts = 2

// Config is how the controllers reach AWS.
type Config struct {
	// EC2Endpoint, ELBEndpoint and ELBv2Endpoint override the endpoint URLs of EC2 and of
	// classic and v2 Elastic Load Balancing; empty leaves them to the SDK's standard
	// resolution (AWS_ENDPOINT_URL_EC2, AWS_ENDPOINT_URL, the shared config, the region).
	EC2Endpoint, ELBEndpoint, ELBv2Endpoint string
	// Credentials sign calls for objects whose providerSpec names no credentialsSecret; nil
	// means the SDK's default chain (environment, shared files, web identity, IMDS).
	Credentials aws.CredentialsProvider
	// MaxAttempts bounds the SDK's retries of one call (DefaultMaxAttempts when 0).
	MaxAttempts int
}

// Endpoint is an endpoint override for a service's options: nil (the SDK's resolution) for "".
func Endpoint(url string) *string {
	if url == "" {
		return nil
	}
	return aws.String(url)
}

// Cache holds the clients T of each region and credential; build makes them from an
// aws.Config carrying the region, the credentials and the retry policy. It is safe for
// concurrent use.
type Cache[T any] struct {
	cfg   Config
	build func(aws.Config) T
	// Load reads the SDK's shared configuration (awsconfig.LoadDefaultConfig); tests may
	// replace it before the first Get.
	Load func(ctx context.Context) (aws.Config, error)

	mu    sync.Mutex
	base  *aws.Config
	byKey map[string]T
}

// NewCache returns an empty cache for cfg.
func NewCache[T any](cfg Config, build func(aws.Config) T) *Cache[T] {
	if cfg.MaxAttempts == 0 {
		cfg.MaxAttempts = DefaultMaxAttempts
	}
	return &Cache[T]{cfg: cfg, build: build, byKey: map[string]T{},
		Load: func(ctx context.Context) (aws.Config, error) { return awsconfig.LoadDefaultConfig(ctx) }}
}

// Config is the configuration the cache was made with (MaxAttempts defaulted).
func (c *Cache[T]) Config() Config { return c.cfg }

// Get returns the clients of region signing with creds (the configured default when nil),
// loading the SDK's shared configuration on first use.
func (c *Cache[T]) Get(ctx context.Context, region string, creds *aws.Credentials) (T, error) {
	key := region + "\x00default"
	if creds != nil {
		sum := sha256.Sum256([]byte(creds.AccessKeyID + "\x00" + creds.SecretAccessKey + "\x00" + creds.SessionToken))
		key = region + "\x00" + hex.EncodeToString(sum[:])
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if t, ok := c.byKey[key]; ok {
		return t, nil
	}
	if c.base == nil {
		base, err := c.Load(ctx)
		if err != nil {
			var zero T
			return zero, fmt.Errorf("loading the AWS SDK configuration: %w", err)
		}
		c.base = &base
	}
	t := c.build(c.configFor(region, creds))
	c.byKey[key] = t
	return t, nil
}

// configFor is the base configuration with region, credentials and retry policy set.
func (c *Cache[T]) configFor(region string, creds *aws.Credentials) aws.Config {
	cfg := c.base.Copy()
	cfg.Region = region
	switch {
	case creds != nil:
		cfg.Credentials = credentials.NewStaticCredentialsProvider(creds.AccessKeyID, creds.SecretAccessKey, creds.SessionToken)
	case c.cfg.Credentials != nil:
		cfg.Credentials = c.cfg.Credentials
	}
	cfg.APIOptions = append(slices.Clone(cfg.APIOptions), countAttempts)
	attempts := c.cfg.MaxAttempts
	cfg.Retryer = func() aws.Retryer {
		return retry.NewStandard(func(o *retry.StandardOptions) {
			o.MaxAttempts, o.MaxBackoff = attempts, time.Second
			// The controllers back off per object; the SDK's client-wide retry quota would
			// turn one throttled object's retries into errors for every other object.
			o.RateLimiter = ratelimit.None
		})
	}
	return cfg
}

// FromSecret reads the access key pair of a credentials Secret; ok is false when either key
// is missing or empty.
func FromSecret(s *corev1.Secret) (creds *aws.Credentials, ok bool) {
	id, secret := string(s.Data[SecretAccessKeyID]), string(s.Data[SecretSecretAccessKey])
	if id == "" || secret == "" {
		return nil, false
	}
	return &aws.Credentials{AccessKeyID: id, SecretAccessKey: secret, Source: "Secret " + s.Namespace + "/" + s.Name}, true
}
