package awsactuator

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	elb "github.com/aws/aws-sdk-go-v2/service/elasticloadbalancing"
	elbv2 "github.com/aws/aws-sdk-go-v2/service/elasticloadbalancingv2"
	configv1 "github.com/openshift/api/config/v1"
	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/machina-dev/machina/internal/controllers/machineapi/machine"
)

// The keys of a credentials Secret, as OpenShift's cloud credential operator writes them.
const (
	SecretAccessKeyID     = "aws_access_key_id"     //nolint:gosec // a key name, not a credential
	SecretSecretAccessKey = "aws_secret_access_key" //nolint:gosec // a key name, not a credential
)

// InfrastructureName is the name of the cluster's config.openshift.io Infrastructure.
const InfrastructureName = "cluster"

// ClusterNameLabel names a Machine's cluster (its infrastructure name) on OpenShift.
const ClusterNameLabel = "machine.openshift.io/cluster-api-cluster"

// Config is how the actuator reaches AWS.
type Config struct {
	// EC2Endpoint, ELBEndpoint and ELBv2Endpoint override the endpoint URLs of EC2 and of
	// classic and v2 Elastic Load Balancing; empty leaves them to the SDK's standard
	// resolution (AWS_ENDPOINT_URL_EC2, AWS_ENDPOINT_URL, the shared config, the region).
	EC2Endpoint, ELBEndpoint, ELBv2Endpoint string
	// Credentials sign calls for Machines whose providerSpec names no credentialsSecret; nil
	// means the SDK's default chain (environment, shared files, web identity, IMDS).
	Credentials aws.CredentialsProvider
	// MaxAttempts bounds the SDK's own retries of one call; default 2, since the Machine
	// controller retries by requeueing with a backoff.
	MaxAttempts int
}

// clients are the AWS clients of one region and credential.
type clients struct {
	region string
	ec2    *ec2.Client
	elb    *elb.Client
	elbv2  *elbv2.Client
}

// factory builds clients per region and credential, loading the SDK's shared configuration
// once.
type factory struct {
	cfg Config

	mu     sync.Mutex
	base   *aws.Config
	byKey  map[string]*clients
	loadFn func(ctx context.Context) (aws.Config, error)
}

func newFactory(cfg Config) *factory {
	if cfg.MaxAttempts == 0 {
		cfg.MaxAttempts = 2
	}
	return &factory{cfg: cfg, byKey: map[string]*clients{},
		loadFn: func(ctx context.Context) (aws.Config, error) { return awsconfig.LoadDefaultConfig(ctx) }}
}

// get returns the clients for region, signing with creds (the default when nil).
func (f *factory) get(ctx context.Context, region string, creds *aws.Credentials) (*clients, error) {
	key := region + "\x00default"
	if creds != nil {
		sum := sha256.Sum256([]byte(creds.AccessKeyID + "\x00" + creds.SecretAccessKey + "\x00" + creds.SessionToken))
		key = region + "\x00" + hex.EncodeToString(sum[:])
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if c, ok := f.byKey[key]; ok {
		return c, nil
	}
	if f.base == nil {
		base, err := f.loadFn(ctx)
		if err != nil {
			return nil, machine.RequeueAfter(UnavailableRetry, "AWSConfigError", fmt.Errorf("loading the AWS SDK configuration: %w", err))
		}
		f.base = &base
	}
	cfg := f.base.Copy()
	cfg.Region = region
	switch {
	case creds != nil:
		cfg.Credentials = credentials.NewStaticCredentialsProvider(creds.AccessKeyID, creds.SecretAccessKey, creds.SessionToken)
	case f.cfg.Credentials != nil:
		cfg.Credentials = f.cfg.Credentials
	}
	cfg.Retryer = func() aws.Retryer {
		return retry.NewStandard(func(o *retry.StandardOptions) {
			o.MaxAttempts, o.MaxBackoff = f.cfg.MaxAttempts, time.Second
			// The controller backs off per Machine; the SDK's client-wide retry quota would
			// turn one throttled Machine's retries into errors for every other Machine.
			o.RateLimiter = ratelimit.None
		})
	}
	c := &clients{region: region,
		ec2: ec2.NewFromConfig(cfg, func(o *ec2.Options) {
			if e := endpoint(f.cfg.EC2Endpoint); e != nil {
				o.BaseEndpoint = e
			}
		}),
		elb: elb.NewFromConfig(cfg, func(o *elb.Options) {
			if e := endpoint(f.cfg.ELBEndpoint); e != nil {
				o.BaseEndpoint = e
			}
		}),
		elbv2: elbv2.NewFromConfig(cfg, func(o *elbv2.Options) {
			if e := endpoint(f.cfg.ELBv2Endpoint); e != nil {
				o.BaseEndpoint = e
			}
		}),
	}
	f.byKey[key] = c
	return c, nil
}

func endpoint(s string) *string {
	if s == "" {
		return nil
	}
	return aws.String(s)
}

// cluster is what the actuator needs to know about the cluster a Machine belongs to.
type cluster struct {
	region    string
	infraName string
	// tags are the Infrastructure's resource tags, put on every instance.
	tags map[string]string
}

// clusterOf reads the region and infrastructure name from the cluster's Infrastructure
// (status.platformStatus.aws), a providerSpec placement.region taking precedence; without
// an Infrastructure the infrastructure name is the Machine's ClusterNameLabel.
func (a *Actuator) clusterOf(ctx context.Context, m *machinev1beta1.Machine, ps *machinev1beta1.AWSMachineProviderConfig) (cluster, error) {
	cl := cluster{region: ps.Placement.Region, infraName: m.Labels[ClusterNameLabel], tags: map[string]string{}}
	infra := &configv1.Infrastructure{}
	err := a.Client.Get(ctx, client.ObjectKey{Name: InfrastructureName}, infra)
	switch {
	case apierrors.IsNotFound(err):
	case err != nil:
		return cl, fmt.Errorf("reading Infrastructure %s: %w", InfrastructureName, err)
	default:
		if infra.Status.InfrastructureName != "" {
			cl.infraName = infra.Status.InfrastructureName
		}
		if st := infra.Status.PlatformStatus; st != nil && st.AWS != nil {
			if cl.region == "" {
				cl.region = st.AWS.Region
			}
			for _, t := range st.AWS.ResourceTags {
				cl.tags[t.Key] = t.Value
			}
		}
	}
	if cl.region == "" {
		return cl, machine.InvalidConfiguration("%s: Required value: no region: neither the providerSpec nor Infrastructure %s (status.platformStatus.aws.region) names one",
			specPath.Child("placement", "region"), InfrastructureName)
	}
	return cl, nil
}

// credentialsOf reads the Machine's credentialsSecret (nil credentials when it names none).
func (a *Actuator) credentialsOf(ctx context.Context, m *machinev1beta1.Machine, ps *machinev1beta1.AWSMachineProviderConfig) (*aws.Credentials, error) {
	ref := ps.CredentialsSecret
	if ref == nil || ref.Name == "" {
		return nil, nil
	}
	p := specPath.Child("credentialsSecret")
	data, err := a.secret(ctx, m.Namespace, ref.Name, p, "CredentialsSecret")
	if err != nil {
		return nil, err
	}
	id, secret := string(data[SecretAccessKeyID]), string(data[SecretSecretAccessKey])
	if id == "" || secret == "" {
		return nil, machine.RequeueAfter(SecretRetry, "CredentialsSecretInvalid",
			fmt.Errorf("%s: Secret %s/%s needs the keys %s and %s", p, m.Namespace, ref.Name, SecretAccessKeyID, SecretSecretAccessKey))
	}
	return &aws.Credentials{AccessKeyID: id, SecretAccessKey: secret, Source: "Secret " + m.Namespace + "/" + ref.Name}, nil
}

// userData reads the userData key of the Machine's userDataSecret (nil when it names none).
func (a *Actuator) userData(ctx context.Context, m *machinev1beta1.Machine, ps *machinev1beta1.AWSMachineProviderConfig) ([]byte, error) {
	ref := ps.UserDataSecret
	if ref == nil || ref.Name == "" {
		return nil, nil
	}
	p := specPath.Child("userDataSecret")
	data, err := a.secret(ctx, m.Namespace, ref.Name, p, "UserDataSecret")
	if err != nil {
		return nil, err
	}
	ud, ok := data["userData"]
	if !ok {
		return nil, machine.RequeueAfter(SecretRetry, "UserDataSecretInvalid",
			fmt.Errorf("%s: Secret %s/%s has no userData key", p, m.Namespace, ref.Name))
	}
	return ud, nil
}

// secret reads a Secret; a missing one is retried (it may be created later).
func (a *Actuator) secret(ctx context.Context, ns, name string, p fmt.Stringer, what string) (map[string][]byte, error) {
	var s corev1.Secret
	err := a.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &s)
	if apierrors.IsNotFound(err) {
		return nil, machine.RequeueAfter(SecretRetry, what+"NotFound", fmt.Errorf("%s: Secret %s/%s not found", p, ns, name))
	}
	if err != nil {
		return nil, fmt.Errorf("reading Secret %s/%s: %w", ns, name, err)
	}
	return s.Data, nil
}
