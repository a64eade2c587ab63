package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	"k8s.io/klog/v2"
	capav1 "sigs.k8s.io/cluster-api-provider-aws/v2/api/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/machina-dev/machina/internal/cloud/api"
	"github.com/machina-dev/machina/internal/controllers/aws/awsactuator"
	"github.com/machina-dev/machina/internal/demo"
	"github.com/machina-dev/machina/internal/lab"
	"github.com/machina-dev/machina/internal/upstream"
)

// soakPlatform is what the soak needs of the configuration it runs in: the simulated
// platform under machina's own controllers, or (-upstream) the AWS lab under the controllers
// OpenShift users run.
type soakPlatform struct {
	name string
	// env is the manager's groups and whether the EC2 front is served.
	env envOptions
	// region is where the workload's instances run (the checker lists the cloud's there).
	region string
	// faultOps are the cloud calls the controllers make; the soak's faults hit only these.
	faultOps []string
	// terminating bounds how long the checker lets an object be Terminating.
	terminating time.Duration
	// seed creates the cluster's objects, starts whatever runs beside machina's manager and
	// returns how to make MachineSet i of the workload, named name.
	seed func(ctx context.Context, s *soak, kubeconfig []byte) (func(name string, i int, replicas int32) *machinev1beta1.MachineSet, error)
}

// simFaultOps are the simulated cloud's calls the simulated provider's controllers make.
var simFaultOps = []string{api.OpRunInstances, api.OpDescribeInstances, api.OpTerminateInstances}

// ec2FaultOps are the EC2 actions machina's AWS actuator (under machine-api-operator's Machine
// controller) and CAPA call for a Machine: RunInstances, DescribeInstances and
// TerminateInstances share their names with the simulated cloud's API (one fault covers both
// fronts, docs/cloud.md), then the lookups of the AMI, subnet and security groups both make,
// and the network interface and tag calls of CAPA's AWSMachine reconciler.
var ec2FaultOps = append(append([]string{}, simFaultOps...),
	"DescribeImages", "DescribeSubnets", "DescribeSecurityGroups",
	"DescribeNetworkInterfaces", "ModifyNetworkInterfaceAttribute", "CreateTags")

// upstreamTerminating bounds a deletion under machine-api-operator's Machine controller, which
// is slower than machina's by design: it terminates the instance only once its drain
// controller has marked the Machine Drained (a pass of its own), then looks again every 30 s
// (its requeueAfter) until the instance is gone, and only then deletes the Node and its
// finalizer; and one worker serves every Machine, each pass waiting on its EC2 calls, which the
// faults slow. Under the soak's faults its deletions took up to 115 s (seed 45031: 33 s in the
// queue between the Drained condition and the pass that terminates). A deletion that never ends still fails the bound, and the end state
// (nothing still being deleted) in any case.
const upstreamTerminating = 180 * time.Second

func soakPlatformFor(o soakOptions) soakPlatform {
	if o.Upstream {
		return soakPlatform{name: "aws, upstream controllers", env: envOptions{groups: upstream.Groups, ec2: true, verbosity: o.Verbosity},
			region: api.DefaultAWSRegion, faultOps: ec2FaultOps, terminating: upstreamTerminating, seed: seedUpstream}
	}
	return soakPlatform{name: "sim", env: envOptions{groups: "*", verbosity: o.Verbosity}, region: soakRegion, faultOps: simFaultOps,
		terminating: 60 * time.Second, seed: seedSim}
}

// seedSim is the simulated provider's cluster "soak"; MachineSets alternate between two zones.
func seedSim(ctx context.Context, s *soak, kc []byte) (func(string, int, int32) *machinev1beta1.MachineSet, error) {
	cl := demo.Cluster{Name: "soak", Region: soakRegion, MachineAPINamespace: mapiNS, ClusterAPINamespace: capiNS, Kubeconfig: kc}
	if err := demo.EnsureCluster(ctx, s.e.client, cl); err != nil {
		return nil, err
	}
	return func(name string, i int, replicas int32) *machinev1beta1.MachineSet {
		return demo.MachineSet(cl, name, []string{"sim-east-1a", "sim-east-1b"}[i%2], replicas)
	}, nil
}

// seedUpstream is the AWS lab as internal/upstream sets it up (`machina up --platform aws
// --upstream`, testenv.StartUpstream): the demo AWS cluster's objects on the EC2 front, CAPA
// for the Cluster API namespace, machine-api-operator's commands and its Machine controller
// with machina's EC2 actuator (in this process, logging to upstream-machine.log) and the
// upstream Cluster API core, then the Cluster's control plane marked initialized as
// cluster-capi-operator does. MachineSets alternate between the cluster's zones. Only
// machina's manager is SIGKILLed by the soak: the upstream controllers keep running, as they
// would while machina's pod restarts.
func seedUpstream(ctx context.Context, s *soak, kc []byte) (func(string, int, int32) *machinev1beta1.MachineSet, error) {
	if err := s.logUpstreamMachineController(); err != nil {
		return nil, err
	}
	cl := demo.DefaultAWSCluster(mapiNS, capiNS, kc)
	if err := demo.EnsureAWSClusterObjects(ctx, s.e.client, cl); err != nil {
		return nil, err
	}
	if err := startCAPA(ctx, s.e); err != nil {
		return nil, err
	}
	start := time.Now()
	front := s.e.cloud.EC2()
	sctx, cancel := context.WithTimeout(ctx, 40*time.Minute)
	defer cancel()
	c, err := upstream.Start(sctx, s.e.lab, upstream.Options{
		AWS:                 upstream.LabAWS(front.URL()),
		MachineAPINamespace: mapiNS, Progress: os.Stderr,
	})
	if err != nil {
		return nil, err
	}
	s.upstream = c
	if err := upstream.InitializeCluster(ctx, s.e.client, client.ObjectKey{Namespace: capiNS, Name: cl.Name}); err != nil {
		return nil, err
	}
	fmt.Fprintf(os.Stderr, "soak: machine-api-operator %s and the Cluster API core %s up in %s; logs in %s\n",
		lab.MAOVersion, lab.ClusterctlVersion, time.Since(start).Round(time.Second), filepath.Join(s.e.dir, "lab", "logs"))
	return func(name string, i int, replicas int32) *machinev1beta1.MachineSet {
		return cl.MachineSet(name, cl.Zones[i%len(cl.Zones)], replicas)
	}, nil
}

// logUpstreamMachineController sends this process's controller-runtime and klog logs, which
// are machine-api-operator's Machine controller's and its actuator's, to upstream-machine.log
// in the run's directory (kept after a violation). Without -upstream they are discarded.
func (s *soak) logUpstreamMachineController() error {
	f, err := os.OpenFile(filepath.Join(s.e.dir, "upstream-machine.log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	logger := zap.New(zap.WriteTo(f), zap.UseDevMode(false))
	ctrllog.SetLogger(logger)
	klog.SetLogger(logger)
	return nil
}

// upstreamFailed names an upstream controller, or a lab process, that has stopped on its own.
func (s *soak) upstreamFailed() error {
	if s.upstream == nil {
		return nil
	}
	if err := s.upstream.Failed(); err != nil {
		return fmt.Errorf("an upstream controller stopped: %w", err)
	}
	if err := s.e.lab.Failed(); err != nil {
		return fmt.Errorf("a lab process stopped: %w", err)
	}
	return nil
}

// machineTags are the instance tags naming, as namespace/name, the Machine an instance was
// launched for: machina's (the simulated provider's controllers, machina's AWS actuator) and
// CAPA's (the Cluster API Machine of the AWSMachine).
var machineTags = []string{awsactuator.TagMachine, capav1.MachineNameTagKey}

// launchedFor is the name of the Machine an instance was launched for, from its tags ("" when
// none says). Both APIs' copies of a Machine share its name.
func launchedFor(i api.Instance) string {
	for _, k := range machineTags {
		if t, ok := i.Tags[k]; ok {
			return t[strings.LastIndex(t, "/")+1:]
		}
	}
	return ""
}
