package authorityhook

import (
	"context"
	"fmt"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// registrar keeps the ValidatingWebhookConfiguration as this replica would write it: it looks
// at it every period and puts back whatever someone deleted or changed (level-triggered).
//
// It runs on the leader only. Through a Service (a cluster) every replica would write the same
// configuration, since they share the CA (sharedCA) and the Service; one writer keeps two
// versions of a rolling update from fighting over it. Without a Service (URL mode: machina up,
// the lab, each replica on its own local port) only one URL can be registered, and leader
// election is what makes it the leader's: when the leader dies, the next leader registers its
// own URL. Until it does (the Lease's duration plus a retry period), the URL is the dead
// leader's, and the requests it guards are refused (failurePolicy Fail).
type registrar struct {
	c       client.Client
	r       client.Reader // uncached: one configuration needs no informer
	ns      Namespaces
	ca      func(context.Context) ([]byte, error)
	service *admissionregistrationv1.ServiceReference
	url     string
	period  time.Duration
}

// NeedLeaderElection: only the leader writes the configuration (see registrar).
func (*registrar) NeedLeaderElection() bool { return true }

func (r *registrar) Start(ctx context.Context) error {
	self, err := r.whoAmI(ctx)
	if err != nil {
		return err
	}
	log := ctrl.LoggerFrom(ctx).WithValues("configuration", ConfigurationName)
	for {
		changed, err := r.apply(ctx, self)
		switch {
		case err != nil && ctx.Err() == nil:
			log.Error(err, "registering the authority webhook; retrying")
		case changed:
			log.Info("authority webhook registered", "service", r.service, "url", r.urlOrEmpty())
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(r.period):
		}
	}
}

// whoAmI returns the manager's user name: its own creates (mirrors, MachineSet replicas) skip
// the webhook.
func (r *registrar) whoAmI(ctx context.Context) (string, error) {
	review := &authenticationv1.SelfSubjectReview{}
	if err := r.c.Create(ctx, review); err != nil {
		return "", fmt.Errorf("authority webhook: who am I (SelfSubjectReview): %w", err)
	}
	return review.Status.UserInfo.Username, nil
}

func (r *registrar) urlOrEmpty() string {
	if r.service != nil {
		return ""
	}
	return r.url
}

// apply creates or corrects the configuration, and says whether it wrote.
func (r *registrar) apply(ctx context.Context, self string) (bool, error) {
	ca, err := r.ca(ctx)
	if err != nil {
		return false, fmt.Errorf("the webhook's CA: %w", err)
	}
	want := r.configuration(self, ca)
	got := &admissionregistrationv1.ValidatingWebhookConfiguration{}
	err = r.r.Get(ctx, client.ObjectKey{Name: ConfigurationName}, got)
	if apierrors.IsNotFound(err) {
		if err := r.c.Create(ctx, want); err != nil {
			return false, fmt.Errorf("creating ValidatingWebhookConfiguration %s: %w", ConfigurationName, err)
		}
		return true, nil
	}
	if err != nil {
		return false, fmt.Errorf("reading ValidatingWebhookConfiguration %s: %w", ConfigurationName, err)
	}
	if equality.Semantic.DeepEqual(got.Webhooks, want.Webhooks) && got.Labels["app.kubernetes.io/managed-by"] == "machina" {
		return false, nil
	}
	got.Webhooks = want.Webhooks
	got.Labels = want.Labels
	if err := r.c.Update(ctx, got); err != nil {
		return false, fmt.Errorf("updating ValidatingWebhookConfiguration %s: %w", ConfigurationName, err)
	}
	return true, nil
}

func (r *registrar) configuration(self string, ca []byte) *admissionregistrationv1.ValidatingWebhookConfiguration {
	unpaused := admissionregistrationv1.MatchCondition{Name: "unpaused",
		Expression: fmt.Sprintf("!has(object.metadata.annotations) || !(%q in object.metadata.annotations)", clusterv1.PausedAnnotation)}
	creates := []string{"machines", "machinesets", "machinehealthchecks"}
	scales := []string{"machinesets/scale"}
	create, update := admissionregistrationv1.Create, admissionregistrationv1.Update
	return &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: ConfigurationName, Labels: map[string]string{"app.kubernetes.io/managed-by": "machina"}},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{
			r.hook(self, ca, "machine-api-create.authority.machina.dev", MachineAPIPath, "machine.openshift.io", r.ns.MachineAPI, create, creates),
			r.hook(self, ca, "cluster-api-create.authority.machina.dev", ClusterAPIPath, "cluster.x-k8s.io", r.ns.ClusterAPI, create, creates, unpaused),
			r.hook(self, ca, "machine-api-scale.authority.machina.dev", MachineAPIScalePath, "machine.openshift.io", r.ns.MachineAPI, update, scales),
			r.hook(self, ca, "cluster-api-scale.authority.machina.dev", ClusterAPIScalePath, "cluster.x-k8s.io", r.ns.ClusterAPI, update, scales),
		},
	}
}

// hook is one webhook of the configuration: op on resources of group in namespace ns, sent to
// path unless the request is the manager's own (self) or a further condition is false.
func (r *registrar) hook(self string, ca []byte, name, path, group, ns string, op admissionregistrationv1.OperationType,
	resources []string, conds ...admissionregistrationv1.MatchCondition) admissionregistrationv1.ValidatingWebhook {
	notSelf := admissionregistrationv1.MatchCondition{Name: "not-machina",
		Expression: fmt.Sprintf("request.userInfo.username != %q", self)}
	cc := admissionregistrationv1.WebhookClientConfig{CABundle: ca}
	if r.service != nil {
		svc := *r.service
		svc.Path = ptr.To(path)
		cc.Service = &svc
	} else {
		cc.URL = ptr.To(r.url + path)
	}
	return admissionregistrationv1.ValidatingWebhook{
		Name:         name,
		ClientConfig: cc,
		Rules: []admissionregistrationv1.RuleWithOperations{{
			Operations: []admissionregistrationv1.OperationType{op},
			Rule: admissionregistrationv1.Rule{APIGroups: []string{group}, APIVersions: []string{"*"},
				Resources: resources, Scope: ptr.To(admissionregistrationv1.NamespacedScope)},
		}},
		NamespaceSelector:       &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": ns}},
		ObjectSelector:          &metav1.LabelSelector{}, // the apiserver's default, so a stored copy compares equal
		MatchConditions:         append([]admissionregistrationv1.MatchCondition{notSelf}, conds...),
		MatchPolicy:             ptr.To(admissionregistrationv1.Exact),
		FailurePolicy:           ptr.To(admissionregistrationv1.Fail),
		SideEffects:             ptr.To(admissionregistrationv1.SideEffectClassNone),
		AdmissionReviewVersions: []string{"v1"},
		TimeoutSeconds:          ptr.To[int32](5),
	}
}
