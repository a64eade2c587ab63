package lab

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/machina-dev/machina/config"
)

// ManagerGroups are the groups a ServiceAccount token of ManagerUser carries (the apiserver
// adds system:authenticated).
var ManagerGroups = []string{"system:serviceaccounts", "system:serviceaccounts:" + config.Namespace}

// InstallRBAC creates the manager's namespace and installs config/rbac and config/sim as
// `kubectl apply -k` would: the ServiceAccount machina-manager, its generated roles, the
// aggregated machina-manager-infrastructure role and the bindings. It returns how many objects
// it installed. The aggregated role's rules belong to kube-controller-manager's aggregation
// controller and are left as they are.
func InstallRBAC(ctx context.Context, cfg *rest.Config) (int, error) {
	objs, err := config.RBAC()
	if err != nil {
		return 0, err
	}
	c, err := client.New(cfg, client.Options{})
	if err != nil {
		return 0, err
	}
	nsObj := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: config.Namespace}}
	if err := c.Create(ctx, nsObj); err != nil && !apierrors.IsAlreadyExists(err) {
		return 0, fmt.Errorf("creating namespace %s: %w", config.Namespace, err)
	}
	for _, o := range objs {
		existing := &unstructured.Unstructured{}
		existing.SetGroupVersionKind(o.GroupVersionKind())
		err := c.Get(ctx, client.ObjectKeyFromObject(o), existing)
		switch {
		case apierrors.IsNotFound(err):
			err = c.Create(ctx, o)
		case err == nil:
			o.SetResourceVersion(existing.GetResourceVersion())
			if _, aggregated := o.Object["aggregationRule"]; aggregated {
				o.Object["rules"] = existing.Object["rules"]
			}
			err = c.Update(ctx, o)
		}
		if err != nil {
			return 0, fmt.Errorf("installing %s %s: %w", o.GetKind(), o.GetName(), err)
		}
	}
	return len(objs), nil
}

// waitAggregated waits until the manager may do everything the ClusterRoles labelled for
// aggregation into machina-manager-infrastructure grant: kube-controller-manager copies
// their rules a moment after they appear, and the authorizer sees them a moment later.
func waitAggregated(ctx context.Context, cfg *rest.Config, roles ...*rbacv1.ClusterRole) error {
	c, err := client.New(cfg, client.Options{})
	if err != nil {
		return err
	}
	if len(roles) == 0 {
		list := &rbacv1.ClusterRoleList{}
		if err := c.List(ctx, list, client.MatchingLabels{config.AggregateToManagerLabel: "true"}); err != nil {
			return err
		}
		for i := range list.Items {
			roles = append(roles, &list.Items[i])
		}
	}
	var last string
	err = wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
		for _, r := range roles {
			for _, rule := range r.Rules {
				why, err := ruleAllowed(ctx, c, ManagerUser, ManagerGroups, "", rule)
				if err != nil || why != "" {
					last = fmt.Sprintf("ClusterRole %s: %s %v", r.Name, why, err)
					return false, nil
				}
			}
		}
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("the manager's aggregated role %s does not grant what the labelled roles do: %v (last: %s)",
			config.InfrastructureRole, err, last)
	}
	return nil
}

// ruleAllowed asks the authorizer whether user (in groups) may do every verb of rule on every
// resource of it in namespace ns ("" cluster-wide); it returns what is refused, or "".
func ruleAllowed(ctx context.Context, c client.Client, user string, groups []string, ns string, rule rbacv1.PolicyRule) (string, error) {
	for _, g := range rule.APIGroups {
		for _, res := range rule.Resources {
			resource, sub, _ := strings.Cut(res, "/")
			for _, v := range rule.Verbs {
				sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
					User: user, Groups: groups,
					ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: ns, Group: g, Resource: resource, Subresource: sub, Verb: v},
				}}
				if err := c.Create(ctx, sar); err != nil {
					return "", err
				}
				if !sar.Status.Allowed {
					return fmt.Sprintf("may not %s %s in group %q yet", v, res, g), nil
				}
			}
		}
	}
	return "", nil
}

// ProviderRole is the ClusterRole a provider ships for machina's manager: full use of its
// kinds in group, labelled for aggregation into machina-manager-infrastructure.
func ProviderRole(name, group string, resources ...string) *rbacv1.ClusterRole {
	return &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{config.AggregateToManagerLabel: "true"}},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{group}, Resources: resources,
			Verbs: []string{"get", "list", "watch", "create", "update", "patch", "delete"}}},
	}
}

// AggregateToManager creates (or updates) role, which must carry the aggregate-to-manager
// label, and waits until the manager may do what it grants: how a test plays a provider that
// installs its CRDs and rights. The lab must run kube-controller-manager.
func (l *Lab) AggregateToManager(ctx context.Context, role *rbacv1.ClusterRole) error {
	if role.Labels[config.AggregateToManagerLabel] != "true" {
		return fmt.Errorf("ClusterRole %s lacks the label %s: \"true\"", role.Name, config.AggregateToManagerLabel)
	}
	c, err := client.New(l.Config, client.Options{})
	if err != nil {
		return err
	}
	existing := &rbacv1.ClusterRole{}
	err = c.Get(ctx, client.ObjectKeyFromObject(role), existing)
	switch {
	case apierrors.IsNotFound(err):
		err = c.Create(ctx, role.DeepCopy())
	case err == nil:
		existing.Labels, existing.Rules = role.Labels, role.Rules
		err = c.Update(ctx, existing)
	}
	if err != nil {
		return err
	}
	return waitAggregated(ctx, l.Config, role)
}

// denials records the Kubernetes API requests the manager identity was refused by RBAC.
type denials struct {
	mu   sync.Mutex
	list []string
	log  string
}

func (d *denials) add(s string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.list = append(d.list, s)
	if f, err := os.OpenFile(d.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600); err == nil {
		fmt.Fprintln(f, time.Now().Format(time.RFC3339Nano), s)
		f.Close()
	}
}

// ManagerDenials returns every request of a ManagerConfig client that RBAC refused, as
// "VERB URL: message", oldest first (also appended to logs/manager-rbac-denied.log).
func (l *Lab) ManagerDenials() []string {
	l.denied.mu.Lock()
	defer l.denied.mu.Unlock()
	return append([]string(nil), l.denied.list...)
}

// denialRecorder notes 403 responses whose status says RBAC refused the request (admission
// policies also answer 403; their messages name the policy instead).
type denialRecorder struct {
	rt http.RoundTripper
	d  *denials
}

func (r denialRecorder) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := r.rt.RoundTrip(req)
	if err != nil || resp.StatusCode != http.StatusForbidden {
		return resp, err
	}
	body, rerr := io.ReadAll(resp.Body)
	resp.Body.Close()
	resp.Body = io.NopCloser(bytes.NewReader(body))
	if rerr != nil {
		return resp, nil
	}
	if msg := forbiddenMessage(body); strings.Contains(msg, `User "`+ManagerUser+`" cannot `) {
		r.d.add(req.Method + " " + req.URL.Path + ": " + msg)
	}
	return resp, nil
}

// forbiddenMessage is the message of a Status response, JSON or protobuf.
func forbiddenMessage(body []byte) string {
	st := &metav1.Status{}
	if raw, ok := bytes.CutPrefix(body, []byte("k8s\x00")); ok {
		u := &runtime.Unknown{}
		if u.Unmarshal(raw) == nil && st.Unmarshal(u.Raw) == nil {
			return st.Message
		}
		return ""
	}
	if json.Unmarshal(body, st) == nil {
		return st.Message
	}
	return ""
}

func (l *Lab) denialLog() string { return filepath.Join(l.Dir, "logs", "manager-rbac-denied.log") }
