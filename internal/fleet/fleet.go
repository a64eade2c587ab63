// Package fleet migrates many Machine API resources between the Machine API and the Cluster
// API: in waves (MachineSets, then Machines, then MachineHealthChecks), a bounded number in
// flight, pausing on the first failure, and with a record of what happened to each. It is what
// `machina migrate` runs and what `bench migrate` measures.
//
// A run only asks: it sets each resource's spec.authoritativeAPI (a MachineHealthCheck's
// annotation) and watches its status; the migration controller does the handover. A run can
// be stopped at any point and run again: resources whose status already names the target are
// skipped, and a request already made is only made again (a no-op).
package fleet

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// The kinds a fleet holds, in the order their waves run.
const (
	MachineSet         = "MachineSet"
	Machine            = "Machine"
	MachineHealthCheck = "MachineHealthCheck"
)

// DefaultMaxInFlight is how many handovers a run keeps under way at once unless told
// otherwise. Each takes the controllers about ten writes over a few seconds; ten at a time
// keeps a production API server's write rate from the migration in the tens per second.
const DefaultMaxInFlight = 10

// Item names one Machine API resource.
type Item struct {
	Kind, Name string
}

func (i Item) String() string { return strings.ToLower(i.Kind) + "/" + i.Name }

// Wave is the resources of one kind; a wave starts when the one before it has finished.
type Wave struct {
	Kind  string
	Items []Item
}

// Waves orders items into waves: MachineSets first (so that a set's Machines move under a
// set that has moved already), then Machines, then MachineHealthChecks (a check moves once
// the Machines it watches have). Within a wave, items keep their order.
func Waves(items []Item) []Wave {
	var waves []Wave
	for _, kind := range []string{MachineSet, Machine, MachineHealthCheck} {
		w := Wave{Kind: kind}
		for _, it := range items {
			if it.Kind == kind && !slices.Contains(w.Items, it) {
				w.Items = append(w.Items, it)
			}
		}
		if len(w.Items) > 0 {
			waves = append(waves, w)
		}
	}
	return waves
}

// Options say how a run goes.
type Options struct {
	Namespace string
	To        machinev1beta1.MachineAuthority
	// MaxInFlight bounds the handovers under way at once (DefaultMaxInFlight when 0).
	MaxInFlight int
	// Timeout is how long one resource may take from its request to its new authority.
	Timeout time.Duration
	// PauseOnFailure stops new requests after the first failure; those in flight finish.
	PauseOnFailure bool
	// Poll is how often the resources in flight are read (every 500 ms when 0).
	Poll time.Duration
	// Events, when set, is told of every change (on the run's goroutine).
	Events func(Event)
}

// Run migrates the resources of waves, wave by wave, and reports what happened to each;
// skipped are resources decided before the run (blocked, say), carried into the report. It
// returns when every resource has finished or failed, or when the run stops: paused after a
// failure (once what was in flight has finished) or ctx cancelled (at once; what was in
// flight is reported so). The error is for a cluster that cannot be read at the start.
func Run(ctx context.Context, c client.Client, waves []Wave, skipped []Result, o Options) (*Report, error) {
	if o.MaxInFlight <= 0 {
		o.MaxInFlight = DefaultMaxInFlight
	}
	if o.Poll <= 0 {
		o.Poll = 500 * time.Millisecond
	}
	if o.Timeout <= 0 {
		o.Timeout = 5 * time.Minute
	}
	r := &runner{c: c, o: o, results: map[Item]int{},
		report: &Report{Namespace: o.Namespace, To: string(o.To), MaxInFlight: o.MaxInFlight, Started: time.Now()}}
	if err := r.classify(ctx, waves, skipped); err != nil {
		return nil, err
	}
	for _, w := range waves {
		if r.stopped() {
			break
		}
		r.emit(Event{Type: WaveStarted, Wave: w.Kind})
		r.wave(ctx, w)
	}
	r.finish(ctx)
	return r.report, nil
}

// runner is one run's state; only the run's goroutine touches it.
type runner struct {
	c       client.Client
	o       Options
	report  *Report
	results map[Item]int // index in report.Resources
	flying  map[Item]*flight
	counts  Counts
}

// flight is a resource whose request has been made and which has not finished.
type flight struct {
	item  Item
	start time.Time
	state string
}

// classify reads where every resource stands: those already with the target API are done
// before the run begins; the others wait.
func (r *runner) classify(ctx context.Context, waves []Wave, skipped []Result) error {
	for _, s := range skipped {
		r.add(s)
	}
	for _, w := range waves {
		current, err := authorities(ctx, r.c, r.o.Namespace, w.Kind)
		if err != nil {
			return err
		}
		for _, it := range w.Items {
			res := Result{Kind: it.Kind, Name: it.Name, From: string(current[it.Name]), To: string(r.o.To), Result: Waiting}
			switch from, ok := current[it.Name]; {
			case !ok:
				res.Result, res.Reason = Gone, "not found"
			case from == r.o.To:
				res.Result, res.Reason = Already, "already "+string(r.o.To)+"-authoritative"
			}
			r.add(res)
		}
	}
	return nil
}

func (r *runner) add(res Result) {
	it := Item{Kind: res.Kind, Name: res.Name}
	if _, dup := r.results[it]; dup {
		return
	}
	r.report.Resources = append(r.report.Resources, res)
	r.results[it] = len(r.report.Resources) - 1
	r.counts.add(res.Result, 1)
}

func (r *runner) result(it Item) *Result { return &r.report.Resources[r.results[it]] }

// set moves a resource to a new result, keeping the counts.
func (r *runner) set(it Item, result Outcome, reason string) *Result {
	res := r.result(it)
	r.counts.add(res.Result, -1)
	r.counts.add(result, 1)
	res.Result, res.Reason = result, reason
	return res
}

// stopped reports whether new requests have stopped: paused after a failure or interrupted.
func (r *runner) stopped() bool { return r.report.PausedBy != "" || r.report.Interrupted }

// wave keeps up to MaxInFlight of w's resources under way until all have finished or the run
// stops. Resources in flight are read every Poll, and followed by a watch in between: a
// version the watch brings moves its resource on at once, freeing its place.
func (r *runner) wave(ctx context.Context, w Wave) {
	queue := slices.DeleteFunc(slices.Clone(w.Items), func(it Item) bool { return r.result(it).Result != Waiting })
	r.flying = map[Item]*flight{}
	watchCtx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	seen := follow(watchCtx, r.c, r.o.Namespace, w.Kind)
	pollAt := time.Now().Add(r.o.Poll)
	for {
		if ctx.Err() != nil {
			r.report.Interrupted = true
			return
		}
		if !r.stopped() {
			n := min(r.o.MaxInFlight-len(r.flying), len(queue))
			r.request(ctx, queue[:n])
			queue = queue[n:]
		}
		if len(r.flying) == 0 && (len(queue) == 0 || r.stopped()) {
			return
		}
		timer := time.NewTimer(time.Until(pollAt))
		select {
		case <-ctx.Done():
			timer.Stop()
			r.report.Interrupted = true
			return
		case o, ok := <-seen:
			timer.Stop()
			if !ok {
				seen = nil // the watch ended: the reads carry on alone
			} else if f := r.flying[Item{Kind: w.Kind, Name: o.GetName()}]; f != nil {
				r.observe(f, o, nil)
			}
			continue
		case <-timer.C:
		}
		r.poll(ctx)
		pollAt = time.Now().Add(r.o.Poll)
	}
}

// finish records what the run left: requests still under way and resources never asked.
func (r *runner) finish(ctx context.Context) {
	for _, f := range r.flying {
		r.set(f.item, InFlight, "requested; not finished when the run stopped (last seen: "+f.state+"); the controllers go on with it")
	}
	reason := "not requested: the run stopped first"
	if r.report.PausedBy != "" {
		reason = "not requested: the run paused after " + r.report.PausedBy
	} else if ctx.Err() != nil {
		reason = "not requested: the run was interrupted"
	}
	for i := range r.report.Resources {
		if res := &r.report.Resources[i]; res.Result == Waiting {
			r.set(Item{Kind: res.Kind, Name: res.Name}, NotStarted, reason)
		}
	}
	r.report.Ended = time.Now()
	r.emit(Event{Type: Ended})
}

func (r *runner) emit(e Event) {
	if r.o.Events == nil {
		return
	}
	e.Counts = r.counts
	e.Elapsed = time.Since(r.report.Started)
	r.o.Events(e)
}

// fail records a failure and, with PauseOnFailure, stops new requests.
func (r *runner) fail(it Item, reason string) {
	res := r.set(it, Failed, reason)
	res.End = now()
	delete(r.flying, it)
	r.emit(Event{Type: ItemFailed, Item: it, Reason: reason})
	if r.o.PauseOnFailure && !r.stopped() {
		r.report.PausedBy = fmt.Sprintf("%s failed: %s", it, reason)
		r.emit(Event{Type: Paused, Item: it, Reason: reason})
	}
}

func now() *time.Time {
	t := time.Now().UTC().Truncate(time.Millisecond)
	return &t
}
