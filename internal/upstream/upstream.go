// Package upstream runs, against a lab, the machine controllers OpenShift users run beside a
// migration of authority, in place of machina's own: on the Machine API side
// machine-api-operator's MachineSet, MachineHealthCheck and NodeLink commands (lab.StartMAO)
// and its Machine controller with machina's EC2 actuator behind it (maomachine, in a manager
// of its own with machine-api-operator's identity), all with MachineAPIMigration on; on the
// Cluster API side the upstream Cluster API core (lab.StartCAPICore), watching every
// namespace: with --namespace its MachineSet controller cannot watch the InfraMachines it
// creates ("failed to cast AWSMachine informer to SharedIndexInformer": a cache limited to
// namespaces hands out informers of another type), so it would never create a Machine. The Cluster API AWS provider (CAPA) is started by the caller, as for the
// other AWS labs (lab.StartCAPA). machina's manager then runs only what cluster-capi-operator's
// migration provides: the groups in Groups.
//
// Two things cluster-capi-operator's other controllers do for such a cluster are the caller's:
// the externally managed AWSCluster's status.ready (demo.EnsureAWSClusterObjects writes it)
// and the Cluster's ControlPlaneInitialized, which InitializeCluster sets.
package upstream

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/aws/aws-sdk-go-v2/credentials"

	"github.com/machina-dev/machina/internal/cloud/ec2"
	"github.com/machina-dev/machina/internal/controllers/aws/awsactuator"
	"github.com/machina-dev/machina/internal/controllers/aws/maomachine"
	"github.com/machina-dev/machina/internal/lab"
)

// Groups are machina's controller groups beside the upstream controllers: those of
// cluster-capi-operator's migration (sync, migration, the authority webhook) and the
// operator metrics.
const Groups = "sync,migration,admission,opsmetrics"

// LabAWS is the EC2 actuator's configuration for the lab's EC2 front at url (its EC2, ELB and
// ELBv2 endpoints) with the lab key pair.
func LabAWS(url string) awsactuator.Config {
	return awsactuator.Config{EC2Endpoint: url, ELBEndpoint: url + ec2.PathELB, ELBv2Endpoint: url + ec2.PathELBv2,
		Credentials: credentials.NewStaticCredentialsProvider(ec2.LabAccessKeyID, ec2.LabSecretAccessKey, "")}
}

// Options configure Start.
type Options struct {
	// AWS is the EC2 actuator's configuration (endpoints, credentials) for
	// machine-api-operator's Machine controller.
	AWS awsactuator.Config
	// MachineAPINamespace is where machine-api-operator's controllers work (lab.MAONamespace).
	MachineAPINamespace string
	// Progress receives the builds' and starts' progress. Optional.
	Progress io.Writer
}

// Controllers are the upstream controllers Start runs. Stop ends them.
type Controllers struct {
	// MAO is machine-api-operator's MachineSet, MachineHealthCheck and NodeLink commands.
	MAO *lab.MAO
	// Core is the upstream Cluster API core manager.
	Core *lab.CAPICore

	cancel      context.CancelFunc
	machineDone chan error
	machineErr  error
}

// Start builds (on first use) and starts machine-api-operator's controllers and the upstream
// Cluster API core against l. The Infrastructure "cluster" must exist (machine-api-operator's
// MachineSet command reads it at start). On error it stops whatever it started and names the
// part that failed.
func Start(ctx context.Context, l *lab.Lab, o Options) (c *Controllers, err error) {
	progress := o.Progress
	if progress == nil {
		progress = io.Discard
	}
	c, err = StartMachineAPI(ctx, l, o)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			c.Stop()
			c = nil
		}
	}()
	dir, err := lab.ModuleDir("sigs.k8s.io/cluster-api/util")
	if err != nil {
		return c, fmt.Errorf("the Cluster API module: %w", err)
	}
	if c.Core, err = l.StartCAPICore(ctx, dir, progress); err != nil {
		return c, err
	}
	return c, nil
}

// StartMachineAPI is Start without the Cluster API core: machine-api-operator's commands and
// its Machine controller only (what `bench mapi-scale -machine-api upstream` measures).
func StartMachineAPI(ctx context.Context, l *lab.Lab, o Options) (c *Controllers, err error) {
	progress := o.Progress
	if progress == nil {
		progress = io.Discard
	}
	c = &Controllers{}
	defer func() {
		if err != nil {
			c.Stop()
			c = nil
		}
	}()
	if c.MAO, err = l.StartMAO(ctx, lab.MAOOptions{Progress: progress}); err != nil {
		return c, err
	}
	if err := c.startMachineController(l, o); err != nil {
		return c, err
	}
	fmt.Fprintf(progress, "upstream: machine-api-operator %s Machine controller (with machina's EC2 actuator) running as %s\n",
		lab.MAOVersion, lab.MAOUser)
	return c, nil
}

// startMachineController runs machine-api-operator's Machine controller in this process, in
// a manager of its own with machine-api-operator's identity (StartMAO installed its RBAC).
func (c *Controllers) startMachineController(l *lab.Lab, o Options) error {
	cfg, err := l.MAOConfig()
	if err != nil {
		return err
	}
	mgr, err := maomachine.NewManager(cfg, o.MachineAPINamespace, o.AWS)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	c.cancel, c.machineDone = cancel, make(chan error, 1)
	go func() {
		err := mgr.Start(ctx)
		if err == nil && ctx.Err() == nil {
			err = errors.New("stopped")
		}
		c.machineDone <- err
		close(c.machineDone)
	}()
	return nil
}

// Failed returns an error naming the first controller that has stopped on its own.
func (c *Controllers) Failed() error {
	if err := c.MAO.Failed(); err != nil {
		return err
	}
	if err := c.Core.Failed(); err != nil {
		return err
	}
	select {
	case err, ok := <-c.machineDone:
		if ok {
			c.machineErr = fmt.Errorf("machine-api-operator's Machine controller: %w", err)
		}
		return c.machineErr
	default:
		return nil
	}
}

// Stop ends the controllers, the Cluster API core first; safe to call more than once.
func (c *Controllers) Stop() {
	if c == nil {
		return
	}
	c.Core.Stop()
	if c.cancel != nil {
		c.cancel()
		if err := <-c.machineDone; err != nil && c.machineErr == nil {
			c.machineErr = fmt.Errorf("machine-api-operator's Machine controller: %w", err)
		}
		c.cancel = nil
	}
	c.MAO.Stop()
}

// InitializeCluster marks the Cluster API Cluster's control plane initialized, as
// cluster-capi-operator's core cluster controller does for an OpenShift cluster, whose control
// plane the Cluster API does not manage: the Cluster has no controlPlaneRef, and without the
// condition the Cluster API core never watches the cluster's Nodes, so its Machines would not
// get their Node. The core leaves a True condition as it is. It waits for the Cluster to exist.
func InitializeCluster(ctx context.Context, c client.Client, key client.ObjectKey) error {
	var last error
	err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		last = initializeCluster(ctx, c, key)
		return last == nil, nil
	})
	if err != nil && last != nil {
		err = last
	}
	if err != nil {
		return fmt.Errorf("marking Cluster %s's control plane initialized: %w", key, err)
	}
	return nil
}

// initializeCluster is one try of InitializeCluster: a status patch locked to the version read.
func initializeCluster(ctx context.Context, c client.Client, key client.ObjectKey) error {
	cl := &clusterv1.Cluster{}
	if err := c.Get(ctx, key, cl); err != nil {
		return err
	}
	if meta.IsStatusConditionTrue(cl.Status.Conditions, clusterv1.ClusterControlPlaneInitializedCondition) &&
		ptr.Deref(cl.Status.Initialization.ControlPlaneInitialized, false) {
		return nil
	}
	base := cl.DeepCopy()
	cl.Status.Initialization.ControlPlaneInitialized = ptr.To(true)
	meta.SetStatusCondition(&cl.Status.Conditions, metav1.Condition{Type: clusterv1.ClusterControlPlaneInitializedCondition,
		Status: metav1.ConditionTrue, Reason: clusterv1.ClusterControlPlaneInitializedReason, ObservedGeneration: cl.Generation})
	return c.Status().Patch(ctx, cl, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{}))
}
