// Package conds computes the v1beta2 conditions the Cluster API controllers derive from other
// objects with Cluster API's util/conditions, so they read as upstream's would: one
// condition of many objects (Machines, MachineSets, MachineDeployments, a control plane)
// merged into their owner's, and a provider object's condition mirrored. The outcome is
// named with the owner's contract reasons.
package conds

import (
	"reflect"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"
)

// Reasons are the merged condition's reasons by outcome: Issue when some object's condition
// is not at its normal status, Unknown when none is but some report Unknown (or nothing),
// OK otherwise.
type Reasons struct{ Issue, Unknown, OK string }

// Polarity says which status of the merged condition type is normal.
type Polarity int

const (
	// Positive means True is normal; Unknown and a missing condition make the result Unknown.
	Positive Polarity = iota
	// Negative means False is normal (ScalingUp, RollingOut, ...), and the merged condition
	// is negative too: True while some object is in the abnormal state.
	Negative
	// Strict means True is normal and anything else, Unknown and missing included, is an
	// issue: for owners whose condition was only ever True or False.
	Strict
)

// Aggregate merges condition t of objs into a condition of type target: the worst state
// wins, and while some object has an issue or an unknown the message lists, per kind and
// distinct message, up to three object names, at most three messages, then how many objects
// were left out. When every object is fine the message is empty (see quietWhenFine). objs
// must not be empty; should the library refuse the merge, the result is Unknown with reason
// InternalError and its error.
func Aggregate[T Object](objs []T, t, target string, p Polarity, r Reasons) metav1.Condition {
	c, err := merge(objs, t, target, p, r)
	if err != nil {
		return internalError(target, err)
	}
	return *c
}

// Remediating is an owner's Remediating condition while Machines of it (not empty) wait for
// their remediation: True with the given reason, the message merging the Machines'
// OwnerRemediated conditions.
func Remediating(machines []*clusterv1.Machine, reason string) metav1.Condition {
	c, err := merge(machines, clusterv1.MachineOwnerRemediatedCondition, clusterv1.RemediatingCondition, Positive,
		Reasons{Issue: reason, Unknown: reason, OK: reason})
	if err != nil {
		return internalError(clusterv1.RemediatingCondition, err)
	}
	c.Status = metav1.ConditionTrue
	return *c
}

// Object is what an aggregation reads of an object: its name, its labels (a control-plane
// Machine goes first in the message) and its conditions; its kind comes from its type meta,
// else from its Go type, as the library names it.
type Object interface {
	conditions.Getter
	GetName() string
	GetLabels() map[string]string
}

func merge[T Object](objs []T, t, target string, p Polarity, r Reasons) (*metav1.Condition, error) {
	priority := conditions.GetDefaultMergePriorityFunc()
	opts := []conditions.DefaultMergeStrategyOption{
		conditions.ComputeReasonFunc(conditions.GetDefaultComputeMergeReasonFunc(r.Issue, r.Unknown, r.OK)),
	}
	switch p {
	case Negative:
		priority = conditions.GetDefaultMergePriorityFunc(t)
		opts = append(opts, conditions.TargetConditionHasPositivePolarity(false))
	case Strict:
		priority = notTrueIsIssue
	}
	opts = append(opts, conditions.GetPriorityFunc(priority))
	return conditions.NewAggregateCondition(inScope(objs, t, priority), t, conditions.TargetConditionType(target),
		conditions.CustomMergeStrategy{MergeStrategy: quietWhenFine{MergeStrategy: conditions.DefaultMergeStrategy(opts...), priority: priority}})
}

// quietWhenFine is the library's default merge strategy with one change: an aggregation
// whose objects are all fine gets no message. The default lists the fine objects' own
// messages then ("* Machines a, b, c: <message>", "And 47 Machines with additional info"),
// which name objects and count them, so the owner's message moved with every child's
// progress while nothing was wrong: in `bench migrate -n 200` each Cluster API MachineSet
// status write carried its whole conditions list (1.4 kB instead of 0.2 kB) as its Machines
// were handed over one by one, and the Cluster's status was rewritten every 2 s throughout
// the handovers (21 writes instead of 12), each Machine's mirrored "the Machine API reports
// it Running with Node ..." appearing and leaving the list. With issues or unknowns the
// message is the library's: those are what a reader needs named (status, reason and the
// listing are unchanged).
type quietWhenFine struct {
	conditions.MergeStrategy
	priority func(metav1.Condition) conditions.MergePriority
}

// Merge implements conditions.MergeStrategy.
func (q quietWhenFine) Merge(op conditions.MergeOperation, cs []conditions.ConditionWithOwnerInfo, types []string) (
	metav1.ConditionStatus, string, string, error) {
	status, reason, message, err := q.MergeStrategy.Merge(op, cs, types)
	if err == nil && op == conditions.AggregateMergeOperation && allFine(cs, q.priority) {
		message = ""
	}
	return status, reason, message, err
}

func allFine(cs []conditions.ConditionWithOwnerInfo, priority func(metav1.Condition) conditions.MergePriority) bool {
	for _, c := range cs {
		if priority(c.Condition) != conditions.InfoMergePriority {
			return false
		}
	}
	return true
}

// inScope picks the objects the merged condition depends on, as views holding only
// condition t. The library copies every condition of every object it is given: for 3000
// Machines of 12 conditions, 15 MB per aggregation, and a Cluster pass makes four. With
// quietWhenFine the result depends only on the objects with an issue or an unknown, or,
// when there are none, on nothing but that (any one object says it), so only those are
// handed over: 0.9 MB with one Machine in seven not ready (BenchmarkAggregate), one view
// when all are fine. TestInScopeChangesNothing checks the result is the library's (with the
// same strategy) on them all.
func inScope[T Object](objs []T, t string, priority func(metav1.Condition) conditions.MergePriority) []*view {
	var bad []*view
	for _, o := range objs {
		c := conditions.Get(o, t)
		// A missing condition counts as Unknown, as the library reports it.
		seen := metav1.Condition{Type: t, Status: metav1.ConditionUnknown}
		if c != nil {
			seen = *c
		}
		if priority(seen) != conditions.InfoMergePriority {
			bad = append(bad, viewOf(o, c))
		}
	}
	if len(bad) == 0 && len(objs) > 0 {
		return []*view{viewOf(objs[0], conditions.Get(objs[0], t))}
	}
	return bad
}

// view is an object as the library reads it for the aggregation of one condition: its kind,
// name and labels, and that condition (none when it has none).
type view struct {
	metav1.TypeMeta
	name   string
	labels map[string]string
	cond   [1]metav1.Condition
	found  bool
}

func viewOf[T Object](o T, c *metav1.Condition) *view {
	v := &view{name: o.GetName(), labels: o.GetLabels()}
	if ro, ok := any(o).(runtime.Object); ok {
		v.Kind = ro.GetObjectKind().GroupVersionKind().Kind
	}
	if v.Kind == "" {
		rt := reflect.TypeOf(o)
		if rt.Kind() == reflect.Pointer {
			rt = rt.Elem()
		}
		v.Kind = rt.Name()
	}
	if c != nil {
		v.cond[0], v.found = *c, true
	}
	return v
}

// GetName, GetLabels and GetConditions are what the library reads; GetObjectKind (from the
// type meta) and DeepCopyObject make the view a runtime.Object, through which it reads the kind.

func (v *view) GetName() string                { return v.name }
func (v *view) GetLabels() map[string]string   { return v.labels }
func (v *view) DeepCopyObject() runtime.Object { c := *v; return &c }
func (v *view) GetConditions() []metav1.Condition {
	if !v.found {
		return nil
	}
	return v.cond[:]
}

// Mirror is condition target mirroring reported, the provider object's condition t (nil when
// it reports none, or one without a status), else fallback. A provider that leaves the
// reason empty gets trueReason or falseReason by status: the API refuses a condition without
// one.
func Mirror(reported *metav1.Condition, t, target, trueReason, falseReason string, fallback conditions.FallbackCondition) metav1.Condition {
	var src conditionList
	if reported != nil && reported.Status != "" {
		c := *reported
		if c.Reason == "" {
			c.Reason = falseReason
			if c.Status == metav1.ConditionTrue {
				c.Reason = trueReason
			}
		}
		src = conditionList{c}
	}
	return *conditions.NewMirrorCondition(src, t, conditions.TargetConditionType(target), fallback)
}

// conditionList is the library's conditions.Getter over a plain list.
type conditionList []metav1.Condition

// GetConditions implements conditions.Getter.
func (l conditionList) GetConditions() []metav1.Condition { return l }

func notTrueIsIssue(c metav1.Condition) conditions.MergePriority {
	if c.Status == metav1.ConditionTrue {
		return conditions.InfoMergePriority
	}
	return conditions.IssueMergePriority
}

func internalError(t string, err error) metav1.Condition {
	return metav1.Condition{Type: t, Status: metav1.ConditionUnknown, Reason: clusterv1.InternalErrorReason, Message: err.Error()}
}
