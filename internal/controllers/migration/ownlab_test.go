package migration_test

import (
	"context"
	"fmt"
	"os"
	"path"
	"slices"
	"testing"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/machina-dev/machina/internal/cloud/api"
	"github.com/machina-dev/machina/internal/demo"
	"github.com/machina-dev/machina/internal/manager"
	"github.com/machina-dev/machina/internal/provider"
	"github.com/machina-dev/machina/internal/testenv"
	"github.com/machina-dev/machina/internal/upstream"
)

// simLab is a lab of the simulated platform alone: machina's Machine API controllers with the
// simulated actuator, sync, migration, Cluster API controllers and the simulated provider's
// InfraMachine controllers, all in machina's manager; the cluster is SeedCluster's "lab".
func simLab(t *testing.T) (*testenv.Env, string) {
	e := testenv.Start(t, testenv.Options{Groups: "machineapi,sync,migration,clusterapi,sim"})
	return e, e.SeedCluster("lab").Name
}

// awsCAPALab is a lab of the AWS platform alone with the upstream Cluster API AWS provider:
// machina's Machine API controllers with the AWS actuator (group "aws"), sync, migration and
// Cluster API controllers, and CAPA (lab.StartCAPA, limited to the Cluster API namespace as
// OpenShift runs it), all against the simulated cloud's EC2 front. The cluster is the demo
// AWS cluster: the Infrastructure says AWS, the Cluster API Cluster has an externally
// managed AWSCluster, and the sync writes the Cluster API namespace's bootstrap Secret CAPA reads user
// data from. No capaStandIn runs here: CAPA alone writes what a provider writes on the
// AWSMachines. CAPA is a process of its own, started once: StopManager stops machina's
// manager only, so CAPA keeps running through every crash a test makes.
func awsCAPALab(t *testing.T) (*testenv.Env, string) {
	e := testenv.Start(t, testenv.Options{Groups: "machineapi,aws,sync,migration,clusterapi", EC2: true})
	_, capiNamespace := manager.Env{}.Namespaces()
	e.StartCAPA(capiNamespace)
	return e, seedAWSCluster(t, e).Name
}

// upstreamLab is a lab of the AWS platform under the controllers OpenShift users run, in
// place of machina's own: machine-api-operator's MachineSet, MachineHealthCheck, NodeLink and
// Machine controllers (the last with machina's EC2 actuator), the upstream Cluster API core
// and CAPA, all against the simulated cloud's EC2 front, with machina's manager running only
// upstream.Groups (sync, migration, admission, opsmetrics). The cluster is awsCAPALab's, its
// control plane marked initialized as cluster-capi-operator marks it. A crash
// (StopManager) stops machina's manager only: every upstream controller keeps running.
func upstreamLab(t *testing.T) (*testenv.Env, string) {
	e := testenv.Start(t, testenv.Options{Groups: upstream.Groups, EC2: true})
	ctx := context.Background()
	_, capiNamespace := manager.Env{}.Namespaces()
	cl := seedAWSCluster(t, e)
	e.StartCAPA(capiNamespace)
	e.StartUpstream()
	if err := upstream.InitializeCluster(ctx, e.Client, client.ObjectKey{Namespace: capiNamespace, Name: cl.Name}); err != nil {
		t.Fatal(err)
	}
	return e, cl.Name
}

// seedAWSCluster creates the demo AWS cluster's objects (demo.EnsureAWSClusterObjects): the
// Infrastructure, namespaces, Secrets, the Cluster and its externally managed AWSCluster.
func seedAWSCluster(t *testing.T, e *testenv.Env) demo.AWSCluster {
	t.Helper()
	kc, err := os.ReadFile(e.Lab.KubeconfigPath)
	if err != nil {
		t.Fatal(err)
	}
	mapiNamespace, capiNamespace := manager.Env{}.Namespaces()
	cl := demo.DefaultAWSCluster(mapiNamespace, capiNamespace, kc)
	if err := demo.EnsureAWSClusterObjects(context.Background(), e.Client, cl); err != nil {
		t.Fatal(err)
	}
	return cl
}

// capaFieldManager is the field manager of CAPA's writes (its client's user agent).
const capaFieldManager = "cluster-api-provider-aws-controller"

// infraView is what the crash tests read of a Machine's InfraMachine, of any platform: its
// provider comes from the registry (provider.Provider), its fields from the Cluster API
// InfraMachine contract.
type infraView struct {
	obj *unstructured.Unstructured
	// paused: the paused annotation is on; providerFinalizer: one of the finalizers the
	// provider's controller sets is on; pausedAck: the provider reports Paused=True (either
	// condition form, at the current generation where the form says).
	paused, providerFinalizer, pausedAck bool
	providerID                           string
	// provisioned: status.ready (v1beta1 contract, CAPA v2) or
	// status.initialization.provisioned (v1beta2 contract).
	provisioned   bool
	instanceState string
}

// getAll reads both Machines called name and the Cluster API one's InfraMachine.
func getAll(ctx context.Context, e *testenv.Env, p provider.Provider, name string) (*machinev1beta1.Machine, *clusterv1.Machine, *infraView, error) {
	m, c, err := getBoth(ctx, e, name)
	if err != nil {
		return m, c, nil, err
	}
	in, err := getInfra(ctx, e, p, c)
	return m, c, in, err
}

// getInfra reads the InfraMachine the Cluster API Machine c references, as p's kind.
func getInfra(ctx context.Context, e *testenv.Env, p provider.Provider, c *clusterv1.Machine) (*infraView, error) {
	if ref := c.Spec.InfrastructureRef; ref.Kind != p.InfraMachine.Kind || ref.APIGroup != p.InfraMachine.Group {
		return nil, fmt.Errorf("Machine %s references %s.%s %s, want a %s", c.Name, ref.Kind, ref.APIGroup, ref.Name, p.InfraMachine.Kind)
	}
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(p.InfraMachine)
	if err := e.Client.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: c.Spec.InfrastructureRef.Name}, u); err != nil {
		return nil, err
	}
	v := &infraView{obj: u}
	_, v.paused = u.GetAnnotations()[clusterv1.PausedAnnotation]
	v.providerFinalizer = slices.ContainsFunc(p.InfraMachineFinalizers, func(f string) bool { return controllerutil.ContainsFinalizer(u, f) })
	v.providerID, _, _ = unstructured.NestedString(u.Object, "spec", "providerID")
	ready, _, _ := unstructured.NestedBool(u.Object, "status", "ready")
	provisioned, _, _ := unstructured.NestedBool(u.Object, "status", "initialization", "provisioned")
	v.provisioned = ready || provisioned
	v.instanceState, _, _ = unstructured.NestedString(u.Object, "status", "instanceState")
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		m, ok := c.(map[string]any)
		if !ok || m["type"] != clusterv1.PausedCondition {
			continue
		}
		g, hasGen := m["observedGeneration"].(int64)
		v.pausedAck = m["status"] == "True" && (!hasGen || g >= u.GetGeneration())
	}
	return v, nil
}

func (v *infraView) String() string {
	return fmt.Sprintf("%s %s paused-annotation %v finalizers %v Paused %v providerID %q provisioned %v instanceState %q",
		v.obj.GetKind(), v.obj.GetName(), v.paused, v.obj.GetFinalizers(), v.pausedAck, v.providerID, v.provisioned, v.instanceState)
}

// statusWrittenBy reports whether fieldManager owns fields of the object's status.
func statusWrittenBy(o client.Object, fieldManager string) bool {
	return slices.ContainsFunc(o.GetManagedFields(), func(f metav1.ManagedFieldsEntry) bool {
		return f.Manager == fieldManager && f.Subresource == "status"
	})
}

// infraProblems: the InfraMachine is not being deleted, carries no finalizer twice, and names
// no other instance than the Machine's.
func infraProblems(v *infraView, providerID string) []string {
	var p []string
	fs := v.obj.GetFinalizers()
	for i, f := range fs {
		if slices.Contains(fs[:i], f) {
			p = append(p, fmt.Sprintf("%s %s has finalizer %s twice: %v", v.obj.GetKind(), v.obj.GetName(), f, fs))
		}
	}
	if !v.obj.GetDeletionTimestamp().IsZero() {
		p = append(p, fmt.Sprintf("%s %s is being deleted", v.obj.GetKind(), v.obj.GetName()))
	}
	if v.providerID != "" && v.providerID != providerID {
		p = append(p, fmt.Sprintf("%s %s names instance %s, the Machine %s", v.obj.GetKind(), v.obj.GetName(), v.providerID, providerID))
	}
	return p
}

// instanceRunning reports a problem unless the instance of providerID is running.
func instanceRunning(ctx context.Context, e *testenv.Env, providerID string) []string {
	inst, err := e.Cloud.GetInstance(ctx, path.Base(providerID))
	if err != nil {
		return []string{fmt.Sprintf("instance of %s: %v", providerID, err)}
	}
	if inst.State != api.StateRunning {
		return []string{fmt.Sprintf("instance %s is %s, want running", inst.InstanceID, inst.State)}
	}
	return nil
}
