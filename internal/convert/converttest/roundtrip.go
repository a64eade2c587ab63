package converttest

import (
	"encoding/json"
	"slices"
	"testing"

	mapiv1 "github.com/openshift/api/machine/v1beta1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/machina-dev/machina/internal/convert"
)

// Checker runs round trips for one platform.
type Checker struct {
	Ctx convert.Context
	// DecodeProviderSpec decodes a providerSpec value into the platform's typed struct, so
	// values compare by meaning rather than by JSON spelling.
	DecodeProviderSpec func(*runtime.RawExtension) (any, error)
	// Expected, when set, names warnings a valid input is bound to get that do not change
	// the round trip (vSphere's static addresses, which CAPV hands a new VM in a form RHCOS
	// does not read): a round trip may give them, no others.
	Expected func(convert.Warning) bool
}

func mustJSON(v any) string {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err.Error()
	}
	return string(b)
}

func (ch Checker) clean(t testing.TB, what string, w convert.Warnings, errs error) bool {
	t.Helper()
	if ch.Expected != nil {
		w = slices.DeleteFunc(slices.Clone(w), ch.Expected)
	}
	if errs != nil {
		t.Errorf("%s: unexpected errors: %v", what, errs)
		return false
	}
	if len(w) > 0 {
		t.Errorf("%s: unexpected warnings: %v", what, w.Strings())
		return false
	}
	return true
}

// splitProviderSpec returns spec without its providerSpec value, and the decoded value.
func (ch Checker) splitProviderSpec(t testing.TB, s *mapiv1.MachineSpec) any {
	t.Helper()
	v := s.ProviderSpec.Value
	s.ProviderSpec.Value = nil
	if v == nil {
		return nil
	}
	d, err := ch.DecodeProviderSpec(v)
	if err != nil {
		t.Fatalf("decoding providerSpec: %v", err)
	}
	return d
}

func (ch Checker) equalMAPISpec(t testing.TB, want, got *mapiv1.MachineSpec) bool {
	t.Helper()
	w, g := want.DeepCopy(), got.DeepCopy()
	wp, gp := ch.splitProviderSpec(t, w), ch.splitProviderSpec(t, g)
	ok := true
	if !equality.Semantic.DeepEqual(wp, gp) {
		t.Errorf("providerSpec differs after the round trip\nwant: %s\ngot:  %s", mustJSON(wp), mustJSON(gp))
		ok = false
	}
	if !equality.Semantic.DeepEqual(w, g) {
		t.Errorf("machine spec differs after the round trip\nwant: %s\ngot:  %s", mustJSON(w), mustJSON(g))
		ok = false
	}
	return ok
}

// MAPIMachine converts in to the Cluster API and back and requires the result to equal in.
func (ch Checker) MAPIMachine(t testing.TB, in *mapiv1.Machine) {
	t.Helper()
	capi, w, errs := convert.ToClusterAPIMachine(in, ch.Ctx)
	if !ch.clean(t, "to Cluster API", w, errs.ToAggregate()) {
		t.Logf("input: %s", mustJSON(in))
		return
	}
	again, _, _ := convert.ToClusterAPIMachine(in, ch.Ctx)
	if mustJSON(again) != mustJSON(capi) {
		t.Errorf("conversion is not deterministic")
	}
	back, w, errs := convert.ToMachineAPIMachine(capi.Machine, capi.InfraMachine, ch.Ctx)
	if !ch.clean(t, "back to Machine API", w, errs.ToAggregate()) {
		t.Logf("input: %s\nintermediate: %s", mustJSON(in), mustJSON(capi))
		return
	}
	if !equality.Semantic.DeepEqual(in.ObjectMeta, back.ObjectMeta) || !ch.equalMAPISpec(t, &in.Spec, &back.Spec) {
		t.Errorf("round trip changed the Machine\nin:   %s\nvia:  %s\nback: %s", mustJSON(in), mustJSON(capi), mustJSON(back))
	}
}

// MAPIMachineSet converts in to the Cluster API and back and requires the result to equal in.
func (ch Checker) MAPIMachineSet(t testing.TB, in *mapiv1.MachineSet) {
	t.Helper()
	capi, w, errs := convert.ToClusterAPIMachineSet(in, ch.Ctx)
	if !ch.clean(t, "to Cluster API", w, errs.ToAggregate()) {
		t.Logf("input: %s", mustJSON(in))
		return
	}
	if n := capi.InfraMachineTemplate.GetName(); len(n) > 63 {
		t.Errorf("template name %q is longer than 63 characters", n)
	}
	back, w, errs := convert.ToMachineAPIMachineSet(capi.MachineSet, capi.InfraMachineTemplate, ch.Ctx)
	if !ch.clean(t, "back to Machine API", w, errs.ToAggregate()) {
		t.Logf("input: %s\nintermediate: %s", mustJSON(in), mustJSON(capi))
		return
	}
	inT, backT := in.DeepCopy(), back.DeepCopy()
	specOK := ch.equalMAPISpec(t, &inT.Spec.Template.Spec, &backT.Spec.Template.Spec)
	inT.Spec.Template.Spec, backT.Spec.Template.Spec = mapiv1.MachineSpec{}, mapiv1.MachineSpec{}
	if !specOK || !equality.Semantic.DeepEqual(inT, backT) {
		t.Errorf("round trip changed the MachineSet\nin:   %s\nvia:  %s\nback: %s", mustJSON(in), mustJSON(capi), mustJSON(back))
	}
}

// CAPIMachine converts m and infra to the Machine API and back and requires the result to
// equal the input.
func (ch Checker) CAPIMachine(t testing.TB, m *clusterv1.Machine, infra client.Object) {
	t.Helper()
	mapi, w, errs := convert.ToMachineAPIMachine(m, infra, ch.Ctx)
	if !ch.clean(t, "to Machine API", w, errs.ToAggregate()) {
		t.Logf("input: %s\n%s", mustJSON(m), mustJSON(infra))
		return
	}
	back, w, errs := convert.ToClusterAPIMachine(mapi, ch.Ctx)
	if !ch.clean(t, "back to Cluster API", w, errs.ToAggregate()) {
		t.Logf("input: %s\n%s\nintermediate: %s", mustJSON(m), mustJSON(infra), mustJSON(mapi))
		return
	}
	if !equality.Semantic.DeepEqual(m, back.Machine) || !equality.Semantic.DeepEqual(infra, back.InfraMachine) {
		t.Errorf("round trip changed the Machine\nin:   %s\n      %s\nvia:  %s\nback: %s\n      %s", mustJSON(m), mustJSON(infra), mustJSON(mapi), mustJSON(back.Machine), mustJSON(back.InfraMachine))
	}
}

// CAPIMachineSet is CAPIMachine for MachineSets; tmpl must be named by convert.TemplateName.
func (ch Checker) CAPIMachineSet(t testing.TB, ms *clusterv1.MachineSet, tmpl client.Object) {
	t.Helper()
	mapi, w, errs := convert.ToMachineAPIMachineSet(ms, tmpl, ch.Ctx)
	if !ch.clean(t, "to Machine API", w, errs.ToAggregate()) {
		t.Logf("input: %s\n%s", mustJSON(ms), mustJSON(tmpl))
		return
	}
	back, w, errs := convert.ToClusterAPIMachineSet(mapi, ch.Ctx)
	if !ch.clean(t, "back to Cluster API", w, errs.ToAggregate()) {
		t.Logf("input: %s\n%s\nintermediate: %s", mustJSON(ms), mustJSON(tmpl), mustJSON(mapi))
		return
	}
	if !equality.Semantic.DeepEqual(ms, back.MachineSet) || !equality.Semantic.DeepEqual(tmpl, back.InfraMachineTemplate) {
		t.Errorf("round trip changed the MachineSet\nin:   %s\n      %s\nvia:  %s\nback: %s\n      %s", mustJSON(ms), mustJSON(tmpl), mustJSON(mapi), mustJSON(back.MachineSet), mustJSON(back.InfraMachineTemplate))
	}
}

// fixedPoint converts in by there, the result back by back, and that again by again; the
// second result must equal the first by equal. Nothing may panic, and whatever there accepts
// must convert back. It returns whether in was accepted.
func fixedPoint[I, O, B any](t testing.TB, in I, there func(I) (O, field.ErrorList), back func(O) (B, field.ErrorList), again func(B) (O, field.ErrorList), equal func(first, second O) bool) bool {
	t.Helper()
	out, errs := there(in)
	if len(errs) > 0 {
		// O is a pointer type: a rejected input must give a nil result.
		var none O
		if any(out) != any(none) {
			t.Errorf("errors and a result: %v", errs)
		}
		return false
	}
	b, errs := back(out)
	if len(errs) > 0 {
		t.Errorf("accepted, but its conversion does not convert back: %v\ninput: %s\nvia: %s", errs, mustJSON(in), mustJSON(out))
		return true
	}
	out2, errs := again(b)
	if len(errs) > 0 {
		t.Errorf("second conversion failed: %v\nback: %s", errs, mustJSON(b))
		return true
	}
	if !equal(out, out2) {
		t.Errorf("no fixed point after one round trip\nfirst:  %s\nsecond: %s", mustJSON(out), mustJSON(out2))
	}
	return true
}

func semanticEqual[T any](a, b T) bool { return equality.Semantic.DeepEqual(a, b) }

func (ch Checker) machineToCAPI(m *mapiv1.Machine) (*convert.ClusterAPIMachine, field.ErrorList) {
	out, _, errs := convert.ToClusterAPIMachine(m, ch.Ctx)
	return out, errs
}

func (ch Checker) machineToMAPI(c *convert.ClusterAPIMachine) (*mapiv1.Machine, field.ErrorList) {
	out, _, errs := convert.ToMachineAPIMachine(c.Machine, c.InfraMachine, ch.Ctx)
	return out, errs
}

// StableMAPIMachine checks, for an arbitrary Machine, that conversion does not panic and that
// whatever the converter accepts converts back and then reaches a fixed point: converting the
// result again changes nothing. It returns whether in was accepted.
func (ch Checker) StableMAPIMachine(t testing.TB, in *mapiv1.Machine) bool {
	t.Helper()
	return fixedPoint(t, in, ch.machineToCAPI, ch.machineToMAPI, ch.machineToCAPI, semanticEqual)
}

// StableMAPIMachineSet is StableMAPIMachine for MachineSets.
func (ch Checker) StableMAPIMachineSet(t testing.TB, in *mapiv1.MachineSet) bool {
	t.Helper()
	toCAPI := func(ms *mapiv1.MachineSet) (*convert.ClusterAPIMachineSet, field.ErrorList) {
		out, _, errs := convert.ToClusterAPIMachineSet(ms, ch.Ctx)
		return out, errs
	}
	toMAPI := func(c *convert.ClusterAPIMachineSet) (*mapiv1.MachineSet, field.ErrorList) {
		out, _, errs := convert.ToMachineAPIMachineSet(c.MachineSet, c.InfraMachineTemplate, ch.Ctx)
		return out, errs
	}
	return fixedPoint(t, in, toCAPI, toMAPI, toCAPI, semanticEqual)
}

// StableCAPIMachine is StableMAPIMachine for Cluster API input: no panic, and whatever is
// accepted converts back and reaches a fixed point.
func (ch Checker) StableCAPIMachine(t testing.TB, m *clusterv1.Machine, infra client.Object) bool {
	t.Helper()
	equal := func(first, second *mapiv1.Machine) bool {
		return equality.Semantic.DeepEqual(first.ObjectMeta, second.ObjectMeta) && ch.equalMAPISpec(t, &first.Spec, &second.Spec)
	}
	in := &convert.ClusterAPIMachine{Machine: m, InfraMachine: infra}
	return fixedPoint(t, in, ch.machineToMAPI, ch.machineToCAPI, ch.machineToMAPI, equal)
}
