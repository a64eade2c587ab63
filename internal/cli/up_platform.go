package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	configv1 "github.com/openshift/api/config/v1"
	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/machina-dev/machina/internal/demo"
	"github.com/machina-dev/machina/internal/lab"
	"github.com/machina-dev/machina/internal/manager"
	"github.com/machina-dev/machina/internal/scheme"
	"github.com/machina-dev/machina/internal/upstream"
)

// upPlatform is one value of `machina up --platform`: the cluster the lab seeds and which
// controllers run by default.
type upPlatform struct {
	name string
	// infraType is the Infrastructure platform type of the seeded cluster; a persistent lab
	// seeded for another platform is refused rather than mixed.
	infraType configv1.PlatformType
	// controllers is the --controllers default.
	controllers string
	// capa is whether the upstream CAPA controller runs next to machina's (--capa).
	capa bool
	seed func(ctx context.Context, in seedInput) (seeded, error)
}

// awsLabReplicas is how many Machines each of the AWS lab's worker MachineSets starts with.
const awsLabReplicas = 1

// upPlatforms are the platforms `machina up` can seed. The AWS lab leaves out the simulated
// platform's controllers (group "sim"), which have nothing to do there; the platform-neutral
// Machine API controllers (group "machineapi") run on both, and each platform's group runs the
// Machine controller for its own providerSpec kind.
func upPlatforms() []upPlatform {
	return []upPlatform{
		{name: "sim", infraType: configv1.NonePlatformType, controllers: "*", seed: seedSim},
		{name: "aws", infraType: configv1.AWSPlatformType, controllers: "*,-sim", capa: true, seed: seedAWS},
	}
}

func upPlatformNames() []string {
	var names []string
	for _, p := range upPlatforms() {
		names = append(names, p.name)
	}
	return names
}

// platformOf resolves --platform, refusing unknown values and flags that do not apply to it.
func (f *upFlags) platformOf() (upPlatform, error) {
	for _, p := range upPlatforms() {
		if p.name != f.platform {
			continue
		}
		if p.name != "sim" && f.changed != nil && f.changed("cluster-name") {
			return p, &ExitError{Code: 2, Err: fmt.Errorf("--cluster-name applies to --platform sim only: the %s lab's cluster is named "+
				"by the EC2 front's catalogue (%s), whose subnets and security groups carry that name", p.name, demo.DefaultAWSCluster("", "", nil).Name)}
		}
		return p, nil
	}
	return upPlatform{}, &ExitError{Code: 2, Err: fmt.Errorf("--platform %q: unknown platform (known: %s)", f.platform, strings.Join(upPlatformNames(), ", "))}
}

// controllersFor is --controllers, or the default when the flag was not given: the
// platform's, or upstream.Groups with --upstream.
func (f *upFlags) controllersFor(p upPlatform) string {
	if f.changed != nil && f.changed("controllers") {
		return f.controllers
	}
	if f.upstream {
		return upstream.Groups
	}
	return p.controllers
}

// seedInput is what a platform's seed needs.
type seedInput struct {
	c          client.Client
	kubeconfig []byte
	flags      *upFlags
	// ec2Export is the shell line that points AWS clients at the EC2 front.
	ec2Export           string
	machineAPINamespace string
	clusterAPINamespace string
}

// seeded says what was seeded and what to try first.
type seeded struct {
	summary string
	next    string
}

// seedPlatform seeds the platform's cluster (idempotent: a persistent lab keeps what it had)
// and returns a client of the lab for the progress report.
func seedPlatform(ctx context.Context, l *lab.Lab, f *upFlags, p upPlatform, ec2Export string) (seeded, client.Client, error) {
	c, err := client.New(l.Config, client.Options{Scheme: scheme.Scheme})
	if err != nil {
		return seeded{}, nil, err
	}
	if err := checkLabPlatform(ctx, c, l.Dir, p); err != nil {
		return seeded{}, nil, err
	}
	kc, err := os.ReadFile(l.KubeconfigPath)
	if err != nil {
		return seeded{}, nil, err
	}
	mapiNS, capiNS := manager.Env{}.Namespaces()
	s, err := p.seed(ctx, seedInput{c: c, kubeconfig: kc, flags: f, ec2Export: ec2Export,
		machineAPINamespace: mapiNS, clusterAPINamespace: capiNS})
	return s, c, err
}

// checkLabPlatform refuses to seed a lab whose Infrastructure says it was seeded for another
// platform.
func checkLabPlatform(ctx context.Context, c client.Client, dir string, p upPlatform) error {
	infra := &configv1.Infrastructure{}
	err := c.Get(ctx, client.ObjectKey{Name: "cluster"}, infra)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if have := infra.Spec.PlatformSpec.Type; have != p.infraType {
		was := string(have)
		for _, q := range upPlatforms() {
			if q.infraType == have {
				was = q.name
			}
		}
		return &ExitError{Code: 2, Err: fmt.Errorf("--platform %s: the lab in %s was seeded with --platform %s (Infrastructure cluster has platform %q); "+
			"start it with --platform %s, add --fresh to start over, or pick another --state-dir", p.name, dir, was, have, was)}
	}
	return nil
}

func seedSim(ctx context.Context, in seedInput) (seeded, error) {
	name := in.flags.clusterName
	cl := demo.Cluster{Name: name, Region: "sim-east-1", MachineAPINamespace: in.machineAPINamespace,
		ClusterAPINamespace: in.clusterAPINamespace, Kubeconfig: in.kubeconfig}
	if err := demo.EnsureCluster(ctx, in.c, cl); err != nil {
		return seeded{}, err
	}
	if err := demo.EnsureWorkload(ctx, in.c, cl); err != nil {
		return seeded{}, err
	}
	return seeded{
		summary: fmt.Sprintf("demo seeded: cluster %q, MachineSets %s in %s, MachineHealthCheck lab-workers",
			name, strings.Join(demo.MachineSetNames, ", "), in.machineAPINamespace),
		next: `kubectl get machinesets.machine.openshift.io,machines.machine.openshift.io -n openshift-machine-api
  machina plan
  machina migrate --all --to ClusterAPI --dry-run
  machina migrate --all --to ClusterAPI
  machina describe
  kubectl get machinesets.cluster.x-k8s.io,machines.cluster.x-k8s.io -n openshift-cluster-api
  machina migrate --all --to MachineAPI`,
	}, nil
}

func seedAWS(ctx context.Context, in seedInput) (seeded, error) {
	cl := demo.DefaultAWSCluster(in.machineAPINamespace, in.clusterAPINamespace, in.kubeconfig)
	if err := demo.EnsureAWSCluster(ctx, in.c, cl, awsLabReplicas); err != nil {
		return seeded{}, err
	}
	return seeded{
		summary: fmt.Sprintf("AWS cluster seeded: Infrastructure cluster (platform AWS, region %s, infrastructure name %s), "+
			"MachineSets %s in %s (AMI %s, %s), MachineHealthCheck %s-workers, Cluster API Cluster %s with an externally managed AWSCluster",
			cl.Region, cl.Name, strings.Join(cl.MachineSetNames(), ", "), cl.MachineAPINamespace, cl.AMI, cl.InstanceType, cl.Name, cl.Name),
		next: `kubectl get machinesets.machine.openshift.io,machines.machine.openshift.io -n openshift-machine-api -o wide
  machina describe
  machina plan
  machina migrate --all --to ClusterAPI   # the upstream CAPA controller takes the AWSMachines
  # the EC2 API of the lab's cloud, for the aws CLI and SDKs:
  ` + in.ec2Export + `
  aws ec2 describe-instances --filters Name=tag:kubernetes.io/cluster/` + cl.Name + `,Values=owned`,
	}, nil
}

// reportMachines prints how far the Machines in ns are whenever that changes, until every
// one is Running with a Node or ctx ends: a first boot takes a while.
func reportMachines(ctx context.Context, c client.Client, ns string, progress io.Writer) {
	last := ""
	_ = wait.PollUntilContextCancel(ctx, 2*time.Second, true, func(ctx context.Context) (bool, error) {
		var list machinev1beta1.MachineList
		if err := c.List(ctx, &list, client.InNamespace(ns)); err != nil {
			return false, nil // a report, not a check: try again at the next tick
		}
		running, nodes, failed := 0, 0, 0
		for _, m := range list.Items {
			switch ptr.Deref(m.Status.Phase, "") {
			case machinev1beta1.PhaseRunning:
				running++
			case machinev1beta1.PhaseFailed:
				failed++
			}
			if m.Status.NodeRef != nil {
				nodes++
			}
		}
		msg := fmt.Sprintf("machina up: Machines in %s: %d of %d Running, %d with a Node", ns, running, len(list.Items), nodes)
		if failed > 0 {
			msg += fmt.Sprintf(", %d Failed (machina describe shows why)", failed)
		}
		if msg != last {
			fmt.Fprintln(progress, msg)
			last = msg
		}
		return len(list.Items) > 0 && running == len(list.Items) && nodes == len(list.Items), nil
	})
}

// lockedWriter serialises writes from the progress report and the command.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
