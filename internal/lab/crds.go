package lab

import (
	"context"
	"fmt"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"

	"github.com/machina-dev/machina/config/crd"
)

// InstallCRDs creates or updates every CRD machina serves and waits until each is
// Established and listed by discovery. It returns how many CRDs it installed.
func InstallCRDs(ctx context.Context, cfg *rest.Config) (int, error) {
	crds, err := crd.All()
	if err != nil {
		return 0, err
	}
	return applyCRDs(ctx, cfg, crds)
}

// applyCRDs creates or updates crds and waits until each is Established and served.
func applyCRDs(ctx context.Context, cfg *rest.Config, crds []*apiextensionsv1.CustomResourceDefinition) (int, error) {
	cs, err := apiextensionsclient.NewForConfig(cfg)
	if err != nil {
		return 0, err
	}
	api := cs.ApiextensionsV1().CustomResourceDefinitions()
	for _, c := range crds {
		existing, err := api.Get(ctx, c.Name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			_, err = api.Create(ctx, c, metav1.CreateOptions{})
		case err == nil:
			c.ResourceVersion = existing.ResourceVersion
			_, err = api.Update(ctx, c, metav1.UpdateOptions{})
		}
		if err != nil {
			return 0, fmt.Errorf("installing CRD %s: %w", c.Name, err)
		}
	}
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return 0, err
	}
	for _, c := range crds {
		if err := waitServed(ctx, api, dc, c); err != nil {
			return 0, err
		}
	}
	return len(crds), nil
}

func waitServed(ctx context.Context, api interface {
	Get(context.Context, string, metav1.GetOptions) (*apiextensionsv1.CustomResourceDefinition, error)
}, dc discovery.DiscoveryInterface, c *apiextensionsv1.CustomResourceDefinition) error {
	var last string
	err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
		got, err := api.Get(ctx, c.Name, metav1.GetOptions{})
		if err != nil {
			last = err.Error()
			return false, nil
		}
		established := false
		for _, cond := range got.Status.Conditions {
			if cond.Type == apiextensionsv1.Established && cond.Status == apiextensionsv1.ConditionTrue {
				established = true
			}
		}
		if !established {
			last = "not Established"
			return false, nil
		}
		for _, v := range c.Spec.Versions {
			if !v.Served {
				continue
			}
			list, err := dc.ServerResourcesForGroupVersion(c.Spec.Group + "/" + v.Name)
			if err != nil {
				last = err.Error()
				return false, nil
			}
			found := false
			for _, r := range list.APIResources {
				found = found || r.Name == c.Spec.Names.Plural
			}
			if !found {
				last = "not in discovery for " + v.Name
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("CRD %s not served: %v (last: %s)", c.Name, err, last)
	}
	return nil
}
