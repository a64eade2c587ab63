// Package scheme builds the runtime.Scheme every machina client and controller uses: the
// Kubernetes built-ins, the Machine API, config.openshift.io, Cluster API core v1beta2,
// the Machine API's ControlPlaneMachineSet (machine.openshift.io/v1), the Cluster API AWS provider (for conversion) and the simulated provider's types.
package scheme

import (
	configv1 "github.com/openshift/api/config/v1"
	machinev1 "github.com/openshift/api/machine/v1"
	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	awsv1beta2 "sigs.k8s.io/cluster-api-provider-aws/v2/api/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	infrav1 "github.com/machina-dev/machina/api/infrastructure/v1alpha1"
)

// New returns a fresh scheme with every type machina knows.
func New() *runtime.Scheme {
	s := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(s))
	utilruntime.Must(apiextensionsv1.AddToScheme(s))
	utilruntime.Must(machinev1beta1.Install(s))
	utilruntime.Must(machinev1.Install(s))
	utilruntime.Must(configv1.Install(s))
	utilruntime.Must(clusterv1.AddToScheme(s))
	utilruntime.Must(infrav1.AddToScheme(s))
	utilruntime.Must(awsv1beta2.AddToScheme(s))
	return s
}

// Scheme is a shared, read-only instance of New().
var Scheme = New()
