package fleet

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"text/tabwriter"
	"time"
)

// Outcome is what happened to one resource.
type Outcome string

// Outcomes. Waiting and Requested last only while a run goes on.
const (
	Waiting    Outcome = "waiting"
	Requested  Outcome = "requested"
	Migrated   Outcome = "migrated"
	Already    Outcome = "already"     // its status named the target API before the run
	Failed     Outcome = "failed"      // refused, unconvertible or out of time
	Blocked    Outcome = "blocked"     // not asked: machina plan says it cannot move yet
	Gone       Outcome = "gone"        // deleted before or while it moved
	InFlight   Outcome = "in-flight"   // asked, not finished when the run stopped
	NotStarted Outcome = "not-started" // never asked: the run stopped first
)

// outcomes is the order the summary lists them in.
var outcomes = []Outcome{Migrated, Already, Failed, Blocked, Gone, InFlight, NotStarted}

// Result is one resource's line in the report.
type Result struct {
	Kind   string     `json:"kind"`
	Name   string     `json:"name"`
	From   string     `json:"from"`
	To     string     `json:"to"`
	Start  *time.Time `json:"start,omitempty"`
	End    *time.Time `json:"end,omitempty"`
	Result Outcome    `json:"result"`
	Reason string     `json:"reason,omitempty"`
}

// Report is a run's record.
type Report struct {
	Namespace   string    `json:"namespace"`
	To          string    `json:"to"`
	MaxInFlight int       `json:"maxInFlight"`
	Started     time.Time `json:"started"`
	Ended       time.Time `json:"ended"`
	// PausedBy names the failure that stopped new requests, if one did.
	PausedBy string `json:"pausedBy,omitempty"`
	// Interrupted is set when the run was stopped (Ctrl-C).
	Interrupted bool     `json:"interrupted,omitempty"`
	Resources   []Result `json:"resources"`
}

// Count returns how many resources had outcome o.
func (r *Report) Count(o Outcome) int {
	n := 0
	for _, res := range r.Resources {
		if res.Result == o {
			n++
		}
	}
	return n
}

// Complete reports whether every resource has the target API now (moved or already there)
// or is gone.
func (r *Report) Complete() bool {
	return !slices.ContainsFunc(r.Resources, func(res Result) bool {
		return res.Result != Migrated && res.Result != Already && res.Result != Gone
	})
}

// WriteFile writes the report as indented JSON.
func (r *Report) WriteFile(path string) error {
	data, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(data, '\n'), 0o644)
}

// WriteSummary prints a table of outcomes by kind, then each resource that did not move with
// its reason.
func (r *Report) WriteSummary(w io.Writer) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprint(tw, "KIND")
	for _, o := range outcomes {
		fmt.Fprintf(tw, "\t%s", o)
	}
	fmt.Fprintln(tw)
	for _, kind := range []string{MachineSet, Machine, MachineHealthCheck} {
		by := map[Outcome]int{}
		for _, res := range r.Resources {
			if res.Kind == kind {
				by[res.Result]++
			}
		}
		if len(by) == 0 {
			continue
		}
		fmt.Fprint(tw, kind)
		for _, o := range outcomes {
			fmt.Fprintf(tw, "\t%d", by[o])
		}
		fmt.Fprintln(tw)
	}
	_ = tw.Flush()
	for _, res := range r.Resources {
		switch res.Result {
		case Failed, Blocked, Gone, InFlight:
			fmt.Fprintf(w, "%s %s: %s\n", Item{Kind: res.Kind, Name: res.Name}, res.Result, res.Reason)
		}
	}
}

// Counts are a run's resources by where they stand.
type Counts struct {
	Total, Done, InFlight, Waiting, Failed int
}

// add counts n resources with outcome o; Blocked, InFlight and NotStarted (decided before the
// run, or left by it) are not part of its progress.
func (c *Counts) add(o Outcome, n int) {
	switch o {
	case Migrated, Already, Gone:
		c.Done += n
	case Requested:
		c.InFlight += n
	case Waiting:
		c.Waiting += n
	case Failed:
		c.Failed += n
	default:
		return
	}
	c.Total += n
}

// EventType says what an Event reports.
type EventType int

// Events of a run.
const (
	WaveStarted EventType = iota
	ItemRequested
	ItemProgress
	ItemMigrated
	ItemFailed
	ItemGone
	Paused
	Ended
)

// Event is one change in a run, with the counts after it.
type Event struct {
	Type    EventType
	Wave    string // WaveStarted: the kind
	Item    Item
	State   string        // ItemProgress
	Reason  string        // ItemFailed, Paused
	Took    time.Duration // ItemMigrated: from request to new authority
	Counts  Counts
	Elapsed time.Duration // since the run began
}
