// Package ocpconfig is what machina's sync and migration groups do with an OpenShift
// cluster's config API (config.openshift.io/v1), as seed 000 asks of an OpenShift component:
//
//   - they run only while the cluster's FeatureGate "cluster" enables MachineAPIMigration
//     (GateState, Gate): until then their controllers do not start, and when the gate is
//     turned off again they stop;
//   - they report their health on the machine-api ClusterOperator, one condition per group
//     (Reporter): MachinaSyncDegraded (resources whose Synchronized condition is False) and
//     MachinaMigrationDegraded (authority migrations open longer than StuckAfter), each False
//     with a reason that says so while the gate keeps the group from running.
//
// Where the cluster serves no FeatureGate "cluster" (plain Kubernetes, the lab by default)
// the groups run without the check, and where there is no ClusterOperator "machine-api" they
// report nothing: machine-api-operator owns that object and machina never creates it.
package ocpconfig

import (
	"context"
	"fmt"
	"slices"
	"strings"

	configv1 "github.com/openshift/api/config/v1"
	"github.com/openshift/api/features"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// The config API objects read, by name.
const (
	FeatureGateName    = "cluster"
	ClusterVersionName = "version"
)

// MachineAPIMigration is the feature gate the sync and migration need.
var MachineAPIMigration = features.FeatureGateMachineAPIMigration

// +kubebuilder:rbac:groups=config.openshift.io,resources=featuregates;clusterversions,verbs=get

// GateState is what the cluster's FeatureGate says of MachineAPIMigration.
type GateState struct {
	// Checked is true when the cluster serves FeatureGate "cluster" (an OpenShift cluster).
	// Without it the groups run as on any Kubernetes cluster.
	Checked bool
	// Enabled: the chosen status.featureGates entry lists MachineAPIMigration as enabled.
	Enabled bool
	// Version of the status.featureGates entry read; empty when none could be chosen.
	Version string
	// Why says in one sentence what was found, for logs and the ClusterOperator condition.
	Why string
}

// Operate reports whether the groups may run: no FeatureGate to check, or the gate enabled.
func (s GateState) Operate() bool { return !s.Checked || s.Enabled }

// Undetermined reports whether a FeatureGate exists but no entry of its status could be
// chosen (no entry yet, or several and none for the cluster's version).
func (s GateState) Undetermined() bool { return s.Checked && s.Version == "" }

// ReadGate reads FeatureGate "cluster" and, when it exists, ClusterVersion "version", with r
// (the API server itself: neither is worth an informer), and applies the rule of FromFeatureGate.
// A kind the API server does not serve counts as an absent object.
func ReadGate(ctx context.Context, r client.Reader) (GateState, error) {
	fg := &configv1.FeatureGate{}
	if err := r.Get(ctx, client.ObjectKey{Name: FeatureGateName}, fg); absent(err) {
		return GateState{Why: fmt.Sprintf("the cluster serves no FeatureGate %q, so MachineAPIMigration is not checked", FeatureGateName)}, nil
	} else if err != nil {
		return GateState{}, fmt.Errorf("reading FeatureGate %q: %w", FeatureGateName, err)
	}
	cv := &configv1.ClusterVersion{}
	desired := ""
	if err := r.Get(ctx, client.ObjectKey{Name: ClusterVersionName}, cv); err == nil {
		desired = cv.Status.Desired.Version
	} else if !absent(err) {
		return GateState{}, fmt.Errorf("reading ClusterVersion %q: %w", ClusterVersionName, err)
	}
	return FromFeatureGate(fg, desired), nil
}

// absent is true for an error that says the object is not there, or its kind is not served.
func absent(err error) bool {
	return apierrors.IsNotFound(err) || meta.IsNoMatchError(err)
}

// FromFeatureGate applies the rule that picks the FeatureGate's status.featureGates entry
// (one per OpenShift version) and reads MachineAPIMigration from it:
//
//  1. the entry of the cluster's version, ClusterVersion "version" status.desired.version
//     (desired is the version the cluster runs or is updating to: machina is not part of the
//     release payload, so it follows the cluster's target, as a payload component does once
//     updated);
//  2. otherwise, when the status has exactly one entry, that one (no ClusterVersion, or an
//     update whose version the config operator has not rendered yet);
//  3. otherwise none: the state is undetermined, and the groups wait as if the gate were off.
//
// The gate is enabled only when the entry lists it under enabled; listed under disabled or not
// listed at all, it is off.
func FromFeatureGate(fg *configv1.FeatureGate, desiredVersion string) GateState {
	s := GateState{Checked: true}
	entries := fg.Status.FeatureGates
	i := slices.IndexFunc(entries, func(d configv1.FeatureGateDetails) bool { return desiredVersion != "" && d.Version == desiredVersion })
	if i < 0 && len(entries) == 1 {
		i = 0
	}
	if i < 0 {
		var versions []string
		for _, d := range entries {
			versions = append(versions, d.Version)
		}
		switch {
		case len(entries) == 0:
			s.Why = fmt.Sprintf("FeatureGate %q lists no feature gates yet, so whether MachineAPIMigration is enabled is not known", fg.Name)
		case desiredVersion == "":
			s.Why = fmt.Sprintf("FeatureGate %q lists feature gates for versions %s and the cluster has no ClusterVersion %q to choose among them, so whether MachineAPIMigration is enabled is not known",
				fg.Name, strings.Join(versions, ", "), ClusterVersionName)
		default:
			s.Why = fmt.Sprintf("FeatureGate %q lists feature gates for versions %s but not for the cluster's version %s, so whether MachineAPIMigration is enabled is not known",
				fg.Name, strings.Join(versions, ", "), desiredVersion)
		}
		return s
	}
	d := entries[i]
	s.Version = d.Version
	s.Enabled = slices.ContainsFunc(d.Enabled, func(a configv1.FeatureGateAttributes) bool { return a.Name == MachineAPIMigration })
	set := string(fg.Spec.FeatureSet)
	if set == "" {
		set = "Default"
	}
	if s.Enabled {
		s.Why = fmt.Sprintf("FeatureGate %q (featureSet %s) enables MachineAPIMigration for version %s", fg.Name, set, d.Version)
	} else {
		s.Why = fmt.Sprintf("FeatureGate %q (featureSet %s) does not enable MachineAPIMigration for version %s", fg.Name, set, d.Version)
	}
	return s
}
