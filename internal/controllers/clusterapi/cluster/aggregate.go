package cluster

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// source is one object whose condition a Cluster condition aggregates.
type source struct {
	kind, name string
	conditions []metav1.Condition
}

// outcome of an aggregation: the worst state among the sources, and a message naming the
// sources in that state.
type outcome struct {
	// issue: some source is in the abnormal state (False, or True for a negative-polarity
	// condition such as ScalingUp); unknown: none is, but some report Unknown or nothing.
	issue, unknown bool
	message        string
}

// status maps the outcome to a condition status for a positive (or negative) polarity.
func (o outcome) status(negative bool) metav1.ConditionStatus {
	switch {
	case o.unknown && !o.issue:
		return metav1.ConditionUnknown
	case o.issue != negative:
		return metav1.ConditionFalse
	}
	return metav1.ConditionTrue
}

// reason picks the reason for the outcome.
func (o outcome) reason(issueReason, unknownReason, okReason string) string {
	switch {
	case o.issue:
		return issueReason
	case o.unknown:
		return unknownReason
	}
	return okReason
}

// entry is one source in the state being reported, with its condition's message.
type entry struct{ kind, name, message string }

// aggregate merges condition t of sources, as Cluster API's aggregation does: the worst
// state wins, and its message lists, per kind and distinct message, up to three source names
// ("* MachineDeployments md-a, md-b: message"), at most three messages.
func aggregate(sources []source, t string, negative bool) outcome {
	var issues, unknowns []entry
	for _, s := range sources {
		c := meta.FindStatusCondition(s.conditions, t)
		switch {
		case c == nil:
			unknowns = append(unknowns, entry{s.kind, s.name, "Condition " + t + " not yet reported"})
		case c.Status == metav1.ConditionUnknown:
			unknowns = append(unknowns, entry{s.kind, s.name, c.Message})
		case (c.Status == metav1.ConditionTrue) == negative:
			issues = append(issues, entry{s.kind, s.name, c.Message})
		}
	}
	switch {
	case len(issues) > 0:
		return outcome{issue: true, message: listByMessage(issues, "with other issues")}
	case len(unknowns) > 0:
		return outcome{unknown: true, message: listByMessage(unknowns, "with status unknown")}
	}
	return outcome{}
}

// listByMessage groups entries by kind and message: the messages shared by most sources
// first, at most three lines, then how many sources of each kind were left out ("And 2
// Machines with other issues").
func listByMessage(entries []entry, others string) string {
	byKind := map[string]map[string][]string{}
	for _, e := range entries {
		if byKind[e.kind] == nil {
			byKind[e.kind] = map[string][]string{}
		}
		byKind[e.kind][e.message] = append(byKind[e.kind][e.message], e.name)
	}
	var lines []string
	for _, kind := range slices.Sorted(maps.Keys(byKind)) {
		msgs := slices.Collect(maps.Keys(byKind[kind]))
		slices.SortFunc(msgs, func(a, b string) int {
			if d := len(byKind[kind][b]) - len(byKind[kind][a]); d != 0 {
				return d
			}
			return strings.Compare(a, b)
		})
		left := 0
		for _, msg := range msgs {
			names := byKind[kind][msg]
			if len(lines) == 3 {
				left += len(names)
				continue
			}
			slices.Sort(names)
			line := "* " + plural(kind, len(names)) + " " + shortList(names) + ":"
			if msg != "" {
				line += " " + strings.ReplaceAll(msg, "\n", " ")
			}
			lines = append(lines, line)
		}
		if left > 0 {
			lines = append(lines, fmt.Sprintf("And %d %s %s", left, plural(kind, left), others))
		}
	}
	return strings.Join(lines, "\n")
}

// plural names the kind for n objects (the kinds aggregated here take an "s").
func plural(kind string, n int) string {
	if n == 1 {
		return kind
	}
	return kind + "s"
}

// shortList joins the first three names, "a, b, c, ... (2 more)".
func shortList(names []string) string {
	if len(names) <= 3 {
		return strings.Join(names, ", ")
	}
	return fmt.Sprintf("%s, ... (%d more)", strings.Join(names[:3], ", "), len(names)-3)
}
