package migration_test

import (
	"context"
	"crypto/sha256"
	"fmt"
	"sync"
	"time"

	configv1 "github.com/openshift/api/config/v1"
	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	capav1 "sigs.k8s.io/cluster-api-provider-aws/v2/api/v1beta2"
	clusterv1beta1 "sigs.k8s.io/cluster-api/api/core/v1beta1" //nolint:staticcheck // CAPA v2.13 writes its Paused condition in the v1beta1 form; the stand-in must too
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/machina-dev/machina/internal/gate"
	"github.com/machina-dev/machina/internal/mapicond"
	"github.com/machina-dev/machina/internal/provider"
	"github.com/machina-dev/machina/internal/testenv"
)

// awsStandIn plays, from the test, the two AWS controllers this lab does not run yet: the
// Machine API AWS actuator (OpenShift's machine-api controller) and the Cluster API AWS
// provider (CAPA). It writes only what those controllers write — on the Machine API Machine its
// finalizer, providerID, phase and the Paused condition; on an unpaused AWSMachine CAPA's
// finalizer and status.ready — so the sync and migration controllers can be exercised on the
// AWS platform. Launches counts the instances it "created" (providerIDs it assigned).
type awsStandIn struct {
	e        *testenv.Env
	zone     string
	mu       sync.Mutex
	launched map[string]bool
}

func startAWSStandIn(e *testenv.Env, zone string) *awsStandIn {
	s := &awsStandIn{e: e, zone: zone, launched: map[string]bool{}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	e.T.Cleanup(func() { cancel(); <-done })
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			if err := s.pass(ctx); err != nil && ctx.Err() == nil {
				e.Logf("aws stand-in: %v", err)
			}
			select {
			case <-ctx.Done():
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()
	return s
}

// Launches is how many instances the stand-in actuator has launched.
func (s *awsStandIn) Launches() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.launched)
}

func (s *awsStandIn) pass(ctx context.Context) error {
	var machines machinev1beta1.MachineList
	if err := s.e.Client.List(ctx, &machines, client.InNamespace("openshift-machine-api")); err != nil {
		return err
	}
	for i := range machines.Items {
		m := &machines.Items[i]
		if provider.SpecKind(m.Spec.ProviderSpec) != "AWSMachineProviderConfig" {
			continue
		}
		if err := client.IgnoreNotFound(s.actuate(ctx, m)); err != nil {
			return err
		}
	}
	var infra capav1.AWSMachineList
	if err := s.e.Client.List(ctx, &infra, client.InNamespace("openshift-cluster-api")); err != nil {
		return err
	}
	for i := range infra.Items {
		if err := client.IgnoreNotFound(s.capa(ctx, &infra.Items[i])); err != nil {
			return err
		}
	}
	return nil
}

// actuate is the Machine API AWS controller: paused unless the Machine API is authoritative,
// otherwise finalizer, an instance (providerID) and phase Running; deletion lets go.
func (s *awsStandIn) actuate(ctx context.Context, m *machinev1beta1.Machine) error {
	active := m.Status.AuthoritativeAPI == machinev1beta1.MachineAuthorityMachineAPI
	if !m.DeletionTimestamp.IsZero() {
		if !active || !controllerutil.ContainsFinalizer(m, machinev1beta1.MachineFinalizer) {
			return nil
		}
		base := m.DeepCopy()
		controllerutil.RemoveFinalizer(m, machinev1beta1.MachineFinalizer)
		return s.e.Client.Patch(ctx, m, client.MergeFrom(base))
	}
	if active && (!controllerutil.ContainsFinalizer(m, machinev1beta1.MachineFinalizer) || m.Spec.ProviderID == nil) {
		base := m.DeepCopy()
		controllerutil.AddFinalizer(m, machinev1beta1.MachineFinalizer)
		if m.Spec.ProviderID == nil {
			id := fmt.Sprintf("i-%x", sha256.Sum256([]byte(m.UID)))[:19]
			m.Spec.ProviderID = ptr.To(fmt.Sprintf("aws:///%s/%s", s.zone, id))
			s.mu.Lock()
			s.launched[id] = true
			s.mu.Unlock()
		}
		if err := s.e.Client.Patch(ctx, m, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})); err != nil {
			return err
		}
	}
	base := m.DeepCopy()
	cond := machinev1beta1.Condition{Type: gate.PausedCondition, Status: corev1.ConditionTrue, Reason: gate.AuthoritativeAPINotMachineAPIReason}
	if active {
		cond.Status, cond.Reason = corev1.ConditionFalse, gate.AuthoritativeAPIMachineAPIReason
		if m.Spec.ProviderID != nil {
			m.Status.Phase = ptr.To(machinev1beta1.PhaseRunning)
		}
	}
	changed := mapicond.Set(&m.Status.Conditions, cond)
	if !changed && (!active || base.Status.Phase != nil) {
		return nil
	}
	return s.e.Client.Status().Patch(ctx, m, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{}))
}

// capa is the Cluster API AWS provider: it acts only on unpaused AWSMachines, adding its
// finalizer and reporting the instance ready; a deleted AWSMachine lets go.
func (s *awsStandIn) capa(ctx context.Context, m *capav1.AWSMachine) error {
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
	base = m.DeepCopy()
	m.Status.Ready = true
	m.Status.InstanceState = ptr.To(capav1.InstanceStateRunning)
	return s.e.Client.Status().Patch(ctx, m, client.MergeFrom(base))
}

// setAWSInfrastructure makes the lab's Infrastructure say AWS in region, as on an OpenShift
// cluster on AWS (the simulated provider reads its region from the SimCluster instead).
func setAWSInfrastructure(ctx context.Context, e *testenv.Env, region string) error {
	infra := &configv1.Infrastructure{}
	if err := e.Client.Get(ctx, client.ObjectKey{Name: "cluster"}, infra); err != nil {
		return err
	}
	base := infra.DeepCopy()
	infra.Status.PlatformStatus = &configv1.PlatformStatus{Type: configv1.AWSPlatformType,
		AWS: &configv1.AWSPlatformStatus{Region: region}}
	return e.Client.Status().Patch(ctx, infra, client.MergeFrom(base))
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
