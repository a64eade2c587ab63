package awsmachineset

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	configv1 "github.com/openshift/api/config/v1"
	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

const (
	specPath         = "spec.template.spec.providerSpec.value"
	instanceTypePath = specPath + ".instanceType"
	regionPath       = specPath + ".placement.region"
	credentialsPath  = specPath + ".credentialsSecret"
	providerSpecKind = "AWSMachineProviderConfig"
	// legacyGroup is the providerSpec API group of older OpenShift releases.
	legacyGroup = "awsproviderconfig.openshift.io"
)

// The keys of a credentials Secret, as OpenShift's cloud credential operator writes them
// (the Machine API AWS actuator reads the same).
const (
	secretAccessKeyID     = "aws_access_key_id"     //nolint:gosec // a key name, not a credential
	secretSecretAccessKey = "aws_secret_access_key" //nolint:gosec // a key name, not a credential
)

// infrastructureName is the name of the cluster's config.openshift.io Infrastructure.
const infrastructureName = "cluster"

// providerSpec decodes the AWSMachineProviderConfig of a MachineSet's template. isAWS is
// false for a MachineSet without one or with another provider's (another kind, or an
// apiVersion of another group); err is set when it claims to be AWS but does not decode.
func providerSpec(ms *machinev1beta1.MachineSet) (ps *machinev1beta1.AWSMachineProviderConfig, isAWS bool, err error) {
	v := ms.Spec.Template.Spec.ProviderSpec.Value
	if v == nil {
		return nil, false, nil
	}
	raw := v.Raw
	if len(raw) == 0 {
		if v.Object == nil {
			return nil, false, nil
		}
		if raw, err = json.Marshal(v.Object); err != nil {
			return nil, true, fmt.Errorf("%s: %v", specPath, err)
		}
	}
	var tm metav1.TypeMeta
	if err := json.Unmarshal(raw, &tm); err != nil {
		// Not even an object: the MachineSet controller reports it; nothing to annotate.
		return nil, false, nil
	}
	if tm.Kind != providerSpecKind {
		return nil, false, nil
	}
	if tm.APIVersion != "" {
		gv, err := schema.ParseGroupVersion(tm.APIVersion)
		if err != nil || (gv.Group != machinev1beta1.GroupName && gv.Group != legacyGroup) {
			return nil, false, nil
		}
	}
	ps = &machinev1beta1.AWSMachineProviderConfig{}
	if err := json.NewDecoder(bytes.NewReader(raw)).Decode(ps); err != nil {
		return nil, true, fmt.Errorf("%s: not an %s: %v", specPath, providerSpecKind, err)
	}
	return ps, true, nil
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
	id, secret := string(s.Data[secretAccessKeyID]), string(s.Data[secretSecretAccessKey])
	if id == "" || secret == "" {
		return nil, fmt.Errorf("%s: Secret %s/%s needs the keys %s and %s", credentialsPath, ns, ref.Name, secretAccessKeyID, secretSecretAccessKey)
	}
	return &aws.Credentials{AccessKeyID: id, SecretAccessKey: secret, Source: "Secret " + ns + "/" + ref.Name}, nil
}
