package main

import (
	"context"
	"fmt"
	"os"
	"time"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	capav1 "sigs.k8s.io/cluster-api-provider-aws/v2/api/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/machina-dev/machina/internal/demo"
	"github.com/machina-dev/machina/internal/lab"
)

// migratePlatform is what the migrate and sync-latency scenarios need of a platform.
type migratePlatform struct {
	env envOptions
	// seed creates the cluster's objects (and starts the platform's Cluster API provider,
	// if it is a separate process) and returns how to make MachineSet i of the workload.
	seed func(ctx context.Context, e *env, kubeconfig []byte) (newMachineSet, error)
	// takeover, when set, counts the Machines whose Cluster API provider has not yet taken
	// over their infrastructure Machine after the migration; takeoverWhat names it.
	takeover     func(ctx context.Context, e *env, n int) (int, error)
	takeoverWhat string
	// calls counts the cloud calls so far, by operation; callsLabel names them.
	calls      func(e *env) map[string]int64
	callsLabel string
}

// newMachineSet returns the Machine API MachineSet i of the workload, named name.
type newMachineSet func(name string, i int, replicas int32) *machinev1beta1.MachineSet

func migratePlatformFor(name string) (migratePlatform, error) {
	mp, err := mapiPlatformFor(name)
	if err != nil {
		return migratePlatform{}, err
	}
	p := migratePlatform{calls: mp.calls, callsLabel: mp.callsLabel}
	switch name {
	case "sim":
		p.env, p.seed = envOptions{groups: "*"}, simSeed
	case "aws":
		// As `machina up --platform aws`: every group but the simulated provider's.
		p.env, p.seed = envOptions{groups: "*,-sim", ec2: true}, awsSeed
		p.takeover, p.takeoverWhat = capaTakeoverLeft, "CAPA's takeover of every AWSMachine (its finalizer, not paused, ready)"
	}
	return p, nil
}

// simSeed is the simulated provider's cluster; MachineSets alternate between two zones.
func simSeed(ctx context.Context, e *env, kubeconfig []byte) (newMachineSet, error) {
	cl := demo.Cluster{Name: "bench", Region: "sim-east-1", MachineAPINamespace: mapiNS, ClusterAPINamespace: capiNS, Kubeconfig: kubeconfig}
	if err := demo.EnsureCluster(ctx, e.client, cl); err != nil {
		return nil, err
	}
	return func(name string, i int, replicas int32) *machinev1beta1.MachineSet {
		return demo.MachineSet(cl, name, []string{"sim-east-1a", "sim-east-1b"}[i%2], replicas)
	}, nil
}

// awsSeed is the OpenShift-style AWS cluster of the EC2 front's catalogue with the upstream
// CAPA controller running for the Cluster API namespace, as OpenShift runs it (the sync writes
// the bootstrap Secret CAPA reads); MachineSets alternate between the cluster's zones.
func awsSeed(ctx context.Context, e *env, kubeconfig []byte) (newMachineSet, error) {
	if err := startCAPA(ctx, e); err != nil {
		return nil, err
	}
	cl := demo.DefaultAWSCluster(mapiNS, capiNS, kubeconfig)
	if err := demo.EnsureAWSClusterObjects(ctx, e.client, cl); err != nil {
		return nil, err
	}
	return func(name string, i int, replicas int32) *machinev1beta1.MachineSet {
		return cl.MachineSet(name, cl.Zones[i%len(cl.Zones)], replicas)
	}, nil
}

// startCAPA starts the upstream CAPA controller against the lab and the EC2 front, limited to
// the Cluster API namespace. Its first start builds it; the lab's Stop stops it.
func startCAPA(ctx context.Context, e *env) error {
	ctx, cancel := context.WithTimeout(ctx, 40*time.Minute)
	defer cancel()
	start := time.Now()
	front := e.cloud.EC2()
	capa, err := e.lab.StartCAPA(ctx, lab.CAPAOptions{EC2URL: front.URL(), Region: front.Region(), Namespace: capiNS, Progress: os.Stderr})
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "bench: CAPA up in %s, log %s\n", time.Since(start).Round(time.Second), capa.LogPath)
	return nil
}

// capaTakeoverLeft counts the n Machines whose AWSMachine CAPA has not yet taken: taken is
// CAPA's finalizer present, no paused annotation and status.ready true.
func capaTakeoverLeft(ctx context.Context, e *env, n int) (int, error) {
	var list capav1.AWSMachineList
	if err := e.watched.List(ctx, &list, client.InNamespace(capiNS)); err != nil {
		return 0, err
	}
	taken := 0
	for i := range list.Items {
		am := &list.Items[i]
		_, paused := am.Annotations[clusterv1.PausedAnnotation]
		if controllerutil.ContainsFinalizer(am, capav1.MachineFinalizer) && !paused && am.Status.Ready {
			taken++
		}
	}
	return n - taken, nil
}
