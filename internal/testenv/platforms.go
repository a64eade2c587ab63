package testenv

import (
	"context"
	"encoding/json"
	"os"

	configv1 "github.com/openshift/api/config/v1"
	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/machina-dev/machina/api/infrastructure/v1alpha1"
	"github.com/machina-dev/machina/internal/demo"
	"github.com/machina-dev/machina/internal/manager"
)

// SimProviderSpec is a simulated Machine's providerSpec in zone with the region and
// instance type given, booting the lab's image with the demo user data.
func SimProviderSpec(region, zone, instanceType string) *runtime.RawExtension {
	raw, _ := json.Marshal(&infrav1.SimMachineProviderSpec{
		TypeMeta: metav1.TypeMeta{APIVersion: infrav1.GroupVersion.String(), Kind: "SimMachineProviderSpec"},
		Region:   region, Zone: zone, InstanceType: instanceType, Image: "sim-rhcos-9",
		UserDataSecret: &corev1.LocalObjectReference{Name: demo.UserDataSecret}})
	return &runtime.RawExtension{Raw: raw}
}

// AWSProviderSpec is the demo AWS cluster's worker providerSpec (AMI, subnet, security groups
// of the EC2 front's built-in catalogue) in zone, with the region and instance type given.
func AWSProviderSpec(region, zone, instanceType string) *runtime.RawExtension {
	ps := awsProviderConfig(zone)
	ps.Placement.Region, ps.InstanceType = region, instanceType
	raw, _ := json.Marshal(ps)
	return &runtime.RawExtension{Raw: raw}
}

// AWSProviderSpecAMIByFilters is the demo worker providerSpec in the cluster's first zone
// with its AMI chosen by filters (ones that pick the same AMI), as older OpenShift installs
// write it; the Cluster API cannot carry it.
func AWSProviderSpecAMIByFilters() *runtime.RawExtension {
	cl := demo.DefaultAWSCluster(manager.DefaultMachineAPINamespace, manager.DefaultClusterAPINamespace, nil)
	ps := awsProviderConfig(cl.Zones[0])
	ps.AMI = machinev1beta1.AWSResourceReference{Filters: []machinev1beta1.Filter{{Name: "image-id", Values: []string{*ps.AMI.ID}}}}
	raw, _ := json.Marshal(ps)
	return &runtime.RawExtension{Raw: raw}
}

func awsProviderConfig(zone string) *machinev1beta1.AWSMachineProviderConfig {
	ms := demo.DefaultAWSCluster(manager.DefaultMachineAPINamespace, manager.DefaultClusterAPINamespace, nil).MachineSet("template", zone, 0)
	ps := &machinev1beta1.AWSMachineProviderConfig{}
	_ = json.Unmarshal(ms.Spec.Template.Spec.ProviderSpec.Value.Raw, ps)
	return ps
}

// ServeAWSMachines makes the lab serve AWS Machine API Machines next to simulated ones: the
// Infrastructure says AWS in region (the simulated provider reads its region from the
// SimCluster instead) and the credentials Secret the demo AWS providerSpec names exists in
// the Machine API namespace. The "aws" controller group then provisions them through the EC2
// front (Options.EC2).
func (e *Env) ServeAWSMachines(region string) {
	e.T.Helper()
	ctx := context.Background()
	infra := &configv1.Infrastructure{}
	if err := e.Client.Get(ctx, client.ObjectKey{Name: "cluster"}, infra); err != nil {
		e.T.Fatal(err)
	}
	base := infra.DeepCopy()
	infra.Status.PlatformStatus = &configv1.PlatformStatus{Type: configv1.AWSPlatformType, AWS: &configv1.AWSPlatformStatus{Region: region}}
	if err := e.Client.Status().Patch(ctx, infra, client.MergeFrom(base)); err != nil {
		e.T.Fatal(err)
	}
	kc, err := os.ReadFile(e.Lab.KubeconfigPath)
	if err != nil {
		e.T.Fatal(err)
	}
	for _, o := range demo.DefaultAWSCluster(manager.DefaultMachineAPINamespace, manager.DefaultClusterAPINamespace, kc).ClusterObjects() {
		if s, ok := o.(*corev1.Secret); ok && s.Name == demo.AWSCredentialsSecret {
			if err := e.Client.Create(ctx, s); err != nil {
				e.T.Fatal(err)
			}
		}
	}
}
