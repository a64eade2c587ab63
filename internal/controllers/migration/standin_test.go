package migration_test

import (
	"context"
	"path"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	capav1 "sigs.k8s.io/cluster-api-provider-aws/v2/api/v1beta2"
	clusterv1beta1 "sigs.k8s.io/cluster-api/api/core/v1beta1" //nolint:staticcheck // CAPA v2.13 writes its Paused condition in the v1beta1 form; the stand-in must too
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/machina-dev/machina/internal/cloud/api"
	"github.com/machina-dev/machina/internal/testenv"
)

// capaStandIn plays, from the test, the Cluster API AWS provider (CAPA) in TestMigration's
// lab, which does not run CAPA (a lab that runs the real one, awsCAPALab, never starts the
// stand-in: both would act on the same AWSMachines). It writes only what CAPA writes on an AWSMachine, and only on an unpaused one:
// CAPA's finalizer, then — once the AWSMachine has the providerID of a running instance —
// status.ready (the pinned CAPA's provisioned flag, Cluster API's v1beta1 InfraMachine
// contract), status.instanceState and status.addresses read from the instance, as CAPA reads
// them from EC2. It also keeps CAPA's Paused condition. The Machine API side is not played:
// the real AWS actuator runs against the simulated cloud's EC2 front.
type capaStandIn struct {
	e *testenv.Env
}

func startCAPAStandIn(e *testenv.Env) {
	s := &capaStandIn{e: e}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	e.T.Cleanup(func() { cancel(); <-done })
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			if err := s.pass(ctx); err != nil && ctx.Err() == nil {
				e.Logf("CAPA stand-in: %v", err)
			}
			select {
			case <-ctx.Done():
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()
}

func (s *capaStandIn) pass(ctx context.Context) error {
	var infra capav1.AWSMachineList
	if err := s.e.Client.List(ctx, &infra, client.InNamespace("openshift-cluster-api")); err != nil {
		return err
	}
	for i := range infra.Items {
		if err := client.IgnoreNotFound(s.reconcile(ctx, &infra.Items[i])); err != nil {
			return err
		}
	}
	return nil
}

// reconcile acts only on unpaused AWSMachines, adding CAPA's finalizer and reporting the
// instance; a deleted AWSMachine lets go.
func (s *capaStandIn) reconcile(ctx context.Context, m *capav1.AWSMachine) error {
	_, paused := m.Annotations[clusterv1.PausedAnnotation]
	// CAPA v2's paused helper: a change of the Paused condition (v1beta1 form) is stored on
	// its own, and the pass ends there.
	before := m.DeepCopy()
	if changed := setV1Beta1Paused(m, paused); changed {
		return s.e.Client.Status().Patch(ctx, m, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{}))
	}
	if paused {
		return nil
	}
	base := m.DeepCopy()
	if !m.DeletionTimestamp.IsZero() {
		if controllerutil.RemoveFinalizer(m, capav1.MachineFinalizer) {
			return s.e.Client.Patch(ctx, m, client.MergeFrom(base))
		}
		return nil
	}
	if controllerutil.AddFinalizer(m, capav1.MachineFinalizer) {
		if err := s.e.Client.Patch(ctx, m, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})); err != nil {
			return err
		}
	}
	if m.Status.Ready || m.Spec.ProviderID == nil {
		return nil
	}
	inst, err := s.e.Cloud.GetInstance(ctx, path.Base(*m.Spec.ProviderID))
	if err != nil || inst.State != api.StateRunning {
		return err
	}
	base = m.DeepCopy()
	m.Status.Ready = true
	m.Status.InstanceState = ptr.To(capav1.InstanceStateRunning)
	m.Status.Addresses = []clusterv1beta1.MachineAddress{
		{Type: clusterv1beta1.MachineInternalIP, Address: inst.PrivateIP},
		{Type: clusterv1beta1.MachineInternalDNS, Address: inst.Hostname},
	}
	return s.e.Client.Status().Patch(ctx, m, client.MergeFrom(base))
}

// setV1Beta1Paused sets the Paused condition as CAPA v2 writes it (Cluster API's v1beta1
// condition form, no observedGeneration) and reports whether it changed.
func setV1Beta1Paused(m *capav1.AWSMachine, paused bool) bool {
	c := clusterv1beta1.Condition{Type: clusterv1beta1.PausedV1Beta2Condition, Status: corev1.ConditionFalse,
		Reason: clusterv1beta1.NotPausedV1Beta2Reason, LastTransitionTime: metav1.Now()}
	if paused {
		c.Status, c.Reason = corev1.ConditionTrue, clusterv1beta1.PausedV1Beta2Reason
	}
	for i, old := range m.Status.Conditions {
		if old.Type == c.Type {
			if old.Status == c.Status {
				return false
			}
			m.Status.Conditions[i] = c
			return true
		}
	}
	m.Status.Conditions = append(m.Status.Conditions, c)
	return true
}
