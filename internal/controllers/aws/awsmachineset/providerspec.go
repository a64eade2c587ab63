package awsmachineset

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/machina-dev/machina/internal/controllers/aws/awsclient"
	"github.com/machina-dev/machina/internal/controllers/scalefromzero"
	configv1 "github.com/openshift/api/config/v1"
	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

const (
	instanceTypePath = scalefromzero.InstanceTypePath
	regionPath       = scalefromzero.SpecPath + ".placement.region"
	credentialsPath  = scalefromzero.SpecPath + ".credentialsSecret"
	// legacyGroup is the providerSpec API group of older OpenShift releases.
	legacyGroup = "awsproviderconfig.openshift.io"
)

// specType is the providerSpec this controller claims.
var specType = scalefromzero.SpecType{Kind: "AWSMachineProviderConfig", Groups: []string{machinev1beta1.GroupName, legacyGroup}}

// infrastructureName is the name of the cluster's config.openshift.io Infrastructure.
const infrastructureName = "cluster"

// providerSpec decodes the AWSMachineProviderConfig of a MachineSet's template
// (scalefromzero.DecodeProviderSpec; the legacy awsproviderconfig.openshift.io group too).
func providerSpec(ms *machinev1beta1.MachineSet) (*machinev1beta1.AWSMachineProviderConfig, bool, error) {
	ps := &machinev1beta1.AWSMachineProviderConfig{}
	claimed, err := scalefromzero.DecodeProviderSpec(ms, specType, ps)
	return ps, claimed, err
}

// regionOf is the providerSpec's placement.region, else the cluster's AWS region from the
// Infrastructure (status.platformStatus.aws.region); "" when neither names one.
func regionOf(ctx context.Context, c client.Reader, ps *machinev1beta1.AWSMachineProviderConfig) (string, error) {
	if ps.Placement.Region != "" {
		return ps.Placement.Region, nil
	}
	infra := &configv1.Infrastructure{}
	err := c.Get(ctx, client.ObjectKey{Name: infrastructureName}, infra)
	switch {
	case apierrors.IsNotFound(err):
		return "", nil
	case err != nil:
		return "", fmt.Errorf("reading Infrastructure %s: %w", infrastructureName, err)
	}
	if st := infra.Status.PlatformStatus; st != nil && st.AWS != nil {
		return st.AWS.Region, nil
	}
	return "", nil
}

// credentialsOf reads the credentialsSecret the providerSpec names, in the MachineSet's
// namespace; nil (the configured default) when it names none.
func credentialsOf(ctx context.Context, c client.Reader, ns string, ps *machinev1beta1.AWSMachineProviderConfig) (*aws.Credentials, error) {
	ref := ps.CredentialsSecret
	if ref == nil || ref.Name == "" {
		return nil, nil
	}
	s := &corev1.Secret{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: ref.Name}, s); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("%s: Secret %s/%s not found", credentialsPath, ns, ref.Name)
		}
		return nil, fmt.Errorf("reading Secret %s/%s: %w", ns, ref.Name, err)
	}
	creds, ok := awsclient.FromSecret(s)
	if !ok {
		return nil, fmt.Errorf("%s: Secret %s/%s needs the keys %s and %s", credentialsPath, ns, ref.Name, awsclient.SecretAccessKeyID, awsclient.SecretSecretAccessKey)
	}
	return creds, nil
}
