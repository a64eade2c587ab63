package migration_test

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/machina-dev/machina/internal/authority"
	"github.com/machina-dev/machina/internal/provider"
	"github.com/machina-dev/machina/internal/scheme"
	"github.com/machina-dev/machina/internal/testenv"
)

// platformCase is one infrastructure platform TestMigration runs its platform-dependent
// subtests on. Both platforms share one lab (testenv.ServeAWSMachines); their objects are told apart by name
// prefix. The Machine API side of each is provisioned by its real actuator: the simulated
// provider's, and the AWS actuator (controller group "aws") through the simulated cloud's EC2
// front. On the Cluster API side TestMigration's lab runs the simulated provider's
// controllers but no Cluster API AWS provider (CAPA): capaStandIn writes from the test the
// fields a contract provider writes on an unpaused AWSMachine (see capaStandIn).
// TestOwnLab instead gives each platform a lab of its own (ownLab), where the aws
// one runs the upstream CAPA controller and no stand-in.
type platformCase struct {
	provider provider.Provider
	// lab names the case's own lab when it is not the platform's (subtest names; "" is the
	// provider's name).
	lab    string
	prefix string
	// cluster is the cluster's name (the Infrastructure's infrastructureName, the Cluster API
	// Cluster's name), which the Machine API objects' cluster label carries.
	cluster string
	// ownLab starts a lab of this platform alone, with its real Cluster API provider where
	// the lab has one, and seeds its cluster; it returns the lab and the cluster's name (for
	// tests that cannot share TestMigration's lab, see startOwnLab).
	ownLab func(t *testing.T) (*testenv.Env, string)
	// infraWriter is the field manager of the status writes of the provider ownLab runs on its
	// InfraMachines, checked where that provider is a process of its own ("": not checked).
	infraWriter string
	// region and zones are the cluster's.
	region string
	zones  [3]string
	// unconvertible is a providerSpec value the platform's actuator serves but the conversion
	// refuses: on sim another region than the cluster's; on aws an AMI chosen by filters (CAPA
	// takes an AMI ID only) — not another region, which the EC2 front, serving one region,
	// would leave the AWS actuator unable to ever delete.
	unconvertible *runtime.RawExtension
	// small and large are two instance types of the platform; smallCPU and smallMemoryMiB
	// are small's capacity as the platform's cloud reports it.
	small, large             string
	smallCPU, smallMemoryMiB string
	// spec is a providerSpec value of the platform in region and zone.
	spec func(region, zone, instanceType string) *runtime.RawExtension
}

func platformCases() []platformCase {
	return []platformCase{
		{
			provider: provider.Sim(), prefix: "", cluster: "lab", ownLab: simLab,
			region: "sim-east-1",
			zones:  [3]string{"sim-east-1a", "sim-east-1b", "sim-east-1c"}, small: "s1.medium", large: "s1.large",
			smallCPU: "2", smallMemoryMiB: "4096",
			unconvertible: testenv.SimProviderSpec("sim-west-1", "sim-west-1a", "s1.medium"),
			spec:          testenv.SimProviderSpec,
		},
		{
			provider: provider.AWS(), prefix: "aws-", cluster: "lab", ownLab: awsCAPALab, infraWriter: capaFieldManager,
			region: "us-east-1", unconvertible: testenv.AWSProviderSpecAMIByFilters(),
			// The demo AWS cluster's zones: the EC2 front has subnets in these two only.
			zones: [3]string{"us-east-1a", "us-east-1b", "us-east-1a"}, small: "m6i.xlarge", large: "m6i.2xlarge",
			smallCPU: "4", smallMemoryMiB: "16384",
			spec: testenv.AWSProviderSpec,
		},
	}
}

func (pc platformCase) name(n string) string { return pc.prefix + n }

// label is the case's subtest name: its lab's, or its platform's.
func (pc platformCase) label() string { return cmp.Or(pc.lab, pc.provider.Name) }

// upstreamCase is the aws platform in a lab of the controllers OpenShift users run
// (upstreamLab) instead of machina's own.
func upstreamCase() platformCase {
	for _, pc := range platformCases() {
		if pc.provider.Name == provider.AWS().Name {
			pc.lab, pc.ownLab = "upstream", upstreamLab
			return pc
		}
	}
	panic("no aws platform case")
}

// machine is a Machine API Machine of the platform in the cluster's zone i.
func (pc platformCase) machine(name string, zone int) *machinev1beta1.Machine {
	m := machine(name, "", "")
	m.Labels[clusterLabel] = pc.cluster
	m.Spec.ProviderSpec.Value = pc.spec(pc.region, pc.zones[zone], pc.small)
	return m
}

// clusterLabel names the cluster on Machine API objects.
const clusterLabel = "machine.openshift.io/cluster-api-cluster"

// capiFinalizerAsActive reports whether the Cluster API Machine's controller finalizer agrees
// with active: an active copy has it; a paused one has not, except beside the upstream
// Cluster API core (e.Upstream), which adds it before it looks at the pause, so a Machine
// handed back to the Machine API soon carries it again (the sync takes it off when it
// deletes the mirror).
func capiFinalizerAsActive(e *testenv.Env, c *clusterv1.Machine, active bool) bool {
	has := controllerutil.ContainsFinalizer(c, clusterv1.MachineFinalizer)
	return has == active || !active && e.Upstream != nil
}

// eachPlatform runs f as one subtest per platform.
func eachPlatform(t *testing.T, f func(t *testing.T, pc platformCase)) {
	for _, pc := range platformCases() {
		t.Run(pc.provider.Name, func(t *testing.T) { f(t, pc) })
	}
}

// testHandover is the mirror-and-handover scenario of a MachineSet: a Machine API MachineSet
// and its Machines are mirrored (Cluster API MachineSet, hash-named InfraMachineTemplate,
// Machines with InfraMachines, all paused), handed to the Cluster API and back, and removed.
// The InfraMachine is unpaused and gains its provider's finalizer under the Cluster API; going
// back it is paused before that finalizer is taken off. Templates no longer used are pruned.
// No handover launches an instance.
func testHandover(t *testing.T, pc platformCase) {
	e := env.For(t)
	rec := watchInfraMachines(t, e, pc.provider)
	testTemplatePruned(t, e, pc)
	testSetRoundTrip(t, e, pc, rec)
}

func platformSet(pc platformCase, name string, replicas int32, instanceType string) *machinev1beta1.MachineSet {
	sel := map[string]string{clusterLabel: pc.cluster, "machine.openshift.io/cluster-api-machineset": name}
	return &machinev1beta1.MachineSet{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "openshift-machine-api", Labels: map[string]string{clusterLabel: pc.cluster}},
		Spec: machinev1beta1.MachineSetSpec{Replicas: ptr.To(replicas), Selector: metav1.LabelSelector{MatchLabels: sel},
			Template: machinev1beta1.MachineTemplateSpec{ObjectMeta: machinev1beta1.ObjectMeta{Labels: sel},
				Spec: machinev1beta1.MachineSpec{ProviderSpec: machinev1beta1.ProviderSpec{Value: pc.spec(pc.region, pc.zones[0], instanceType)}}}},
	}
}

// testTemplatePruned: a changed providerSpec gives the mirror a new hash-named template and
// the unused one is deleted.
func testTemplatePruned(t *testing.T, e *testenv.Env, pc platformCase) {
	ctx := context.Background()
	name := pc.name("prune")
	if err := e.Client.Create(ctx, platformSet(pc, name, 0, pc.small)); err != nil {
		t.Fatal(err)
	}
	first := waitTemplate(t, e, pc, name, "")
	ms := &machinev1beta1.MachineSet{}
	if err := e.Client.Get(ctx, client.ObjectKey{Namespace: "openshift-machine-api", Name: name}, ms); err != nil {
		t.Fatal(err)
	}
	base := ms.DeepCopy()
	ms.Spec.Template.Spec.ProviderSpec.Value = pc.spec(pc.region, pc.zones[0], pc.large)
	if err := e.Client.Patch(ctx, ms, client.MergeFrom(base)); err != nil {
		t.Fatal(err)
	}
	second := waitTemplate(t, e, pc, name, first)
	e.Eventually(60*time.Second, "the unused template "+first+" is pruned", func(ctx context.Context) (bool, string, error) {
		names, err := listNames(ctx, e, pc.provider.InfraMachineTemplate)
		return err == nil && !slices.Contains(names, first) && slices.Contains(names, second), fmt.Sprint(names, err), nil
	})
	if err := e.Client.Delete(ctx, ms); err != nil {
		t.Fatal(err)
	}
}

// waitTemplate waits until the Cluster API MachineSet name references a template other than
// not, named <name>-<hash>, which exists and is paused; it returns the template's name.
func waitTemplate(t *testing.T, e *testenv.Env, pc platformCase, name, not string) string {
	var tmpl string
	e.Eventually(60*time.Second, name+" mirrored with a hash-named "+pc.provider.InfraMachineTemplate.Kind, func(ctx context.Context) (bool, string, error) {
		cms := &clusterv1.MachineSet{}
		if err := e.Client.Get(ctx, client.ObjectKey{Namespace: "openshift-cluster-api", Name: name}, cms); err != nil {
			return false, err.Error(), nil
		}
		ref := cms.Spec.Template.Spec.InfrastructureRef
		tmpl = ref.Name
		if ref.Kind != pc.provider.InfraMachineTemplate.Kind || tmpl == not || !strings.HasPrefix(tmpl, name+"-") {
			return false, fmt.Sprintf("infrastructureRef %s/%s", ref.Kind, ref.Name), nil
		}
		o := authority.Metadata(pc.provider.InfraMachineTemplate)
		if err := e.Client.Get(ctx, client.ObjectKey{Namespace: "openshift-cluster-api", Name: tmpl}, o); err != nil {
			return false, err.Error(), nil
		}
		_, paused := o.Annotations[clusterv1.PausedAnnotation]
		return paused, fmt.Sprintf("template %s paused %v", tmpl, paused), nil
	})
	return tmpl
}

func listNames(ctx context.Context, e *testenv.Env, gvk schema.GroupVersionKind) ([]string, error) {
	l := authority.MetadataList(gvk)
	if err := e.Client.List(ctx, l, client.InNamespace("openshift-cluster-api")); err != nil {
		return nil, err
	}
	var names []string
	for _, o := range l.Items {
		names = append(names, o.Name)
	}
	sort.Strings(names)
	return names, nil
}

// infraRecord keeps every state a platform's InfraMachines were seen in by a watch.
type infraRecord struct {
	mu     sync.Mutex
	states map[string][]infraState
}

type infraState struct {
	paused, finalizer bool
}

// watchInfraMachines records, for each InfraMachine of p, the sequence of (paused, has the
// provider's finalizer) states the apiserver reported.
func watchInfraMachines(t *testing.T, e *testenv.Env, p provider.Provider) *infraRecord {
	wc, err := client.NewWithWatch(e.Lab.Config, client.Options{Scheme: scheme.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	w, err := wc.Watch(context.Background(), authority.MetadataList(p.InfraMachine), client.InNamespace("openshift-cluster-api"))
	if err != nil {
		t.Fatal(err)
	}
	rec := &infraRecord{states: map[string][]infraState{}}
	done := make(chan struct{})
	t.Cleanup(func() { w.Stop(); <-done })
	go func() {
		defer close(done)
		for ev := range w.ResultChan() {
			o, ok := ev.Object.(*metav1.PartialObjectMetadata)
			if !ok || ev.Type == watch.Deleted {
				continue
			}
			_, paused := o.Annotations[clusterv1.PausedAnnotation]
			st := infraState{paused: paused, finalizer: slices.ContainsFunc(p.InfraMachineFinalizers, func(f string) bool {
				return controllerutil.ContainsFinalizer(o, f)
			})}
			rec.mu.Lock()
			if h := rec.states[o.Name]; len(h) == 0 || h[len(h)-1] != st {
				rec.states[o.Name] = append(h, st)
			}
			rec.mu.Unlock()
		}
	}()
	return rec
}

// unguardedRemovals lists the InfraMachines whose provider finalizer disappeared while they
// were unpaused: their provider controller could still have been acting on the instance.
func (r *infraRecord) unguardedRemovals() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var bad []string
	for name, h := range r.states {
		for i := 1; i < len(h); i++ {
			if h[i-1].finalizer && !h[i].finalizer && !h[i].paused {
				bad = append(bad, fmt.Sprintf("%s: %v", name, h))
			}
		}
	}
	return bad
}

func (r *infraRecord) history(name string) []infraState {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.states[name])
}

// testSetRoundTrip hands a MachineSet of two Running Machines to the Cluster API and back.
func testSetRoundTrip(t *testing.T, e *testenv.Env, pc platformCase, rec *infraRecord) {
	ctx := context.Background()
	name := pc.name("hand")
	if err := e.Client.Create(ctx, platformSet(pc, name, 2, pc.small)); err != nil {
		t.Fatal(err)
	}
	waitTemplate(t, e, pc, name, "")
	ids := waitMachines(t, e, pc, name, machinev1beta1.MachineAuthorityMachineAPI)
	before := instancesCreated(t, e)

	requestSetAndMachines(t, e, name, ids, machinev1beta1.MachineAuthorityClusterAPI)
	if got := waitMachines(t, e, pc, name, machinev1beta1.MachineAuthorityClusterAPI); !maps2Equal(got, ids) {
		t.Errorf("providerIDs changed under the Cluster API: %v, were %v", got, ids)
	}
	requestSetAndMachines(t, e, name, ids, machinev1beta1.MachineAuthorityMachineAPI)
	if got := waitMachines(t, e, pc, name, machinev1beta1.MachineAuthorityMachineAPI); !maps2Equal(got, ids) {
		t.Errorf("providerIDs changed back under the Machine API: %v, were %v", got, ids)
	}
	if after := instancesCreated(t, e); after != before {
		t.Errorf("the handovers launched %d instance(s)", after-before)
	}
	for m := range ids {
		h := rec.history(m)
		// paused without the provider's finalizer → unpaused with it → paused without it.
		if !slices.Contains(h, infraState{paused: false, finalizer: true}) || h[len(h)-1] != (infraState{paused: true, finalizer: false}) {
			t.Errorf("%s %s went through %v", pc.provider.InfraMachine.Kind, m, h)
		}
	}
	if bad := rec.unguardedRemovals(); len(bad) > 0 {
		t.Errorf("provider finalizer removed from an unpaused InfraMachine: %v", bad)
	}

	ms := &machinev1beta1.MachineSet{ObjectMeta: metav1.ObjectMeta{Namespace: "openshift-machine-api", Name: name}}
	if err := e.Client.Delete(ctx, ms); err != nil {
		t.Fatal(err)
	}
	e.Eventually(90*time.Second, name+"'s Machines gone from both APIs", func(ctx context.Context) (bool, string, error) {
		mapi, capi, _, desc := machinesOf(ctx, e, name)
		return mapi == 0 && capi == 0, desc, nil
	})
}

func maps2Equal(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

func requestSetAndMachines(t *testing.T, e *testenv.Env, set string, machines map[string]string, to machinev1beta1.MachineAuthority) {
	t.Helper()
	requestSet(t, e, set, to)
	for m := range machines {
		request(t, e, m, to)
	}
}

// waitMachines waits until the MachineSet and its two Machines are held by authority, with
// the finalizers, pause annotations and provider states that go with it, and returns the
// Machines' providerIDs by name.
func waitMachines(t *testing.T, e *testenv.Env, pc platformCase, set string, authority machinev1beta1.MachineAuthority) map[string]string {
	ids := map[string]string{}
	capiSide := authority == machinev1beta1.MachineAuthorityClusterAPI
	e.Eventually(120*time.Second, fmt.Sprintf("%s and its Machines held by %s", set, authority), func(ctx context.Context) (bool, string, error) {
		ms, cms, err := getSets(ctx, e, set)
		if err != nil {
			return false, err.Error(), nil
		}
		if ms.Status.AuthoritativeAPI != authority || hasPaused(cms) == capiSide {
			return false, "MachineSet " + describeSets(ms, cms), nil
		}
		var list machinev1beta1.MachineList
		if err := e.Client.List(ctx, &list, client.InNamespace("openshift-machine-api"), client.MatchingLabels{"machine.openshift.io/cluster-api-machineset": set}); err != nil {
			return false, err.Error(), nil
		}
		if len(list.Items) != 2 {
			return false, fmt.Sprintf("%d Machine API Machines", len(list.Items)), nil
		}
		for i := range list.Items {
			ok, why, err := machineHeld(ctx, e, pc, &list.Items[i], capiSide)
			if !ok || err != nil {
				return false, list.Items[i].Name + ": " + why, err
			}
			ids[list.Items[i].Name] = ptr.Deref(list.Items[i].Spec.ProviderID, "")
		}
		return true, "", nil
	})
	return ids
}

func hasPaused(o client.Object) bool {
	_, ok := o.GetAnnotations()[clusterv1.PausedAnnotation]
	return ok
}

// machineHeld checks one Machine's pair against the side that should hold it.
func machineHeld(ctx context.Context, e *testenv.Env, pc platformCase, m *machinev1beta1.Machine, capiSide bool) (bool, string, error) {
	want := machinev1beta1.MachineAuthorityMachineAPI
	if capiSide {
		want = machinev1beta1.MachineAuthorityClusterAPI
	}
	c := &clusterv1.Machine{}
	if err := e.Client.Get(ctx, client.ObjectKey{Namespace: "openshift-cluster-api", Name: m.Name}, c); err != nil {
		return false, err.Error(), nil
	}
	infra := authority.Metadata(pc.provider.InfraMachine)
	if err := e.Client.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: c.Spec.InfrastructureRef.Name}, infra); err != nil {
		return false, err.Error(), nil
	}
	infraFinalizer := slices.ContainsFunc(pc.provider.InfraMachineFinalizers, func(f string) bool { return controllerutil.ContainsFinalizer(infra, f) })
	state := fmt.Sprintf("authority %q providerID %v phase %v; capi paused %v finalizers %v; %s paused %v finalizers %v; mapi finalizers %v",
		m.Status.AuthoritativeAPI, ptr.Deref(m.Spec.ProviderID, ""), ptr.Deref(m.Status.Phase, ""), hasPaused(c), c.Finalizers,
		pc.provider.InfraMachine.Kind, hasPaused(infra), infra.Finalizers, m.Finalizers)
	running := ptr.Deref(m.Status.Phase, "") == machinev1beta1.PhaseRunning
	ok := m.Status.AuthoritativeAPI == want && m.Spec.ProviderID != nil && running &&
		hasPaused(c) != capiSide && hasPaused(infra) != capiSide && infraFinalizer == capiSide &&
		capiFinalizerAsActive(e, c, capiSide) &&
		controllerutil.ContainsFinalizer(m, machinev1beta1.MachineFinalizer) != capiSide
	return ok, state, nil
}
