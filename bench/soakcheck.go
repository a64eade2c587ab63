package main

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"sync"
	"time"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/machina-dev/machina/internal/authority"
	"github.com/machina-dev/machina/internal/cloud/api"
	"github.com/machina-dev/machina/internal/controllers/migration"
	"github.com/machina-dev/machina/internal/mapicond"
)

// snapshot is one observation of both APIs and the cloud. The Cluster API side is listed
// before and after the Machine API side, so an unchanged Cluster API object (same
// resourceVersion in both lists) is known to have been in that state at the moment the
// Machine API list was taken.
type snapshot struct {
	at             time.Time
	mapiM          map[string]*machinev1beta1.Machine
	mapiS          map[string]*machinev1beta1.MachineSet
	mapiH          map[string]*machinev1beta1.MachineHealthCheck
	capiM1, capiM2 map[string]*clusterv1.Machine
	capiS1, capiS2 map[string]*clusterv1.MachineSet
	capiH1, capiH2 map[string]*clusterv1.MachineHealthCheck
	alive          []api.Instance // pending or running
	// byProviderID names the Machine of each providerID either API records (machineOf).
	byProviderID map[string]string
}

func byName[T any, PT interface {
	*T
	client.Object
}](items []T) map[string]PT {
	out := make(map[string]PT, len(items))
	for i := range items {
		p := PT(&items[i])
		out[p.GetName()] = p
	}
	return out
}

func (c *checker) listCAPI(ctx context.Context) (map[string]*clusterv1.Machine, map[string]*clusterv1.MachineSet, map[string]*clusterv1.MachineHealthCheck, error) {
	var m clusterv1.MachineList
	var s clusterv1.MachineSetList
	var h clusterv1.MachineHealthCheckList
	for _, l := range []client.ObjectList{&m, &s, &h} {
		if err := c.e.client.List(ctx, l, client.InNamespace(capiNS)); err != nil {
			return nil, nil, nil, err
		}
	}
	return byName(m.Items), byName(s.Items), byName(h.Items), nil
}

func (c *checker) observe(ctx context.Context) (*snapshot, error) {
	s := &snapshot{}
	var err error
	if s.capiM1, s.capiS1, s.capiH1, err = c.listCAPI(ctx); err != nil {
		return nil, err
	}
	var m machinev1beta1.MachineList
	var ms machinev1beta1.MachineSetList
	var h machinev1beta1.MachineHealthCheckList
	for _, l := range []client.ObjectList{&m, &ms, &h} {
		if err := c.e.client.List(ctx, l, client.InNamespace(mapiNS)); err != nil {
			return nil, err
		}
	}
	s.at = time.Now()
	s.mapiM, s.mapiS, s.mapiH = byName(m.Items), byName(ms.Items), byName(h.Items)
	if s.capiM2, s.capiS2, s.capiH2, err = c.listCAPI(ctx); err != nil {
		return nil, err
	}
	for _, i := range c.e.cloud.Instances(c.region) {
		if i.State == api.StatePending || i.State == api.StateRunning {
			s.alive = append(s.alive, i)
		}
	}
	return s, nil
}

// checker watches the invariants by frequent observation while the soak runs.
type checker struct {
	e      *env
	rep    *soakReport
	region string // where the cloud's instances are listed
	// terminating is how long an object may be Terminating (soakPlatform.terminating).
	terminating time.Duration

	mu            sync.Mutex
	faultsStopped time.Time
	// outageEnd is when the last outage below the manager ended (the API server or etcd
	// back, a replica reconnected, a killed leader's Lease expired): the Terminating bound
	// counts from it, as nothing can finish a deletion while the controllers are cut off.
	outageEnd    time.Time
	pendingSince map[string]time.Time
	orphanSince  map[string]time.Time
	reported     map[string]bool // one report per invariant and object
}

func newChecker(e *env, rep *soakReport, region string, terminating time.Duration) *checker {
	return &checker{e: e, rep: rep, region: region, terminating: terminating, pendingSince: map[string]time.Time{}, orphanSince: map[string]time.Time{}, reported: map[string]bool{}}
}

// note prints an event of the run with its time, for reading next to the violations.
func (c *checker) note(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "soak %8s %s\n", c.rep.since(), fmt.Sprintf(format, args...))
}

// endOutage records that an outage below the manager ends (or ended) at.
func (c *checker) endOutage(at time.Time) {
	c.mu.Lock()
	if at.After(c.outageEnd) {
		c.outageEnd = at
	}
	c.mu.Unlock()
}

func (c *checker) stopFaults() {
	c.mu.Lock()
	c.faultsStopped = time.Now()
	c.mu.Unlock()
}

func (c *checker) run(ctx context.Context) {
	for ctx.Err() == nil {
		s, err := c.observe(ctx)
		if err != nil {
			if ctx.Err() == nil {
				c.note("observation failed: %v", err)
			}
		} else {
			c.checkAlways(s)
		}
		select {
		case <-ctx.Done():
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// once reports a violation of inv about key only the first time it is seen.
func (c *checker) once(inv, key, format string, args ...any) {
	c.mu.Lock()
	seen := c.reported[inv+"|"+key]
	c.reported[inv+"|"+key] = true
	c.mu.Unlock()
	if !seen {
		c.rep.violate(inv, format, args...)
	}
}

// checkAlways is what must hold at every observation.
func (c *checker) checkAlways(s *snapshot) {
	c.rep.mu.Lock()
	c.rep.observations++
	c.rep.mu.Unlock()
	c.checkActive(s)
	c.checkTerminating(s)
	c.checkPending(s)
	c.checkDuplicates(s)
	c.checkOrphans(s, 120*time.Second)
}

// bothActive says whether the Cluster API copy was unpaused and unchanged around the
// Machine API observation that found its mirror active.
func bothActive(mapiActive bool, c1, c2 client.Object) bool {
	return mapiActive && c1 != nil && c2 != nil && c1.GetResourceVersion() == c2.GetResourceVersion() &&
		!capiPaused(c1) && c1.GetUID() == c2.GetUID()
}

func nilIfAbsent[T client.Object](m map[string]T, name string) client.Object {
	if o, ok := m[name]; ok {
		return o
	}
	return nil
}

func (c *checker) checkActive(s *snapshot) {
	n := 0
	for name, m := range s.mapiM {
		n++
		if bothActive(m.Status.AuthoritativeAPI == machinev1beta1.MachineAuthorityMachineAPI, nilIfAbsent(s.capiM1, name), nilIfAbsent(s.capiM2, name)) {
			c.once(invActive, "Machine/"+name, "Machine %s: Machine API status.authoritativeAPI MachineAPI (spec %s) while the Cluster API copy (rv %s) has no paused annotation",
				name, m.Spec.AuthoritativeAPI, s.capiM2[name].ResourceVersion)
		}
	}
	for name, m := range s.mapiS {
		n++
		if bothActive(m.Status.AuthoritativeAPI == machinev1beta1.MachineAuthorityMachineAPI, nilIfAbsent(s.capiS1, name), nilIfAbsent(s.capiS2, name)) {
			c.once(invActive, "MachineSet/"+name, "MachineSet %s: Machine API status.authoritativeAPI MachineAPI (spec %s) while the Cluster API copy (rv %s) has no paused annotation",
				name, m.Spec.AuthoritativeAPI, s.capiS2[name].ResourceVersion)
		}
	}
	for name, h := range s.mapiH {
		n++
		spec, status := mhcAuthority(h)
		if bothActive(status == string(machinev1beta1.MachineAuthorityMachineAPI), nilIfAbsent(s.capiH1, name), nilIfAbsent(s.capiH2, name)) {
			c.once(invActive, "MachineHealthCheck/"+name, "MachineHealthCheck %s: status authority MachineAPI (requested %q) while the Cluster API copy has no paused annotation", name, spec)
		}
	}
	c.rep.checked(invActive, n)
}

func (c *checker) checkTerminating(s *snapshot) {
	n := 0
	c.mu.Lock()
	outageEnd := c.outageEnd
	c.mu.Unlock()
	check := func(kind string, o client.Object) {
		n++
		dt := o.GetDeletionTimestamp()
		if dt == nil {
			return
		}
		from := dt.Time
		if outageEnd.After(from) {
			from = outageEnd
		}
		if age := s.at.Sub(from); age > c.terminating {
			c.once(invTerminating, kind+"/"+string(o.GetUID()), "%s %s/%s Terminating for %s (since %s), finalizers %v",
				kind, o.GetNamespace(), o.GetName(), age.Round(time.Second), dt.Format(time.TimeOnly), o.GetFinalizers())
		}
	}
	for _, o := range s.mapiM {
		check("machine.openshift.io Machine", o)
	}
	for _, o := range s.mapiS {
		check("machine.openshift.io MachineSet", o)
	}
	for _, o := range s.capiM2 {
		check("cluster.x-k8s.io Machine", o)
	}
	for _, o := range s.capiS2 {
		check("cluster.x-k8s.io MachineSet", o)
	}
	c.rep.checked(invTerminating, n)
}

// pending lists the resources whose requested authority is not yet their current one.
func (s *snapshot) pending() map[string]string {
	out := map[string]string{}
	for name, m := range s.mapiM {
		if m.Spec.AuthoritativeAPI != "" && m.Spec.AuthoritativeAPI != m.Status.AuthoritativeAPI && m.DeletionTimestamp == nil {
			out["Machine/"+name] = fmt.Sprintf("spec %s status %s%s", m.Spec.AuthoritativeAPI, m.Status.AuthoritativeAPI, migrationState(m.Status.Conditions))
		}
	}
	for name, m := range s.mapiS {
		if m.Spec.AuthoritativeAPI != "" && m.Spec.AuthoritativeAPI != m.Status.AuthoritativeAPI && m.DeletionTimestamp == nil {
			out["MachineSet/"+name] = fmt.Sprintf("spec %s status %s%s", m.Spec.AuthoritativeAPI, m.Status.AuthoritativeAPI, migrationState(m.Status.Conditions))
		}
	}
	for name, h := range s.mapiH {
		if spec, status := mhcAuthority(h); spec != "" && spec != status {
			out["MachineHealthCheck/"+name] = fmt.Sprintf("requested %s status %s", spec, status)
		}
	}
	return out
}

// migrationState is the migration controller's AuthorityMigration condition, for reports
// ("" when absent).
func migrationState(conds []machinev1beta1.Condition) string {
	c := mapicond.Get(conds, migration.MigrationCondition)
	if c == nil {
		return ""
	}
	return fmt.Sprintf("; %s %s: %s", c.Type, c.Reason, c.Message)
}

func (c *checker) checkPending(s *snapshot) {
	p := s.pending()
	c.mu.Lock()
	stopped := c.faultsStopped
	late := map[string]string{}
	for key, state := range p {
		since, ok := c.pendingSince[key]
		if !ok {
			since = s.at
			c.pendingSince[key] = since
		}
		from := since
		if from.Before(stopped) {
			from = stopped
		}
		if !stopped.IsZero() && s.at.Sub(from) > 120*time.Second {
			late[key] = fmt.Sprintf("%s pending for %s (%s, since %s, faults stopped %s)", key,
				s.at.Sub(since).Round(time.Second), state, since.Format(time.TimeOnly), stopped.Format(time.TimeOnly))
		}
	}
	for key := range c.pendingSince {
		if _, ok := p[key]; !ok {
			delete(c.pendingSince, key)
		}
	}
	c.mu.Unlock()
	for key, msg := range late {
		c.once(invPending, key, "%s", msg)
	}
	c.rep.checked(invPending, len(p))
}

// machineOf is the name of the Machine pair an alive instance belongs to: the Machine (of
// either API) whose providerID is the instance's, else the Machine its tags say it was
// launched for (launchedFor: machina's tag, or CAPA's), so a launch not yet recorded on any
// Machine counts for the Machine it is meant for.
func (s *snapshot) machineOf(i api.Instance) string {
	if s.byProviderID == nil {
		s.byProviderID = map[string]string{}
		for name, m := range s.mapiM {
			if id := ptr.Deref(m.Spec.ProviderID, ""); id != "" {
				s.byProviderID[id] = name
			}
		}
		for name, m := range s.capiM2 {
			if m.Spec.ProviderID != "" {
				s.byProviderID[m.Spec.ProviderID] = name
			}
		}
	}
	if name, ok := s.byProviderID[i.ProviderID]; ok {
		return name
	}
	return launchedFor(i)
}

// checkDuplicates: no Machine name has two alive instances.
func (c *checker) checkDuplicates(s *snapshot) {
	byMachine := map[string][]string{}
	for _, i := range s.alive {
		name := s.machineOf(i)
		byMachine[name] = append(byMachine[name], fmt.Sprintf("%s(%s, tags %v)", i.InstanceID, i.State, i.Tags))
	}
	for name, ids := range byMachine {
		if len(ids) > 1 {
			c.once(invInstances, "dup/"+name, "Machine %s has %d alive instances: %v", name, len(ids), ids)
		}
	}
	c.rep.checked(invInstances, len(s.alive))
}

// checkOrphans: an alive instance whose Machine exists on neither side for longer than grace
// is leaked.
func (c *checker) checkOrphans(s *snapshot, grace time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	seen := map[string]bool{}
	for _, i := range s.alive {
		name := s.machineOf(i)
		_, inMAPI := s.mapiM[name]
		_, inCAPI := s.capiM2[name]
		if inMAPI || inCAPI {
			continue
		}
		seen[i.InstanceID] = true
		since, ok := c.orphanSince[i.InstanceID]
		if !ok {
			c.orphanSince[i.InstanceID] = s.at
			continue
		}
		if s.at.Sub(since) > grace && !c.reported["leak|"+i.InstanceID] {
			c.reported["leak|"+i.InstanceID] = true
			c.rep.violate(invInstances, "instance %s (%s, launched %s, tags %v) has had no Machine on either side for %s",
				i.InstanceID, i.State, i.LaunchTime.Format(time.TimeOnly), i.Tags, s.at.Sub(since).Round(time.Second))
		}
	}
	for id := range c.orphanSince {
		if !seen[id] {
			delete(c.orphanSince, id)
		}
	}
}

// orphaned reports whether the instance had no Machine on either side at the latest
// observation (a leak once that lasts past the grace period).
func (c *checker) orphaned(id string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, ok := c.orphanSince[id]
	return ok
}

// unsettled lists what still differs from a quiet end state: empty means settled. With
// final set, each item is reported as a violation of its invariant.
func (c *checker) unsettled(s *snapshot, final bool) []string {
	var out []string
	add := func(inv, format string, args ...any) {
		msg := fmt.Sprintf(format, args...)
		out = append(out, msg)
		if final {
			c.rep.violate(inv, "at the end: %s", msg)
		}
	}
	for key, state := range s.pending() {
		add(invPending, "%s still pending (%s)", key, state)
	}
	c.settledMachines(s, add)
	c.settledSets(s, add)
	c.settledActive(s, add)
	for name, h := range s.mapiH {
		c.rep.checked(invSynced, 1)
		_, status := mhcAuthority(h)
		gen := h.Generation
		if ch, ok := s.capiH2[name]; status == string(machinev1beta1.MachineAuthorityClusterAPI) && ok {
			gen = ch.Generation
		}
		if !synchronizedTrue(h.Status.Conditions) || h.Annotations[authority.MHCSynchronizedGenerationAnnotation] != strconv.FormatInt(gen, 10) {
			add(invSynced, "MachineHealthCheck %s not Synchronized (synchronized-generation %q, authoritative generation %d)",
				name, h.Annotations[authority.MHCSynchronizedGenerationAnnotation], gen)
		}
	}
	return out
}

// settledActive checks that once the soak settles each pair's authoritative side can act: a
// Cluster API copy still paused under ClusterAPI authority leaves the pair with no active
// side (both paused), which the counting checks see only as a MachineSet short of Machines.
func (c *checker) settledActive(s *snapshot, add func(inv, format string, args ...any)) {
	const msg = "%s %s: status authority ClusterAPI while its Cluster API copy is paused: neither side acts"
	capi := string(machinev1beta1.MachineAuthorityClusterAPI)
	c.rep.checked(invActive, len(s.mapiM)+len(s.mapiS)+len(s.mapiH))
	for name, m := range s.mapiM {
		if string(m.Status.AuthoritativeAPI) == capi && pausedCopy(nilIfAbsent(s.capiM2, name)) {
			add(invActive, msg, "Machine", name)
		}
	}
	for name, m := range s.mapiS {
		if string(m.Status.AuthoritativeAPI) == capi && pausedCopy(nilIfAbsent(s.capiS2, name)) {
			add(invActive, msg, "MachineSet", name)
		}
	}
	for name, h := range s.mapiH {
		if _, status := mhcAuthority(h); status == capi && pausedCopy(nilIfAbsent(s.capiH2, name)) {
			add(invActive, msg, "MachineHealthCheck", name)
		}
	}
}

func pausedCopy(o client.Object) bool { return o != nil && capiPaused(o) }

func synchronizedTrue(conds []machinev1beta1.Condition) bool {
	for _, c := range conds {
		if c.Type == "Synchronized" {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// pairGeneration is the authoritative copy's generation, which synchronizedGeneration counts.
func pairGeneration(status machinev1beta1.MachineAuthority, mapiGen int64, capi client.Object) int64 {
	if status == machinev1beta1.MachineAuthorityClusterAPI && capi != nil {
		return capi.GetGeneration()
	}
	return mapiGen
}

func (c *checker) settledMachines(s *snapshot, add func(inv, format string, args ...any)) {
	alive := map[string][]api.Instance{}
	for _, i := range s.alive {
		alive[i.ProviderID] = append(alive[i.ProviderID], i)
	}
	for name, m := range s.mapiM {
		c.rep.checked(invSynced, 1)
		cm, ok := s.capiM2[name]
		if !ok {
			add(invSynced, "Machine %s has no Cluster API copy (phase %s, authority %s)", name, ptr.Deref(m.Status.Phase, ""), m.Status.AuthoritativeAPI)
			continue
		}
		if m.DeletionTimestamp != nil || cm.DeletionTimestamp != nil {
			add(invTerminating, "Machine %s still being deleted", name)
		}
		gen := pairGeneration(m.Status.AuthoritativeAPI, m.Generation, cm)
		if !synchronizedTrue(m.Status.Conditions) || m.Status.SynchronizedGeneration != gen {
			add(invSynced, "Machine %s not Synchronized (authority %s, synchronizedGeneration %d, authoritative generation %d)",
				name, m.Status.AuthoritativeAPI, m.Status.SynchronizedGeneration, gen)
		}
		if ptr.Deref(m.Spec.ProviderID, "") != cm.Spec.ProviderID {
			add(invSynced, "Machine %s providerID %q, its Cluster API copy %q", name, ptr.Deref(m.Spec.ProviderID, ""), cm.Spec.ProviderID)
		}
		if ptr.Deref(m.Status.Phase, "") == machinev1beta1.PhaseRunning && len(alive[ptr.Deref(m.Spec.ProviderID, "")]) != 1 {
			add(invInstances, "Running Machine %s (providerID %q) has %d alive instances", name, ptr.Deref(m.Spec.ProviderID, ""), len(alive[ptr.Deref(m.Spec.ProviderID, "")]))
		}
	}
	for name := range s.capiM2 {
		if _, ok := s.mapiM[name]; !ok {
			add(invSynced, "Cluster API Machine %s has no Machine API copy", name)
		}
	}
	for _, i := range s.alive {
		name := s.machineOf(i)
		m, ok := s.mapiM[name]
		if !ok || ptr.Deref(m.Spec.ProviderID, "") != i.ProviderID {
			add(invInstances, "instance %s (%s, Machine %q, tags %v) is not the instance of a Machine pair", i.InstanceID, i.ProviderID, name, i.Tags)
		}
	}
}

func (c *checker) settledSets(s *snapshot, add func(inv, format string, args ...any)) {
	for name, m := range s.mapiS {
		c.rep.checked(invSynced, 1)
		cm, ok := s.capiS2[name]
		if !ok {
			add(invSynced, "MachineSet %s has no Cluster API copy", name)
			continue
		}
		gen := pairGeneration(m.Status.AuthoritativeAPI, m.Generation, cm)
		if !synchronizedTrue(m.Status.Conditions) || m.Status.SynchronizedGeneration != gen {
			add(invSynced, "MachineSet %s not Synchronized (authority %s, synchronizedGeneration %d, authoritative generation %d)",
				name, m.Status.AuthoritativeAPI, m.Status.SynchronizedGeneration, gen)
		}
		want := ptr.Deref(m.Spec.Replicas, 0)
		if ptr.Deref(cm.Spec.Replicas, -1) != want {
			add(invSynced, "MachineSet %s replicas %d, its Cluster API copy %d", name, want, ptr.Deref(cm.Spec.Replicas, -1))
		}
		if got := ownedBy(s, name); got != int(want) {
			add(invSynced, "MachineSet %s wants %d Machines, has %d", name, want, got)
		}
	}
}

// ownedBy counts the Machine API Machines of MachineSet set (by the MachineSet label).
func ownedBy(s *snapshot, set string) int {
	n := 0
	for _, m := range s.mapiM {
		if m.Labels["machine.openshift.io/cluster-api-machineset"] == set && m.DeletionTimestamp == nil {
			n++
		}
	}
	return n
}

// waitQuiet observes until nothing is unsettled (and, with empty, no Machine or alive
// instance is left) or timeout, then reports what still is as violations.
func (c *checker) waitQuiet(ctx context.Context, what string, timeout time.Duration, empty bool) error {
	start, last := time.Now(), time.Now()
	for {
		s, err := c.observe(ctx)
		if err != nil {
			return err
		}
		left := c.unsettled(s, false)
		if empty {
			left = append(left, leftovers(s)...)
		}
		if len(left) == 0 {
			c.note("%s after %s", what, time.Since(start).Round(time.Second))
			return nil
		}
		if time.Since(start) > timeout {
			c.note("%s: not reached in %s", what, timeout)
			c.unsettled(s, true)
			if empty {
				for _, l := range leftovers(s) {
					c.rep.violate(invInstances, "after the final scale to 0: %s", l)
				}
			}
			return nil
		}
		if time.Since(last) > 15*time.Second {
			c.note("waiting for %s: %d left, e.g. %s", what, len(left), left[0])
			last = time.Now()
		}
		time.Sleep(time.Second)
	}
}

// leftovers are the Machines and alive instances still there after the final scale to 0.
func leftovers(s *snapshot) []string {
	var out []string
	for name, m := range s.mapiM {
		out = append(out, fmt.Sprintf("Machine API Machine %s left (phase %s, deleting %v)", name, ptr.Deref(m.Status.Phase, ""), m.DeletionTimestamp != nil))
	}
	for name, m := range s.capiM2 {
		out = append(out, fmt.Sprintf("Cluster API Machine %s left (phase %s, deleting %v)", name, m.Status.Phase, m.DeletionTimestamp != nil))
	}
	for _, i := range s.alive {
		out = append(out, fmt.Sprintf("instance %s (%s, Machine %q, tags %v) leaked", i.InstanceID, i.State, s.machineOf(i), i.Tags))
	}
	return out
}
