package config_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

	"github.com/machina-dev/machina/config"
	"github.com/machina-dev/machina/config/render"
	"github.com/machina-dev/machina/internal/controllers"
)

// kustomizations lists every directory under config/ holding a kustomization.yaml.
func kustomizations(t testing.TB) []string {
	t.Helper()
	var dirs []string
	err := filepath.WalkDir(".", func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && d.Name() == render.File {
			dirs = append(dirs, filepath.ToSlash(filepath.Dir(p)))
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return dirs
}

func renderDir(t testing.TB, dir string) []*unstructured.Unstructured {
	t.Helper()
	objs, err := render.Render(os.DirFS("."), dir)
	if err != nil {
		t.Fatalf("rendering config/%s: %v", dir, err)
	}
	return objs
}

func TestEveryKustomizationRenders(t *testing.T) {
	dirs := kustomizations(t)
	for _, want := range []string{"default", "bridge", "crd", "crd/upstream", "admission", "rbac", "sim", "aws", "openstack", "gcp", "azure", "powervs", "vsphere", "manager"} {
		if !slices.Contains(dirs, want) {
			t.Errorf("config/%s/kustomization.yaml is missing (found %v)", want, dirs)
		}
	}
	for _, d := range dirs {
		if len(renderDir(t, d)) == 0 {
			t.Errorf("config/%s renders no objects", d)
		}
	}
	// Every YAML file beside a kustomization is listed by it, so nothing is silently left out
	// of an install.
	for _, d := range dirs {
		k, err := render.Read(os.DirFS("."), d)
		if err != nil {
			t.Fatal(err)
		}
		files, _ := filepath.Glob(filepath.Join(d, "*.yaml"))
		for _, f := range files {
			if base := filepath.Base(f); base != render.File && !slices.Contains(k.Resources, base) {
				t.Errorf("config/%s/%s is not in its kustomization's resources", d, base)
			}
		}
	}
}

func toRole(t *testing.T, o *unstructured.Unstructured) *rbacv1.ClusterRole {
	t.Helper()
	r := &rbacv1.ClusterRole{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, r); err != nil {
		t.Fatal(err)
	}
	return r
}

// No role machina ships may grant "*" (verbs, resources, API groups, names, URLs).
func TestNoRoleHasWildcards(t *testing.T) {
	roles := 0
	for _, d := range kustomizations(t) {
		for _, o := range renderDir(t, d) {
			if o.GetKind() != "ClusterRole" && o.GetKind() != "Role" {
				continue
			}
			roles++
			if bad := wildcards(toRole(t, o).Rules); bad != "" {
				t.Errorf("config/%s: %s %s grants a wildcard: %s", d, o.GetKind(), o.GetName(), bad)
			}
		}
	}
	if roles == 0 {
		t.Fatal("no roles found")
	}
	// The check itself catches each kind of wildcard.
	for _, r := range []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"*"}},
		{APIGroups: []string{""}, Resources: []string{"*"}, Verbs: []string{"get"}},
		{APIGroups: []string{"*"}, Resources: []string{"pods"}, Verbs: []string{"get"}},
		{APIGroups: []string{""}, Resources: []string{"pods/*"}, Verbs: []string{"get"}},
		{NonResourceURLs: []string{"/metrics*"}, Verbs: []string{"get"}},
	} {
		if wildcards([]rbacv1.PolicyRule{r}) == "" {
			t.Errorf("wildcard in %+v not caught", r)
		}
	}
}

func wildcards(rules []rbacv1.PolicyRule) string {
	for _, r := range rules {
		for _, list := range [][]string{r.Verbs, r.Resources, r.APIGroups, r.ResourceNames, r.NonResourceURLs} {
			for _, v := range list {
				if strings.Contains(v, "*") {
					return v + " in " + r.String()
				}
			}
		}
	}
	return ""
}

// The provider rights reach the manager only through aggregation: the core role names no
// provider group, the aggregated role has no rules of its own, and the simulated provider's
// role carries the aggregation label.
func TestProviderRightsAreAggregated(t *testing.T) {
	byName := map[string]*rbacv1.ClusterRole{}
	for _, o := range append(renderDir(t, "rbac"), renderDir(t, "sim")...) {
		if o.GetKind() == "ClusterRole" {
			byName[o.GetName()] = toRole(t, o)
		}
	}
	core, agg, sim := byName["machina-manager"], byName[config.InfrastructureRole], byName["machina-sim-provider"]
	if core == nil || agg == nil || sim == nil {
		t.Fatalf("roles %v", byName)
	}
	for _, r := range core.Rules {
		for _, g := range r.APIGroups {
			if strings.HasPrefix(g, "infrastructure.") || strings.HasPrefix(g, "bootstrap.") || strings.HasPrefix(g, "remediation.") {
				t.Errorf("machina-manager names provider group %s: %s", g, r.String())
			}
		}
	}
	if len(agg.Rules) != 0 || agg.AggregationRule == nil || len(agg.AggregationRule.ClusterRoleSelectors) != 1 ||
		agg.AggregationRule.ClusterRoleSelectors[0].MatchLabels[config.AggregateToManagerLabel] != "true" {
		t.Errorf("%s: rules %v aggregation %+v", config.InfrastructureRole, agg.Rules, agg.AggregationRule)
	}
	if sim.Labels[config.AggregateToManagerLabel] != "true" {
		t.Errorf("machina-sim-provider labels %v", sim.Labels)
	}
	bound := map[string]bool{}
	for _, o := range renderDir(t, "rbac") {
		if o.GetKind() != "ClusterRoleBinding" && o.GetKind() != "RoleBinding" {
			continue
		}
		b := &rbacv1.ClusterRoleBinding{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, b); err != nil {
			t.Fatal(err)
		}
		if len(b.Subjects) != 1 || b.Subjects[0].Kind != "ServiceAccount" || b.Subjects[0].Name != config.ServiceAccount ||
			b.Subjects[0].Namespace != config.Namespace {
			t.Errorf("%s %s binds %+v", o.GetKind(), o.GetName(), b.Subjects)
		}
		bound[b.RoleRef.Kind+"/"+b.RoleRef.Name] = true
	}
	for _, want := range []string{"ClusterRole/machina-manager", "ClusterRole/" + config.InfrastructureRole, "Role/machina-manager"} {
		if !bound[want] {
			t.Errorf("%s is not bound to the manager (bound: %v)", want, bound)
		}
	}
}

// makeVar reads a variable's value from the Makefile.
func makeVar(t *testing.T, name string) string {
	t.Helper()
	mk, err := os.ReadFile("../Makefile")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^` + name + ` \??= (.+)$`).FindSubmatch(mk)
	if m == nil {
		t.Fatalf("Makefile has no %s", name)
	}
	return strings.TrimSpace(string(m[1]))
}

// The generated roles must match the controllers' markers, and every package with markers
// must feed one of them.
func TestRBACUpToDate(t *testing.T) {
	root, _ := filepath.Abs("..")
	version := makeVar(t, "CONTROLLER_GEN_VERSION")
	sets := map[string]struct{ paths, roleName, dir string }{
		"MANAGER_RBAC_PATHS": {makeVar(t, "MANAGER_RBAC_PATHS"), "machina-manager", "rbac"},
		"SIM_RBAC_PATHS":     {makeVar(t, "SIM_RBAC_PATHS"), "machina-sim-provider", "sim"},
	}
	var roots []string
	for name, s := range sets {
		out := t.TempDir()
		args := []string{"run", "sigs.k8s.io/controller-tools/cmd/controller-gen@" + version, "rbac:roleName=" + s.roleName}
		args = append(args, strings.Fields(s.paths)...)
		args = append(args, "output:rbac:artifacts:config="+out)
		cmd := exec.Command("go", args...)
		cmd.Dir = root
		if b, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("controller-gen (%s): %v\n%s", name, err, b)
		}
		want, _ := os.ReadFile(filepath.Join(out, "role.yaml"))
		got, _ := os.ReadFile(filepath.Join(s.dir, "role.yaml"))
		if len(want) == 0 || string(got) != string(want) {
			t.Errorf("config/%s/role.yaml is stale (run `make rbac`); controller-gen now writes:\n%s", s.dir, want)
		}
		for _, p := range strings.Fields(s.paths) {
			roots = append(roots, strings.TrimSuffix(strings.TrimPrefix(p, "paths=./"), "..."))
		}
	}
	err := filepath.WalkDir(filepath.Join(root, "internal"), func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return err
		}
		src, err := os.ReadFile(p)
		if err != nil || !strings.Contains(string(src), "+kubebuilder:rbac:") {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		rel = filepath.ToSlash(rel)
		for _, r := range roots {
			if strings.HasPrefix(rel, r) {
				return nil
			}
		}
		t.Errorf("%s has RBAC markers but no generated role reads it (add its package to the Makefile's *_RBAC_PATHS)", rel)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func deployment(t *testing.T, dir string) *appsv1.Deployment {
	t.Helper()
	for _, o := range renderDir(t, dir) {
		if o.GetKind() == "Deployment" {
			d := &appsv1.Deployment{}
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, d); err != nil {
				t.Fatal(err)
			}
			return d
		}
	}
	t.Fatalf("config/%s has no Deployment", dir)
	return nil
}

func TestManagerDeployment(t *testing.T) {
	for _, tc := range []struct {
		dir      string
		wantArgs []string
		notArgs  []string
	}{
		{"default", []string{"manager", "--leader-elect", "--controllers=machineapi,clusterapi,sim,sync,migration,admission",
			"--webhook-service=machina-system/machina-webhook:443"}, nil},
		{"bridge", []string{"manager", "--leader-elect", "--controllers=sync,migration,admission", "--webhook-service=machina-system/machina-webhook:443"}, nil},
	} {
		d := deployment(t, tc.dir)
		spec := d.Spec.Template.Spec
		if spec.ServiceAccountName != config.ServiceAccount || d.Namespace != config.Namespace {
			t.Errorf("%s: runs as %s/%s", tc.dir, d.Namespace, spec.ServiceAccountName)
		}
		psc := spec.SecurityContext
		if psc == nil || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot || psc.SeccompProfile == nil ||
			psc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
			t.Errorf("%s: pod securityContext %+v", tc.dir, psc)
		}
		if len(spec.Containers) != 1 {
			t.Fatalf("%s: %d containers", tc.dir, len(spec.Containers))
		}
		c := spec.Containers[0]
		sc := c.SecurityContext
		if sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem || sc.AllowPrivilegeEscalation == nil ||
			*sc.AllowPrivilegeEscalation || sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) {
			t.Errorf("%s: container securityContext %+v", tc.dir, sc)
		}
		if c.LivenessProbe == nil || c.LivenessProbe.HTTPGet == nil || c.LivenessProbe.HTTPGet.Path != "/healthz" ||
			c.ReadinessProbe == nil || c.ReadinessProbe.HTTPGet == nil || c.ReadinessProbe.HTTPGet.Path != "/readyz" {
			t.Errorf("%s: probes %+v %+v", tc.dir, c.LivenessProbe, c.ReadinessProbe)
		}
		if c.Resources.Requests.Cpu().IsZero() || c.Resources.Requests.Memory().IsZero() {
			t.Errorf("%s: resource requests %v", tc.dir, c.Resources.Requests)
		}
		for _, a := range tc.wantArgs {
			if !slices.Contains(c.Args, a) {
				t.Errorf("%s: args %v lack %s", tc.dir, c.Args, a)
			}
		}
		for _, a := range c.Args {
			if v, ok := strings.CutPrefix(a, "--controllers="); ok {
				if _, err := controllers.Select(nil, v); err != nil {
					t.Errorf("%s: %s: %v", tc.dir, a, err)
				}
			}
		}
		for _, a := range tc.notArgs {
			if slices.Contains(c.Args, a) {
				t.Errorf("%s: args %v have %s", tc.dir, c.Args, a)
			}
		}
		checkReplicas(t, tc.dir, d)
	}
}

// checkReplicas: two replicas (the authority webhook shares its CA between them, issue #48),
// preferably on two Nodes, with the default leader-election timing.
func checkReplicas(t *testing.T, dir string, d *appsv1.Deployment) {
	t.Helper()
	if n := ptr.Deref(d.Spec.Replicas, 1); n != 2 {
		t.Errorf("%s: %d replicas, want 2", dir, n)
	}
	aff := d.Spec.Template.Spec.Affinity
	if aff == nil || aff.PodAntiAffinity == nil || len(aff.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution) != 1 ||
		aff.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution[0].PodAffinityTerm.TopologyKey != corev1.LabelHostname {
		t.Errorf("%s: affinity %+v, want the replicas spread over Nodes", dir, aff)
	}
	for _, a := range d.Spec.Template.Spec.Containers[0].Args {
		if strings.HasPrefix(a, "--leader-elect-") {
			t.Errorf("%s: %s: the defaults (docs/install.md) are meant", dir, a)
		}
	}
}

// The image builds with the Go version go.mod asks for.
func TestContainerfileGoVersion(t *testing.T) {
	mod, err := os.ReadFile("../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	gov := regexp.MustCompile(`(?m)^go (\d+\.\d+)`).FindSubmatch(mod)
	cf, err := os.ReadFile("../Containerfile")
	if err != nil {
		t.Fatal(err)
	}
	img := regexp.MustCompile(`(?m)^FROM \S*golang:(\S+) AS build$`).FindSubmatch(cf)
	if gov == nil || img == nil {
		t.Fatalf("go.mod go line %q, Containerfile golang stage %q", gov, img)
	}
	if v := string(img[1]); v != string(gov[1]) && !strings.HasPrefix(v, string(gov[1])+".") {
		t.Errorf("Containerfile builds with golang:%s, go.mod says go %s", img[1], gov[1])
	}
	if !regexp.MustCompile(`(?m)^FROM gcr.io/distroless/static\S*:nonroot$`).Match(cf) || !strings.Contains(string(cf), "CGO_ENABLED=0") {
		t.Error("the final stage must be distroless static (nonroot) with a CGO_ENABLED=0 binary")
	}
}

// Neither install serves plain-HTTP metrics: the manager is told an HTTPS address (never
// --metrics-insecure), the metrics Service reaches that port by name, and only
// machina-metrics-reader (bound to nobody by config/default) grants reading it.
func TestMetricsOnlyOverHTTPS(t *testing.T) {
	for _, dir := range []string{"default", "bridge"} {
		d := deployment(t, dir)
		c := d.Spec.Template.Spec.Containers[0]
		if slices.Contains(c.Args, "--metrics-insecure") || slices.Contains(c.Args, "--metrics-insecure=true") {
			t.Errorf("%s: the manager serves plain-HTTP metrics: %v", dir, c.Args)
		}
		if !slices.Contains(c.Args, "--metrics-bind-address=:8443") {
			t.Errorf("%s: args %v lack --metrics-bind-address=:8443", dir, c.Args)
		}
		ports := map[string]int32{}
		for _, p := range c.Ports {
			ports[p.Name] = p.ContainerPort
		}
		if ports["https-metrics"] != 8443 || ports["metrics"] != 0 {
			t.Errorf("%s: container ports %v, want https-metrics 8443 and no plain metrics port", dir, ports)
		}
		var svc *corev1.Service
		for _, o := range renderDir(t, dir) {
			if o.GetKind() == "Service" && o.GetName() == "machina-manager-metrics" {
				svc = &corev1.Service{}
				if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, svc); err != nil {
					t.Fatal(err)
				}
			}
		}
		if svc == nil || len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].TargetPort.String() != "https-metrics" {
			t.Errorf("%s: metrics Service %+v does not target the https-metrics port", dir, svc)
		}
		readers := 0
		for _, o := range renderDir(t, dir) {
			switch {
			case o.GetKind() == "ClusterRole" && o.GetName() == "machina-metrics-reader":
				r := toRole(t, o)
				if len(r.Rules) != 1 || !slices.Equal(r.Rules[0].NonResourceURLs, []string{"/metrics"}) || !slices.Equal(r.Rules[0].Verbs, []string{"get"}) {
					t.Errorf("%s: machina-metrics-reader rules %v", dir, r.Rules)
				}
				readers++
			case strings.HasSuffix(o.GetKind(), "RoleBinding") && strings.Contains(fmt.Sprint(o.Object["roleRef"]), "machina-metrics-reader"):
				t.Errorf("%s: %s %s binds machina-metrics-reader; the install must leave that to the operator", dir, o.GetKind(), o.GetName())
			}
		}
		if readers != 1 {
			t.Errorf("%s: %d machina-metrics-reader roles", dir, readers)
		}
	}
}
