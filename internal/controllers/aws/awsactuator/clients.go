package awsactuator

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	elb "github.com/aws/aws-sdk-go-v2/service/elasticloadbalancing"
	elbv2 "github.com/aws/aws-sdk-go-v2/service/elasticloadbalancingv2"
	configv1 "github.com/openshift/api/config/v1"
	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/machina-dev/machina/internal/controllers/aws/awsclient"
	"github.com/machina-dev/machina/internal/controllers/machineapi/machine"
)

// InfrastructureName is the name of the cluster's config.openshift.io Infrastructure.
const InfrastructureName = "cluster"

// ClusterNameLabel names a Machine's cluster (its infrastructure name) on OpenShift.
const ClusterNameLabel = "machine.openshift.io/cluster-api-cluster"

// Config is how the actuator reaches AWS.
type Config = awsclient.Config

// clients are the AWS clients of one region and credential.
type clients struct {
	region string
	ec2    *ec2.Client
	elb    *elb.Client
	elbv2  *elbv2.Client
	// lookups remember the answers of resolve's Describe calls.
	lookups *lookups
}

// newClientCache builds the actuator's clients per region and credential.
func newClientCache(cfg Config) *awsclient.Cache[*clients] {
	return awsclient.NewCache(cfg, func(c aws.Config) *clients {
		return &clients{region: c.Region, lookups: newLookups(),
			ec2:   ec2.NewFromConfig(c, func(o *ec2.Options) { o.BaseEndpoint = awsclient.Endpoint(cfg.EC2Endpoint) }),
			elb:   elb.NewFromConfig(c, func(o *elb.Options) { o.BaseEndpoint = awsclient.Endpoint(cfg.ELBEndpoint) }),
			elbv2: elbv2.NewFromConfig(c, func(o *elbv2.Options) { o.BaseEndpoint = awsclient.Endpoint(cfg.ELBv2Endpoint) }),
		}
	})
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
	creds, ok := awsclient.FromSecret(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: m.Namespace, Name: ref.Name}, Data: data})
	if !ok {
		return nil, machine.RequeueAfter(SecretRetry, "CredentialsSecretInvalid",
			fmt.Errorf("%s: Secret %s/%s needs the keys %s and %s", p, m.Namespace, ref.Name, awsclient.SecretAccessKeyID, awsclient.SecretSecretAccessKey))
	}
	return creds, nil
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
