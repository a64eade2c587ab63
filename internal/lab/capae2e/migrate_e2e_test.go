package capae2e_test

import (
	"context"
	"fmt"
	"maps"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsec2 "github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"
	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
	capav1 "sigs.k8s.io/cluster-api-provider-aws/v2/api/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/machina-dev/machina/internal/cli"
	"github.com/machina-dev/machina/internal/cloud/api"
	"github.com/machina-dev/machina/internal/demo"
	"github.com/machina-dev/machina/internal/manager"
	"github.com/machina-dev/machina/internal/testenv"
)

// TestCAPAMigrationRoundTrip migrates an AWS MachineSet to the Cluster API and back with the
// upstream CAPA controller as the Cluster API side's provider, in one lab: machina's Machine
// API controllers with the AWS actuator, sync, migration and Cluster API controllers, CAPA,
// all against the EC2 front.
//
//   - A Machine API MachineSet of one replica runs: the AWS actuator launches the instance.
//   - Handed to the Cluster API (`machina migrate machineset/... machine/... --to ClusterAPI
//     --wait`, run in the test), the Machine keeps its provider
//     ID, the handover launches and terminates nothing, and the unpaused AWSMachine is CAPA's:
//     its finalizer, status ready with instanceState running written by CAPA's field manager.
//   - The Cluster API MachineSet scaled to two: CAPA launches one instance (with its cluster
//     tag), which becomes a Node; its Machine is mirrored to a Machine API Machine born
//     ClusterAPI-authoritative.
//   - Handed back to the Machine API (the MachineSet and both Machines): the AWSMachines are
//     paused again with CAPA's Paused=True and without its finalizer, the Machine API
//     Machines carry the actuator's finalizer and run on the same two instances; nothing is
//     launched or terminated.
//   - Deleting the CAPA-launched Machine on the Machine API side terminates exactly its
//     instance; the MachineSet replaces it through the actuator.
func TestCAPAMigrationRoundTrip(t *testing.T) {
	start := time.Now()
	e := testenv.Start(t, testenv.Options{Groups: "machineapi,aws,sync,migration,clusterapi", EC2: true})
	ctx := context.Background()
	mapiNS, capiNS := manager.Env{}.Namespaces()
	e.StartCAPA(capiNS)
	t.Logf("lab and CAPA up after %s", time.Since(start).Round(time.Second))

	kc, err := os.ReadFile(e.Lab.KubeconfigPath)
	if err != nil {
		t.Fatal(err)
	}
	cl := demo.DefaultAWSCluster(mapiNS, capiNS, kc)
	if err := demo.EnsureAWSClusterObjects(ctx, e.Client, cl); err != nil {
		t.Fatal(err)
	}
	const name = "capa-migrate"
	if err := e.Client.Create(ctx, cl.MachineSet(name, cl.Zones[0], 1)); err != nil {
		t.Fatal(err)
	}

	// The Machine API runs the first instance.
	ids := waitMAPIHeld(t, e, name, 1, nil)
	var firstMachine string
	for m := range ids {
		firstMachine = m
	}
	first := instanceID(ids[firstMachine])
	checkLive(t, e, "the Machine API launched the first instance", first)
	calls := e.Server.EC2().Calls()
	t.Logf("Machine API Machine %s runs on %s after %s", firstMachine, first, time.Since(start).Round(time.Second))

	// To the Cluster API: CAPA adopts the instance.
	requestAuthority(t, e, name, []string{firstMachine}, machinev1beta1.MachineAuthorityClusterAPI)
	waitCAPIHeld(t, e, name, ids)
	checkNoLaunchOrTerminate(t, e, calls, "the handover to the Cluster API")
	checkLive(t, e, "after the handover to the Cluster API", first)
	t.Logf("handed to the Cluster API after %s", time.Since(start).Round(time.Second))

	// Scaling the Cluster API MachineSet: CAPA launches, the sync mirrors.
	cms := &clusterv1.MachineSet{}
	if err := e.Client.Get(ctx, client.ObjectKey{Namespace: capiNS, Name: name}, cms); err != nil {
		t.Fatal(err)
	}
	before, err := e.Cloud.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	base := cms.DeepCopy()
	cms.Spec.Replicas = ptr.To[int32](2)
	if err := e.Client.Patch(ctx, cms, client.MergeFrom(base)); err != nil {
		t.Fatal(err)
	}
	second := waitRunning(t, e, cms, first)
	secondID := second.instanceID
	if owned := describeTagged(t, e, "sigs.k8s.io/cluster-api-provider-aws/cluster/"+cl.Name); !slices.Equal(owned, []string{secondID}) {
		t.Errorf("instances with CAPA's cluster tag: %v, want only the one CAPA launched, %s", owned, secondID)
	}
	waitMirrorBornCAPI(t, e, second.machine.Name, second.machine.Spec.ProviderID)
	ids[second.machine.Name] = second.machine.Spec.ProviderID
	checkOneLaunch(t, e, before, "scaling to two")
	checkLive(t, e, "after scaling the Cluster API MachineSet to two", first, secondID)
	calls = e.Server.EC2().Calls()
	t.Logf("CAPA launched %s for %s after %s", secondID, second.machine.Name, time.Since(start).Round(time.Second))

	// Back to the Machine API: the actuator takes over both instances.
	requestAuthority(t, e, name, slices.Sorted(maps.Keys(ids)), machinev1beta1.MachineAuthorityMachineAPI)
	if got := waitMAPIHeld(t, e, name, 2, ids); !maps.Equal(got, ids) {
		t.Errorf("providerIDs back under the Machine API: %v, want %v", got, ids)
	}
	checkNoLaunchOrTerminate(t, e, calls, "the handover back to the Machine API")
	checkLive(t, e, "after the handover back to the Machine API", first, secondID)
	t.Logf("handed back to the Machine API after %s", time.Since(start).Round(time.Second))

	// Deleting the CAPA-launched Machine on the Machine API side terminates exactly its instance.
	doomed := &machinev1beta1.Machine{}
	if err := e.Client.Get(ctx, client.ObjectKey{Namespace: mapiNS, Name: second.machine.Name}, doomed); err != nil {
		t.Fatal(err)
	}
	if err := e.Client.Delete(ctx, doomed); err != nil {
		t.Fatal(err)
	}
	e.Eventually(5*time.Minute, "the deleted Machine's instance terminated and both its copies gone", func(ctx context.Context) (bool, string, error) {
		states := instanceStates(t, e)
		mapiErr := e.Client.Get(ctx, client.ObjectKeyFromObject(doomed), &machinev1beta1.Machine{})
		capiErr := e.Client.Get(ctx, client.ObjectKey{Namespace: capiNS, Name: doomed.Name}, &clusterv1.Machine{})
		gone := apiNotFound(mapiErr) && apiNotFound(capiErr)
		return states[secondID] == types.InstanceStateNameTerminated && gone,
			fmt.Sprintf("instances %v; Machine API copy: %v; Cluster API copy: %v", states, mapiErr, capiErr), nil
	})
	replaced := waitMAPIHeld(t, e, name, 2, nil)
	var third string
	for m, pid := range replaced {
		if m != firstMachine {
			third = instanceID(pid)
		}
	}
	if instanceID(replaced[firstMachine]) != first || third == "" || third == first || third == secondID {
		t.Errorf("after the deletion the MachineSet's Machines are %v, want %s on %s and a replacement", replaced, firstMachine, first)
	}
	states := instanceStates(t, e)
	var terminated []string
	for id, s := range states {
		if s == types.InstanceStateNameTerminated || s == types.InstanceStateNameShuttingDown {
			terminated = append(terminated, id)
		}
	}
	if !slices.Equal(terminated, []string{secondID}) {
		t.Errorf("terminated instances %v, want exactly the deleted Machine's %s (all: %v)", terminated, secondID, states)
	}
	checkLive(t, e, "after the replacement", first, third)
	t.Logf("wall time of the round trip, lab start included: %s", time.Since(start).Round(time.Second))
}

// requestAuthority runs `machina migrate machineset/<set> machine/<name>... --to <to> --wait`
// against the lab, as a user would, and fails the test if the command fails.
func requestAuthority(t *testing.T, e *testenv.Env, set string, machines []string, to machinev1beta1.MachineAuthority) {
	t.Helper()
	args := []string{"migrate", "machineset/" + set}
	for _, m := range machines {
		args = append(args, "machine/"+m)
	}
	args = append(args, "--to", string(to), "--wait", "--timeout", "5m", "--kubeconfig", e.Lab.KubeconfigPath,
		"--namespace", demoMAPINS())
	var out strings.Builder
	cmd := cli.NewRootCommand()
	cmd.SetArgs(args)
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	err := cmd.ExecuteContext(context.Background())
	t.Logf("machina %s:\n%s", strings.Join(args[:len(args)-4], " "), out.String())
	if err != nil {
		t.Fatalf("machina migrate to %s: %v", to, err)
	}
	if want := "all " + strconv.Itoa(1+len(machines)) + " resource(s) are " + string(to) + "-authoritative"; !strings.Contains(out.String(), want) {
		t.Errorf("machina migrate printed no %q", want)
	}
}

// waitMAPIHeld waits until the Machine API holds the MachineSet and its n Machines: the
// MachineSet MachineAPI-authoritative with a paused Cluster API copy; each Machine
// MachineAPI-authoritative, Running with the actuator's finalizer and a providerID (the one
// in want, when given), its Cluster API copy and AWSMachine paused, the AWSMachine without
// CAPA's finalizer and with the Paused=True condition CAPA writes. It returns the providerIDs
// by Machine name.
func waitMAPIHeld(t *testing.T, e *testenv.Env, set string, n int, want map[string]string) map[string]string {
	t.Helper()
	var ids map[string]string
	e.Eventually(5*time.Minute, fmt.Sprintf("%s and %d Machines held by the Machine API", set, n), func(ctx context.Context) (bool, string, error) {
		ids = map[string]string{}
		ok, desc, err := setHeld(ctx, e, set, machinev1beta1.MachineAuthorityMachineAPI)
		if !ok || err != nil {
			return ok, desc, err
		}
		machines, err := mapiMachines(ctx, e, set)
		if err != nil {
			return false, "", err
		}
		var seen []string
		for i := range machines {
			m := &machines[i]
			pid := ptr.Deref(m.Spec.ProviderID, "")
			cm, am, desc := copies(ctx, e, m.Name)
			if am != nil {
				desc += fmt.Sprintf(", AWSMachine paused %v finalizers %v Paused condition %v", hasPausedAnnotation(am), am.Finalizers, pausedCondition(am))
			}
			desc = fmt.Sprintf("%s: authority %q phase %v providerID %q finalizers %v; %s", m.Name, m.Status.AuthoritativeAPI,
				ptr.Deref(m.Status.Phase, ""), pid, m.Finalizers, desc)
			seen = append(seen, desc)
			if m.DeletionTimestamp != nil || m.Status.AuthoritativeAPI != machinev1beta1.MachineAuthorityMachineAPI ||
				ptr.Deref(m.Status.Phase, "") != machinev1beta1.PhaseRunning || pid == "" ||
				!controllerutil.ContainsFinalizer(m, machinev1beta1.MachineFinalizer) || cm == nil || am == nil ||
				!hasPausedAnnotation(cm) || !hasPausedAnnotation(am) || controllerutil.ContainsFinalizer(am, capav1.MachineFinalizer) {
				return false, strings.Join(seen, "; "), nil
			}
			// CAPA acknowledges the pause (its paused helper's condition).
			if pausedCondition(am) != corev1.ConditionTrue || !statusFieldBy(am, capaFieldManager, "f:conditions") {
				return false, strings.Join(seen, "; "), nil
			}
			if w, ok := want[m.Name]; want != nil && (!ok || w != pid) {
				return false, strings.Join(seen, "; "), fmt.Errorf("Machine %s runs on %q under the Machine API, want %q (Machines %v)", m.Name, pid, w, want)
			}
			ids[m.Name] = pid
		}
		return len(machines) == n, strings.Join(seen, "; "), nil
	})
	return ids
}

// waitCAPIHeld waits until the Cluster API holds the MachineSet and the Machines of ids with
// the same providerIDs: both MachineSet copies say ClusterAPI and the Cluster API one is
// unpaused; each Machine's Cluster API copy runs as machineRunning checks (CAPA's AWSMachine
// status, Node), unpaused, with CAPA's finalizer and CAPA owning status.instanceState.
func waitCAPIHeld(t *testing.T, e *testenv.Env, set string, ids map[string]string) {
	t.Helper()
	e.Eventually(5*time.Minute, set+" and its Machines held by the Cluster API with CAPA", func(ctx context.Context) (bool, string, error) {
		ok, desc, err := setHeld(ctx, e, set, machinev1beta1.MachineAuthorityClusterAPI)
		if !ok || err != nil {
			return ok, desc, err
		}
		var seen []string
		for name, pid := range ids {
			m := &machinev1beta1.Machine{}
			if err := e.Client.Get(ctx, client.ObjectKey{Namespace: demoMAPINS(), Name: name}, m); err != nil {
				return false, "", err
			}
			cm, am, desc := copies(ctx, e, name)
			desc = fmt.Sprintf("%s: authority %q; %s", name, m.Status.AuthoritativeAPI, desc)
			seen = append(seen, desc)
			if m.Status.AuthoritativeAPI != machinev1beta1.MachineAuthorityClusterAPI || cm == nil || am == nil {
				return false, strings.Join(seen, "; "), nil
			}
			if cm.Spec.ProviderID != pid || ptr.Deref(m.Spec.ProviderID, "") != pid {
				return false, desc, fmt.Errorf("Machine %s: providerID %q / Cluster API %q, was %q", name, ptr.Deref(m.Spec.ProviderID, ""), cm.Spec.ProviderID, pid)
			}
			running, rdesc, err := machineRunning(ctx, e, cm, "")
			if err != nil {
				return false, rdesc, err
			}
			if !running || hasPausedAnnotation(cm) || hasPausedAnnotation(am) ||
				!controllerutil.ContainsFinalizer(am, capav1.MachineFinalizer) || !statusFieldBy(am, capaFieldManager, "f:instanceState") {
				return false, strings.Join(append(seen, rdesc), "; "), nil
			}
		}
		return true, strings.Join(seen, "; "), nil
	})
}

// waitMirrorBornCAPI waits for the Machine API mirror of a Machine the Cluster API
// MachineSet created: ClusterAPI-authoritative in spec and status, with its providerID and
// the Running phase brought back by the sync.
func waitMirrorBornCAPI(t *testing.T, e *testenv.Env, name, providerID string) {
	t.Helper()
	e.Eventually(2*time.Minute, "Machine API mirror of "+name, func(ctx context.Context) (bool, string, error) {
		m := &machinev1beta1.Machine{}
		if err := e.Client.Get(ctx, client.ObjectKey{Namespace: demoMAPINS(), Name: name}, m); err != nil {
			return false, err.Error(), client.IgnoreNotFound(err)
		}
		desc := fmt.Sprintf("spec authority %q status %q providerID %q phase %v", m.Spec.AuthoritativeAPI, m.Status.AuthoritativeAPI,
			ptr.Deref(m.Spec.ProviderID, ""), ptr.Deref(m.Status.Phase, ""))
		if m.Status.AuthoritativeAPI == machinev1beta1.MachineAuthorityMachineAPI || m.Status.AuthoritativeAPI == machinev1beta1.MachineAuthorityMigrating {
			return false, desc, fmt.Errorf("the mirror of a Cluster API-born Machine is %s-authoritative: %s", m.Status.AuthoritativeAPI, desc)
		}
		return m.Spec.AuthoritativeAPI == machinev1beta1.MachineAuthorityClusterAPI && m.Status.AuthoritativeAPI == machinev1beta1.MachineAuthorityClusterAPI &&
			ptr.Deref(m.Spec.ProviderID, "") == providerID && ptr.Deref(m.Status.Phase, "") == machinev1beta1.PhaseRunning, desc, nil
	})
}

// setHeld reports whether both copies of the MachineSet show authority: the Machine API
// copy's status, and the Cluster API copy paused unless it is the Cluster API.
func setHeld(ctx context.Context, e *testenv.Env, set string, authority machinev1beta1.MachineAuthority) (bool, string, error) {
	ms := &machinev1beta1.MachineSet{}
	if err := e.Client.Get(ctx, client.ObjectKey{Namespace: demoMAPINS(), Name: set}, ms); err != nil {
		return false, "", err
	}
	cms := &clusterv1.MachineSet{}
	if err := e.Client.Get(ctx, client.ObjectKey{Namespace: demoCAPINS(), Name: set}, cms); err != nil {
		return false, err.Error(), client.IgnoreNotFound(err)
	}
	paused := hasPausedAnnotation(cms)
	desc := fmt.Sprintf("MachineSet authority %q, Cluster API copy paused %v", ms.Status.AuthoritativeAPI, paused)
	return ms.Status.AuthoritativeAPI == authority && paused == (authority != machinev1beta1.MachineAuthorityClusterAPI), desc, nil
}

// copies returns a Machine's Cluster API copy and AWSMachine (nil when missing).
func copies(ctx context.Context, e *testenv.Env, name string) (*clusterv1.Machine, *capav1.AWSMachine, string) {
	cm := &clusterv1.Machine{}
	if err := e.Client.Get(ctx, client.ObjectKey{Namespace: demoCAPINS(), Name: name}, cm); err != nil {
		return nil, nil, "Cluster API copy: " + err.Error()
	}
	desc := fmt.Sprintf("Cluster API copy paused %v providerID %q phase %s", hasPausedAnnotation(cm), cm.Spec.ProviderID, cm.Status.Phase)
	am := &capav1.AWSMachine{}
	if err := e.Client.Get(ctx, client.ObjectKey{Namespace: cm.Namespace, Name: cm.Spec.InfrastructureRef.Name}, am); err != nil {
		return cm, nil, desc + ", AWSMachine: " + err.Error()
	}
	return cm, am, desc
}

func mapiMachines(ctx context.Context, e *testenv.Env, set string) ([]machinev1beta1.Machine, error) {
	var list machinev1beta1.MachineList
	err := e.Client.List(ctx, &list, client.InNamespace(demoMAPINS()), client.MatchingLabels{"machine.openshift.io/cluster-api-machineset": set})
	return list.Items, err
}

func demoMAPINS() string { ns, _ := manager.Env{}.Namespaces(); return ns }
func demoCAPINS() string { _, ns := manager.Env{}.Namespaces(); return ns }

func hasPausedAnnotation(o client.Object) bool {
	_, ok := o.GetAnnotations()[clusterv1.PausedAnnotation]
	return ok
}

// pausedCondition is the status of the AWSMachine's Paused condition ("" when absent).
func pausedCondition(am *capav1.AWSMachine) corev1.ConditionStatus {
	for _, c := range am.Status.Conditions {
		if c.Type == "Paused" {
			return c.Status
		}
	}
	return ""
}

// statusFieldBy reports whether manager owns the status field (in managed fields' "f:name"
// form) of obj.
func statusFieldBy(obj client.Object, manager, field string) bool {
	for _, f := range obj.GetManagedFields() {
		if f.Manager == manager && f.Subresource == "status" && f.FieldsV1 != nil && strings.Contains(f.FieldsV1.GetRawString(), `"`+field+`"`) {
			return true
		}
	}
	return false
}

func apiNotFound(err error) bool { return err != nil && client.IgnoreNotFound(err) == nil }

// instanceStates lists every instance the EC2 front knows (any state) through aws-sdk-go-v2.
func instanceStates(t *testing.T, e *testenv.Env) map[string]types.InstanceStateName {
	t.Helper()
	out := map[string]types.InstanceStateName{}
	p := awsec2.NewDescribeInstancesPaginator(ec2Client(e), &awsec2.DescribeInstancesInput{})
	for p.HasMorePages() {
		page, err := p.NextPage(context.Background())
		if err != nil {
			t.Fatalf("DescribeInstances: %v", err)
		}
		for _, r := range page.Reservations {
			for _, i := range r.Instances {
				out[aws.ToString(i.InstanceId)] = i.State.Name
			}
		}
	}
	return out
}

// checkLive: the instances not terminated (or terminating) are exactly want, all running.
func checkLive(t *testing.T, e *testenv.Env, when string, want ...string) {
	t.Helper()
	states := instanceStates(t, e)
	var live []string
	for id, s := range states {
		if s != types.InstanceStateNameTerminated && s != types.InstanceStateNameShuttingDown {
			live = append(live, id)
		}
	}
	sort.Strings(live)
	want = slices.Sorted(slices.Values(want))
	if !slices.Equal(live, want) {
		t.Errorf("%s: live instances %v, want %v (all: %v)", when, live, want, states)
		return
	}
	for _, id := range want {
		if states[id] != types.InstanceStateNameRunning {
			t.Errorf("%s: instance %s is %s, want running", when, id, states[id])
		}
	}
}

// checkOneLaunch: exactly one instance launched since before. CAPA sets no ClientToken, but
// its AWS SDK fills one in per call and keeps it through the SDK's own retries (a timeout, a
// 5xx), so a retried RunInstances returns the instance the first attempt made: more than one
// call is logged, more than one instance fails.
func checkOneLaunch(t *testing.T, e *testenv.Env, before *api.Stats, what string) {
	t.Helper()
	now, err := e.Cloud.Stats(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if made := now.InstancesCreated - before.InstancesCreated; made != 1 {
		t.Errorf("%s launched %d instances, want 1", what, made)
	}
	b, a := before.Operations[api.OpRunInstances], now.Operations[api.OpRunInstances]
	if calls := a.Calls - b.Calls; calls != 1 {
		t.Logf("%s: %d RunInstances calls (%d failed, %d throttled) for one instance: the SDK retried", what, calls, a.Errors-b.Errors, a.Throttled-b.Throttled)
	}
}

// checkNoLaunchOrTerminate: no RunInstances or TerminateInstances call since before.
func checkNoLaunchOrTerminate(t *testing.T, e *testenv.Env, before map[string]int64, what string) {
	t.Helper()
	after := e.Server.EC2().Calls()
	for _, action := range []string{"RunInstances", "TerminateInstances"} {
		if n := after[action] - before[action]; n != 0 {
			t.Errorf("%s made %d %s calls, want none", what, n, action)
		}
	}
}
