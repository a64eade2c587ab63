package main

import (
	"cmp"
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"sync"
	"time"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/go-logr/logr"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/machina-dev/machina/internal/authority"
	"github.com/machina-dev/machina/internal/cloud/api"
	cloudclient "github.com/machina-dev/machina/internal/cloud/client"
	"github.com/machina-dev/machina/internal/scheme"
	"github.com/machina-dev/machina/internal/upstream"
)

// The identity and field manager of OpenShift's cluster autoscaler, and an ordinary
// administrator, as the soak's operations act.
const (
	soakAutoscalerUser    = "system:serviceaccount:openshift-machine-api:cluster-autoscaler"
	soakAutoscalerManager = "cluster-autoscaler"
	soakUser              = "soak-admin"
	soakRegion            = "sim-east-1"
	soakMHC               = "soak-workers"
)

// soakOptions are the command line of `bench soak`.
type soakOptions struct {
	Duration time.Duration
	Machines int
	Seed     uint64
	Sets     int
	// Settle bounds the wait for quiet after the operations stop (and again after the
	// final scale to 0).
	Settle time.Duration
	// Verbosity is the manager's log verbosity (1 = debug), for diagnosing a violation.
	Verbosity int
	// Faults are the fault kinds injected (-faults: "all" or a list of faultKinds).
	Faults string
	// Replicas is how many manager processes run, electing a leader when more than one.
	Replicas int
	// BelowEvery is the mean time between faults below the manager (apiserver, etcd,
	// compaction, partition, leader), injected in turn.
	BelowEvery time.Duration
	// CutMax is the longest a replica is cut off from the API server.
	CutMax time.Duration
	// Upstream runs the soak in the AWS lab under the controllers OpenShift users run
	// (machine-api-operator's, the upstream Cluster API core, CAPA) with machina's manager
	// running only upstream.Groups, instead of the simulated platform under machina's own.
	Upstream bool
}

// soakMain is `go run ./bench soak`: exit 0 when every invariant held, 1 on a violation.
func soakMain(args []string) int {
	fs := flag.NewFlagSet("soak", flag.ExitOnError)
	o := soakOptions{}
	fs.DurationVar(&o.Duration, "duration", 10*time.Minute, "how long the random operations run")
	fs.IntVar(&o.Machines, "machines", 60, "most Machines asked for at once (sum of replicas)")
	fs.Uint64Var(&o.Seed, "seed", uint64(time.Now().UnixNano()%100000), "random seed (printed; replay with the same one)")
	fs.IntVar(&o.Sets, "machinesets", 5, "MachineSets (4-6), alternately owned by each API")
	fs.DurationVar(&o.Settle, "settle", 5*time.Minute, "longest wait for quiet at the end")
	fs.IntVar(&o.Verbosity, "manager-verbosity", 0, "the manager's log verbosity in manager.log (1 = debug)")
	fs.StringVar(&o.Faults, "faults", faultCloud+","+faultManager, "fault kinds: all, or a comma-separated list of "+strings.Join(faultKinds, ", ")+
		" (see docs/migration.md, \"The soak\")")
	fs.IntVar(&o.Replicas, "replicas", 1, "manager processes; more than one elect a leader with a Lease, as config/default's Deployment")
	fs.DurationVar(&o.BelowEvery, "below-every", 25*time.Second, "mean time between faults below the manager")
	fs.DurationVar(&o.CutMax, "cut-max", time.Minute, "longest time a manager is cut off from the API server")
	fs.BoolVar(&o.Upstream, "upstream", false, "run in the AWS lab under machine-api-operator's controllers, the upstream Cluster API core "+
		"and CAPA (as `machina up --platform aws --upstream`), machina's manager running only "+upstream.Groups)
	_ = fs.Parse(args)
	if !o.Upstream {
		ctrllog.SetLogger(logr.Discard()) // -upstream logs to a file once the run's directory exists
	}
	if o.Sets < 2 || o.Machines < o.Sets || o.Replicas < 1 {
		fmt.Fprintln(os.Stderr, "soak: -machinesets must be at least 2, -machines at least -machinesets and -replicas at least 1")
		return 2
	}
	if _, err := parseFaults(o.Faults, o.Replicas); err != nil {
		fmt.Fprintln(os.Stderr, "soak:", err)
		return 2
	}
	rep, err := runSoak(o)
	if rep != nil {
		rep.print(os.Stdout, o)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "soak (seed %d): %v\n", o.Seed, err)
		return 1
	}
	if rep.failed() {
		return 1
	}
	return 0
}

// soak is one run: the environment, the identities it acts as and its random source.
type soak struct {
	o          soakOptions
	plat       soakPlatform
	e          *env
	upstream   *upstream.Controllers // -upstream: machine-api-operator's controllers and the upstream core
	rnd        *rand.Rand
	user       client.Client
	autoscaler client.Client
	cloud      *cloudclient.Client
	sets       []string
	rep        *soakReport
	check      *checker
	target     string // what the current operation acts on, for the log
	faults     map[string]bool
	replicas   []*replica
	below      *below
	// leaderLost are the times a leader was SIGKILLed or cut off: checkTerms measures how
	// long until the next term began.
	leaderLost []time.Time
}

// withDefaults fills what a caller (a test) left zero with the flags' defaults.
func (o soakOptions) withDefaults() soakOptions {
	o.Faults = cmp.Or(o.Faults, faultCloud+","+faultManager)
	o.Replicas = cmp.Or(o.Replicas, 1)
	o.BelowEvery = cmp.Or(o.BelowEvery, 25*time.Second)
	o.CutMax = cmp.Or(o.CutMax, time.Minute)
	return o
}

func runSoak(o soakOptions) (*soakReport, error) {
	o = o.withDefaults()
	faults, err := parseFaults(o.Faults, o.Replicas)
	if err != nil {
		return nil, err
	}
	plat := soakPlatformFor(o)
	fmt.Fprintf(os.Stderr, "soak: seed %d, %s, up to %d Machines in %d MachineSets, %s, faults %s, %d manager(s)\n",
		o.Seed, o.Duration, o.Machines, o.Sets, plat.name, o.Faults, o.Replicas)
	eo := plat.env
	eo.noManager, eo.audit, eo.labGC = true, o.Replicas > 1, true
	e, err := startEnvWith(eo)
	if err != nil {
		return nil, err
	}
	defer e.stop()
	s := &soak{o: o, plat: plat, e: e, rnd: rand.New(rand.NewPCG(o.Seed, 0x50a4)), rep: newSoakReport(), faults: faults}
	defer func() { s.upstream.Stop() }() // before the lab stops (defers run last first)
	defer s.stopReplicas()
	s.replicas, err = e.startReplicas(plat.env, o.Replicas, false)
	if err == nil {
		err = s.setup(context.Background())
	}
	if err != nil {
		e.keep = true
		return nil, err
	}
	s.check = newChecker(s.e, s.rep, plat.region, plat.terminating)
	ctx, stopCheck := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { s.check.run(ctx) })
	wg.Go(func() { s.supervise(ctx) })
	err = s.churn(context.Background())
	if err == nil {
		err = s.finish(context.Background())
	}
	stopCheck()
	wg.Wait()
	if err == nil {
		err = s.checkTerms()
	}
	e.keep = err != nil || s.rep.failed()
	if d, perr := time.ParseDuration(os.Getenv("MACHINA_SOAK_HOLD")); perr == nil && e.keep {
		// Leave the lab and the manager running for a look at the objects.
		fmt.Fprintf(os.Stderr, "soak failed; the lab stays up for %s: kubectl --kubeconfig %s\n", d, e.lab.KubeconfigPath)
		time.Sleep(d)
	}
	return s.rep, err
}

// supervise restarts exited replicas every second until ctx ends.
func (s *soak) supervise(ctx context.Context) {
	for ctx.Err() == nil {
		if err := s.superviseReplicas(); err != nil {
			s.check.note("%v", err)
		}
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
}

// setup creates the cluster, the MachineSets (alternately Machine API and Cluster API
// authoritative), a MachineHealthCheck over all of them, the identities and the faults.
func (s *soak) setup(ctx context.Context) error {
	kc, err := os.ReadFile(s.e.lab.KubeconfigPath)
	if err != nil {
		return err
	}
	newMachineSet, err := s.plat.seed(ctx, s, kc)
	if err != nil {
		return err
	}
	for i := range s.o.Sets {
		name := fmt.Sprintf("soak-%d", i)
		ms := newMachineSet(name, i, 2)
		if i%2 == 1 {
			ms.Spec.AuthoritativeAPI = machinev1beta1.MachineAuthorityClusterAPI
		}
		if err := s.e.client.Create(ctx, ms); err != nil {
			return fmt.Errorf("creating MachineSet %s: %w", name, err)
		}
		s.sets = append(s.sets, name)
	}
	mhc := &machinev1beta1.MachineHealthCheck{ObjectMeta: metav1.ObjectMeta{Name: soakMHC, Namespace: mapiNS},
		Spec: machinev1beta1.MachineHealthCheckSpec{
			Selector: metav1.LabelSelector{MatchLabels: map[string]string{"machine.openshift.io/cluster-api-machine-role": "worker"}},
			UnhealthyConditions: []machinev1beta1.UnhealthyCondition{
				{Type: corev1.NodeReady, Status: corev1.ConditionFalse, Timeout: metav1.Duration{Duration: 30 * time.Second}},
				{Type: corev1.NodeReady, Status: corev1.ConditionUnknown, Timeout: metav1.Duration{Duration: 30 * time.Second}},
			},
			MaxUnhealthy:       ptr.To(intstr.FromString("40%")),
			NodeStartupTimeout: &metav1.Duration{Duration: 5 * time.Minute},
		}}
	if err := s.e.client.Create(ctx, mhc); err != nil {
		return fmt.Errorf("creating MachineHealthCheck: %w", err)
	}
	if s.user, err = s.clientAs(soakUser, "system:masters"); err != nil {
		return err
	}
	if s.autoscaler, err = s.clientAs(soakAutoscalerUser, "system:serviceaccounts", "system:serviceaccounts:openshift-machine-api", "system:masters"); err != nil {
		return err
	}
	s.cloud, err = cloudclient.New(s.e.cloud.URL(), cloudclient.Options{})
	return err
}

func (s *soak) clientAs(user string, groups ...string) (client.Client, error) {
	cfg, err := s.e.lab.UserConfig(user, groups...)
	if err != nil {
		return nil, err
	}
	return client.New(cfg, client.Options{Scheme: scheme.Scheme})
}

// setFaults replaces the cloud's faults: 10 % errors, some throttling and a fresh random
// latency of 500 ms–2 s on a third of the calls.
func (s *soak) setFaults(ctx context.Context) error {
	if _, err := s.cloud.ClearFaults(ctx); err != nil {
		return err
	}
	for _, op := range s.plat.faultOps {
		for _, f := range []api.Fault{
			{Kind: api.FaultError, Operation: op, Rate: 0.10, StatusCode: 500},
			{Kind: api.FaultThrottle, Operation: op, Rate: 0.05, RetryAfterSeconds: 1},
			{Kind: api.FaultLatency, Operation: op, Rate: 0.3, LatencyMillis: 500 + s.rnd.IntN(1500)},
		} {
			if _, err := s.cloud.CreateFault(ctx, f); err != nil {
				return fmt.Errorf("injecting %s fault on %s: %w", f.Kind, op, err)
			}
		}
	}
	s.rep.faultSets++
	return nil
}

// churn runs random operations until the duration is over. With the default faults, a
// manager is SIGKILLed and restarted every 20–60 s, the cloud's faults are re-rolled every
// 30 s and an instance is killed now and then; faults below the manager come in turn
// (belowStep).
func (s *soak) churn(ctx context.Context) error {
	start := time.Now()
	never := start.Add(365 * 24 * time.Hour)
	nextKill, nextFaults, nextInstanceKill := never, never, never
	if s.faults[faultManager] {
		nextKill = start.Add(s.between(20, 60))
	}
	if s.faults[faultCloud] {
		nextFaults, nextInstanceKill = start, start.Add(s.between(20, 60))
	}
	s.below = newBelow(s.faults, start)
	// At least until every kind below the manager has come once: a short run must not end
	// before its last kind for waiting on a leader.
	for time.Since(start) < s.o.Duration || !s.below.firstRoundDone() {
		if err := s.upstreamFailed(); err != nil {
			return err
		}
		now := time.Now()
		if err := s.belowStep(ctx, now); err != nil {
			return err
		}
		switch {
		case now.After(nextKill):
			if err := s.restartManager(); err != nil {
				return err
			}
			nextKill = now.Add(s.between(20, 60))
		case now.After(nextFaults):
			if err := s.setFaults(ctx); err != nil {
				return err
			}
			nextFaults = now.Add(30 * time.Second)
		case now.After(nextInstanceKill):
			s.killInstance(ctx)
			nextInstanceKill = now.Add(s.between(20, 60))
		default:
			s.randomOp(ctx)
		}
		time.Sleep(time.Duration(300+s.rnd.IntN(1700)) * time.Millisecond)
	}
	return nil
}

func (s *soak) between(lo, hi int) time.Duration {
	return time.Duration(lo+s.rnd.IntN(hi-lo+1)) * time.Second
}

// restartManager SIGKILLs a random manager replica and starts it again with the same
// command line (its log is appended to).
func (s *soak) restartManager() error {
	r := s.replicas[s.rnd.IntN(len(s.replicas))]
	if len(s.replicas) > 1 && r.leading() {
		s.check.endOutage(time.Now().Add(leaderGap)) // the other takes over when the Lease expires
		s.leaderLost = append(s.leaderLost, time.Now())
	}
	if err := r.kill(); err != nil {
		return err
	}
	if err := r.start(); err != nil {
		return err
	}
	s.rep.kills++
	s.check.note("manager %s SIGKILLed and restarted as %s (pid %d)", r.name, r.process(), r.pid())
	return nil
}

// killInstance terminates one random running instance behind the controllers' back. An
// instance the checker counts as possibly leaked (no Machine on either side) is never picked:
// killing it would hide the leak the checker is about to report.
func (s *soak) killInstance(ctx context.Context) {
	var alive []api.Instance
	for _, i := range s.e.cloud.Instances(s.plat.region) {
		if i.State == api.StateRunning && !s.check.orphaned(i.InstanceID) {
			alive = append(alive, i)
		}
	}
	if len(alive) == 0 {
		return
	}
	victim := alive[s.rnd.IntN(len(alive))]
	if _, err := s.cloud.KillInstances(ctx, api.KillInstancesRequest{InstanceIDs: []string{victim.InstanceID}}); err != nil {
		s.check.note("killing instance %s: %v", victim.InstanceID, err)
		return
	}
	s.rep.instancesKilled++
	s.check.note("instance %s (launched for Machine %s) killed", victim.InstanceID, launchedFor(victim))
}

// scaleBody is the scale subresource request for replicas.
func scaleBody(ns, name string, replicas int32) client.SubResourceUpdateOption {
	return client.WithSubResourceBody(&autoscalingv1.Scale{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: autoscalingv1.ScaleSpec{Replicas: replicas}})
}

// capiPaused says whether a Cluster API object carries the paused annotation.
func capiPaused(o client.Object) bool {
	_, ok := o.GetAnnotations()[clusterv1.PausedAnnotation]
	return ok
}

// mhcAuthority is a Machine API MachineHealthCheck's requested and current authority.
func mhcAuthority(m *machinev1beta1.MachineHealthCheck) (spec, status string) {
	return m.Annotations[authority.MHCAuthoritativeAPIAnnotation], m.Annotations[authority.MHCStatusAuthoritativeAPIAnnotation]
}

// finish stops the faults and kills, waits for quiet and checks the end state, then scales
// everything to 0 and checks that nothing is left.
func (s *soak) finish(ctx context.Context) error {
	s.healDue(time.Now(), true)
	if _, err := s.cloud.ClearFaults(ctx); err != nil {
		return err
	}
	s.check.stopFaults()
	s.check.note("operations over; faults cleared")
	if st, err := s.cloud.Stats(ctx); err == nil {
		for _, op := range st.Operations {
			s.rep.faultsInjected += op.Injected
		}
	}
	if err := s.check.waitQuiet(ctx, "settled", s.o.Settle, false); err != nil {
		return err
	}
	var err error
	for range 10 { // the webhook may still be coming up after the last restart
		if err = s.scaleAllToZero(ctx); err == nil {
			break
		}
		time.Sleep(2 * time.Second)
	}
	if err != nil {
		return err
	}
	s.check.note("every MachineSet scaled to 0")
	return s.check.waitQuiet(ctx, "scaled to 0 and settled", s.o.Settle, true)
}
