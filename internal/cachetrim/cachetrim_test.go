package cachetrim_test

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/machina-dev/machina/internal/cachetrim"
)

// A trimmed Node keeps everything the controllers read (labels, annotations, taints,
// providerID, conditions, addresses, nodeInfo, attached volumes) and loses only its
// managedFields and image list.
func TestNodeKeepsWhatControllersRead(t *testing.T) {
	n := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "n", Labels: map[string]string{"a": "b"}, Annotations: map[string]string{"c": "d"},
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubelet"}}},
		Spec: corev1.NodeSpec{ProviderID: "sim://x", Unschedulable: true, Taints: []corev1.Taint{{Key: "t", Effect: corev1.TaintEffectNoSchedule}}},
		Status: corev1.NodeStatus{
			Conditions:      []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}},
			Addresses:       []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "10.0.0.1"}},
			NodeInfo:        corev1.NodeSystemInfo{KubeletVersion: "v1.36.3", Architecture: "amd64"},
			VolumesAttached: []corev1.AttachedVolume{{Name: "vol"}},
			Images:          []corev1.ContainerImage{{Names: []string{"registry/img@sha256:0", "registry/img:1"}, SizeBytes: 1 << 20}},
		},
	}
	want := n.DeepCopy()
	want.ManagedFields, want.Status.Images = nil, nil
	got, err := cachetrim.Node(n)
	if err != nil {
		t.Fatal(err)
	}
	if !equality.Semantic.DeepEqual(got, want) {
		t.Errorf("trimmed Node\n%+v\nwant\n%+v", got, want)
	}
	if o, err := cachetrim.Node("not a Node"); err != nil || o != "not a Node" {
		t.Errorf("another object: %v, %v; want it unchanged", o, err)
	}
}

// A trimmed CRD keeps its names, labels (the Cluster API contract labels) and which versions
// are served and stored.
func TestCRDKeepsNamesLabelsAndVersions(t *testing.T) {
	crd := &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "simmachines.infrastructure.machina.dev", Labels: map[string]string{"cluster.x-k8s.io/v1beta2": "v1alpha1"},
			Annotations: map[string]string{"kubectl.kubernetes.io/last-applied-configuration": "{...}"}},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: "infrastructure.machina.dev", Names: apiextensionsv1.CustomResourceDefinitionNames{Kind: "SimMachine", Plural: "simmachines"},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{Name: "v1alpha1", Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{Type: "object"}}}},
			Conversion: &apiextensionsv1.CustomResourceConversion{Strategy: apiextensionsv1.NoneConverter},
		},
		Status: apiextensionsv1.CustomResourceDefinitionStatus{StoredVersions: []string{"v1alpha1"}},
	}
	got, err := cachetrim.CRD(crd.DeepCopy())
	if err != nil {
		t.Fatal(err)
	}
	c := got.(*apiextensionsv1.CustomResourceDefinition)
	if c.Labels["cluster.x-k8s.io/v1beta2"] != "v1alpha1" || c.Spec.Names.Kind != "SimMachine" || len(c.Spec.Versions) != 1 ||
		!c.Spec.Versions[0].Served || !c.Spec.Versions[0].Storage || c.Spec.Versions[0].Name != "v1alpha1" {
		t.Errorf("lost what readers use: %+v", c)
	}
	if c.Spec.Versions[0].Schema != nil || c.Annotations != nil || c.Spec.Conversion != nil || c.Status.StoredVersions != nil {
		t.Errorf("kept what no reader uses: %+v", c)
	}
}
