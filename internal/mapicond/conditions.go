// Package mapicond manipulates Machine API conditions (machine.openshift.io/v1beta1
// Condition, which carries a severity), the way meta.SetStatusCondition does for
// metav1.Condition.
package mapicond

import (
	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Set adds or updates the condition of c.Type. LastTransitionTime changes only when the
// status does. It reports whether anything changed. A False condition without a severity
// gets Warning; a True one never carries a severity.
func Set(conds *[]machinev1beta1.Condition, c machinev1beta1.Condition) bool {
	if c.Status == corev1.ConditionTrue {
		c.Severity = machinev1beta1.ConditionSeverityNone
	} else if c.Severity == "" && c.Status == corev1.ConditionFalse {
		c.Severity = machinev1beta1.ConditionSeverityWarning
	}
	for i := range *conds {
		old := &(*conds)[i]
		if old.Type != c.Type {
			continue
		}
		if old.Status == c.Status && old.Reason == c.Reason && old.Message == c.Message && old.Severity == c.Severity {
			return false
		}
		if old.Status == c.Status {
			c.LastTransitionTime = old.LastTransitionTime
		} else {
			c.LastTransitionTime = metav1.Now()
		}
		*old = c
		return true
	}
	c.LastTransitionTime = metav1.Now()
	*conds = append(*conds, c)
	return true
}

// Get returns the condition of the given type, or nil.
func Get(conds []machinev1beta1.Condition, t machinev1beta1.ConditionType) *machinev1beta1.Condition {
	for i := range conds {
		if conds[i].Type == t {
			return &conds[i]
		}
	}
	return nil
}

// IsTrue reports whether the condition of the given type is present and True.
func IsTrue(conds []machinev1beta1.Condition, t machinev1beta1.ConditionType) bool {
	c := Get(conds, t)
	return c != nil && c.Status == corev1.ConditionTrue
}

// Remove deletes the condition of the given type, reporting whether it was there.
func Remove(conds *[]machinev1beta1.Condition, t machinev1beta1.ConditionType) bool {
	for i := range *conds {
		if (*conds)[i].Type == t {
			*conds = append((*conds)[:i], (*conds)[i+1:]...)
			return true
		}
	}
	return false
}
