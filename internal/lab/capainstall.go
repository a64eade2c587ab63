package lab

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/yaml"
)

// capaPrefix and capaProviderLabel are what CAPA's config/default kustomization adds to the
// objects of config/rbac and config/webhook.
const (
	capaPrefix        = "capa-"
	capaProviderLabel = "cluster.x-k8s.io/provider"
	capaProvider      = "infrastructure-aws"
	capaGroup         = "infrastructure.cluster.x-k8s.io"
)

// capaKinds are the resources of CAPA's core controllers and webhooks (the AWSCluster,
// AWSMachine and AWSMachineTemplate controllers, the identity creator, the webhooks of
// those kinds): the CRDs StartCAPA makes sure of and the webhooks it registers. The kinds
// of EKS, ROSA and machine pools, whose gates are off, are left out.
var capaKinds = []string{
	"awsclusters", "awsmachines", "awsmachinetemplates", "awsclustertemplates",
	"awsclustercontrolleridentities", "awsclusterroleidentities", "awsclusterstaticidentities",
}

// installCAPA gives the lab what CAPA's release declares before the controller starts: the
// CRDs of capaKinds the lab lacks, and the namespace, ServiceAccount, ClusterRole and
// ClusterRoleBinding of its config/rbac (leader election's Role is left out: the lab runs
// CAPA without leader election).
func (l *Lab) installCAPA(ctx context.Context, b CAPABuild) error {
	if err := l.installCAPACRDs(ctx, b); err != nil {
		return err
	}
	c, err := client.New(l.Config, client.Options{})
	if err != nil {
		return err
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: CAPANamespace, Labels: map[string]string{capaProviderLabel: capaProvider}}}
	if err := c.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating namespace %s: %w", CAPANamespace, err)
	}
	sa, role, binding := &corev1.ServiceAccount{}, &rbacv1.ClusterRole{}, &rbacv1.ClusterRoleBinding{}
	for f, obj := range map[string]any{"serviceaccount.yaml": sa, "role.yaml": role, "role_binding.yaml": binding} {
		if err := readManifest(filepath.Join(b.Dir, "config", "rbac", f), obj); err != nil {
			return err
		}
	}
	// What config/default does to these objects: namespace, name prefix, provider label.
	sa.Name, sa.Namespace, sa.Annotations = capaPrefix+sa.Name, CAPANamespace, nil
	role.Name = capaPrefix + role.Name
	binding.Name, binding.RoleRef.Name = capaPrefix+binding.Name, capaPrefix+binding.RoleRef.Name
	for i := range binding.Subjects {
		binding.Subjects[i].Name, binding.Subjects[i].Namespace = capaPrefix+binding.Subjects[i].Name, CAPANamespace
	}
	if sa.Name != CAPAServiceAccount || binding.RoleRef.Name != role.Name {
		return fmt.Errorf("CAPA %s's config/rbac names ServiceAccount %s and binds ClusterRole %s; the lab expects %s and %s",
			CAPAVersion, sa.Name, binding.RoleRef.Name, CAPAServiceAccount, role.Name)
	}
	for _, o := range []client.Object{sa, role, binding} {
		if err := applyCAPAObject(ctx, c, o); err != nil {
			return err
		}
	}
	return nil
}

// applyCAPAObject creates o or updates the existing object to o's content.
func applyCAPAObject(ctx context.Context, c client.Client, o client.Object) error {
	want, ok := o.DeepCopyObject().(client.Object)
	if !ok {
		return fmt.Errorf("%T is not an object", o)
	}
	_, err := controllerutil.CreateOrUpdate(ctx, c, o, func() error {
		rv := o.GetResourceVersion()
		if err := copyInto(want, o); err != nil {
			return err
		}
		o.SetResourceVersion(rv)
		labels := o.GetLabels()
		if labels == nil {
			labels = map[string]string{}
		}
		labels[capaProviderLabel] = capaProvider
		o.SetLabels(labels)
		return nil
	})
	if err != nil {
		return fmt.Errorf("installing CAPA's %T %s: %w", o, o.GetName(), err)
	}
	return nil
}

// copyInto copies the content of src (same type) into dst.
func copyInto(src, dst client.Object) error {
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(src)
	if err != nil {
		return err
	}
	return runtime.DefaultUnstructuredConverter.FromUnstructured(u, dst)
}

// installCAPACRDs creates the CRDs of capaKinds that are not installed yet, from the
// release's config/crd/bases with the labels of its config/crd kustomization, and waits
// until they are served. The lab's own (config/crd/upstream) are left as they are.
func (l *Lab) installCAPACRDs(ctx context.Context, b CAPABuild) error {
	var kust struct {
		CommonLabels map[string]string `json:"commonLabels"`
	}
	if err := readManifest(filepath.Join(b.Dir, "config", "crd", "kustomization.yaml"), &kust); err != nil {
		return err
	}
	cs, err := apiextensionsclient.NewForConfig(l.Config)
	if err != nil {
		return err
	}
	dc, err := discovery.NewDiscoveryClientForConfig(l.Config)
	if err != nil {
		return err
	}
	crds := cs.ApiextensionsV1().CustomResourceDefinitions()
	for _, kind := range capaKinds {
		name := kind + "." + capaGroup
		if _, err := crds.Get(ctx, name, metav1.GetOptions{}); err == nil {
			continue
		} else if !apierrors.IsNotFound(err) {
			return err
		}
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := readManifest(filepath.Join(b.Dir, "config", "crd", "bases", capaGroup+"_"+kind+".yaml"), crd); err != nil {
			return err
		}
		if crd.Labels == nil {
			crd.Labels = map[string]string{}
		}
		for k, v := range kust.CommonLabels {
			crd.Labels[k] = v
		}
		if _, err := crds.Create(ctx, crd, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("installing CAPA's CRD %s: %w", name, err)
		}
		if err := waitServed(ctx, crds, dc, crd); err != nil {
			return err
		}
	}
	return nil
}

// readManifest decodes the single YAML document in path into obj.
func readManifest(path string, obj any) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if err := yaml.Unmarshal(b, obj); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

// capaWebhookConfigs reads the release's config/webhook/manifests.yaml and returns its two
// configurations as the lab registers them: named capa-…, only the webhooks of capaKinds,
// called at url (the manager's webhook server) and trusting the lab's CA.
func (l *Lab) capaWebhookConfigs(b CAPABuild, url string) (*admissionregistrationv1.MutatingWebhookConfiguration,
	*admissionregistrationv1.ValidatingWebhookConfiguration, error) {
	data, err := os.ReadFile(filepath.Join(b.Dir, "config", "webhook", "manifests.yaml"))
	if err != nil {
		return nil, nil, err
	}
	mutating, validating := &admissionregistrationv1.MutatingWebhookConfiguration{}, &admissionregistrationv1.ValidatingWebhookConfiguration{}
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	for {
		var doc map[string]any
		if err := dec.Decode(&doc); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return nil, nil, fmt.Errorf("config/webhook/manifests.yaml: %w", err)
		}
		var into any
		switch doc["kind"] {
		case "MutatingWebhookConfiguration":
			into = mutating
		case "ValidatingWebhookConfiguration":
			into = validating
		default:
			continue
		}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(doc, into); err != nil {
			return nil, nil, err
		}
	}
	ca := l.pki.ca.CertPEM()
	mutating.Name, validating.Name = capaPrefix+mutating.Name, capaPrefix+validating.Name
	mutating.Webhooks = slices.DeleteFunc(mutating.Webhooks, func(w admissionregistrationv1.MutatingWebhook) bool {
		return !capaWebhookKept(w.Rules)
	})
	for i := range mutating.Webhooks {
		mutating.Webhooks[i].ClientConfig = urlClientConfig(mutating.Webhooks[i].ClientConfig, url, ca)
	}
	validating.Webhooks = slices.DeleteFunc(validating.Webhooks, func(w admissionregistrationv1.ValidatingWebhook) bool {
		return !capaWebhookKept(w.Rules)
	})
	for i := range validating.Webhooks {
		validating.Webhooks[i].ClientConfig = urlClientConfig(validating.Webhooks[i].ClientConfig, url, ca)
	}
	if len(mutating.Webhooks) == 0 || len(validating.Webhooks) == 0 {
		return nil, nil, fmt.Errorf("CAPA %s's config/webhook/manifests.yaml has no webhooks for %v", CAPAVersion, capaKinds)
	}
	return mutating, validating, nil
}

// capaWebhookKept reports whether every resource a webhook's rules name is one of capaKinds.
func capaWebhookKept(rules []admissionregistrationv1.RuleWithOperations) bool {
	for _, r := range rules {
		for _, res := range r.Resources {
			if !slices.Contains(capaKinds, res) {
				return false
			}
		}
	}
	return len(rules) > 0
}

// urlClientConfig turns a Service reference into the URL of the same path on the manager.
func urlClientConfig(cc admissionregistrationv1.WebhookClientConfig, url string, ca []byte) admissionregistrationv1.WebhookClientConfig {
	path := ""
	if cc.Service != nil && cc.Service.Path != nil {
		path = *cc.Service.Path
	}
	u := url + path
	return admissionregistrationv1.WebhookClientConfig{URL: &u, CABundle: ca}
}

// registerCAPAWebhooks registers CAPA's webhooks with kube-apiserver at url.
func (l *Lab) registerCAPAWebhooks(ctx context.Context, b CAPABuild, url string) error {
	mutating, validating, err := l.capaWebhookConfigs(b, url)
	if err != nil {
		return err
	}
	c, err := client.New(l.Config, client.Options{})
	if err != nil {
		return err
	}
	for _, o := range []client.Object{mutating, validating} {
		if err := applyCAPAObject(ctx, c, o); err != nil {
			return err
		}
	}
	return nil
}

// waitCAPAWebhooksGone waits, until ctx ends, for kube-apiserver to admit an AWSCluster (a
// dry run) without calling a webhook: both of CAPA's registrations hold AWSCluster
// webhooks, so once that create passes, kube-apiserver has seen both deleted.
func (l *Lab) waitCAPAWebhooksGone(ctx context.Context) {
	c, err := client.New(l.Config, client.Options{})
	if err != nil {
		return
	}
	probe := &unstructured.Unstructured{}
	probe.SetAPIVersion(capaGroup + "/v1beta2")
	probe.SetKind("AWSCluster")
	probe.SetNamespace(metav1.NamespaceDefault)
	probe.SetName("lab-webhook-probe")
	_ = unstructured.SetNestedField(probe.Object, "us-east-1", "spec", "region")
	for {
		err := c.Create(ctx, probe.DeepCopy(), client.DryRunAll)
		if err == nil || !strings.Contains(err.Error(), "failed calling webhook") {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// removeCAPAWebhooks deletes the webhook registrations registerCAPAWebhooks made.
func (l *Lab) removeCAPAWebhooks(ctx context.Context) error {
	c, err := client.New(l.Config, client.Options{})
	if err != nil {
		return err
	}
	var errs []error
	for _, o := range []client.Object{
		&admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: capaPrefix + "mutating-webhook-configuration"}},
		&admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: capaPrefix + "validating-webhook-configuration"}},
	} {
		errs = append(errs, client.IgnoreNotFound(c.Delete(ctx, o)))
	}
	return errors.Join(errs...)
}
