package convert_test

import (
	"encoding/json"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/machina-dev/machina/internal/convert"
	"github.com/machina-dev/machina/internal/convert/providers/aws"
	"github.com/machina-dev/machina/internal/convert/providers/azure"
	"github.com/machina-dev/machina/internal/convert/providers/gcp"
	"github.com/machina-dev/machina/internal/convert/providers/openstack"
	"github.com/machina-dev/machina/internal/convert/providers/powervs"
	"github.com/machina-dev/machina/internal/convert/providers/sim"
	"github.com/machina-dev/machina/internal/convert/providers/vsphere"
)

// kindPlumbing are the seven platforms with what their templates report: the word for what a
// providerID names, and whether the template type has metadata to drop.
var kindPlumbing = []struct {
	p        convert.Platform
	instance string
	metadata bool
	pid      string
}{
	{aws.Platform{Region: "us-east-1"}, "instance", true, "aws:///us-east-1a/i-0abc"},
	{azure.Platform{Location: "centralus"}, "virtual machine", true, "azure:///subscriptions/s/resourceGroups/rg/providers/Microsoft.Compute/virtualMachines/vm"},
	{gcp.Platform{Region: "us-central1"}, "instance", true, "gce://project/us-central1-a/vm"},
	{openstack.New(), "server", false, "openstack:///0e4d2f1c"},
	{powervs.New(), "instance", true, "ibmpowervs://tok/tok04/ws/vm"},
	{sim.Platform{Region: "sim-east-1"}, "instance", true, "sim://sim-east-1a/i-1"},
	{vsphere.New(), "VM", true, "vsphere://4210-b5f4"},
}

func TestInfraMachinePlumbing(t *testing.T) {
	for _, tc := range kindPlumbing {
		p := tc.p
		for _, pid := range []string{tc.pid, ""} {
			m := p.NewInfraMachine(nil, pid)
			if gvk := m.GetObjectKind().GroupVersionKind(); gvk != p.InfraMachineGVK() {
				t.Errorf("%s: NewInfraMachine is a %v, want %v", p.Name(), gvk, p.InfraMachineGVK())
			}
			r := &convert.Report{}
			spec, got, ok := p.SplitInfraMachine(m, field.NewPath("spec"), r)
			if !ok || got != pid || spec == nil || len(r.Errors)+len(r.Warnings) > 0 {
				t.Errorf("%s: split of an InfraMachine with providerID %q: %q, %v, %v", p.Name(), pid, got, ok, r)
			}
			if _, _, ok := p.SplitInfraMachine(p.NewInfraMachineTemplate(spec), field.NewPath("spec"), r); ok {
				t.Errorf("%s: a template split as an InfraMachine", p.Name())
			}
		}
		tmpl := p.NewInfraMachineTemplate(nil)
		if gvk := tmpl.GetObjectKind().GroupVersionKind(); gvk != p.InfraMachineTemplateGVK() {
			t.Errorf("%s: NewInfraMachineTemplate is a %v, want %v", p.Name(), gvk, p.InfraMachineTemplateGVK())
		}
		if _, ok := p.SplitInfraMachineTemplate(p.NewInfraMachine(nil, ""), field.NewPath("spec"), &convert.Report{}); ok {
			t.Errorf("%s: an InfraMachine split as a template", p.Name())
		}
	}
}

// A template names no instance and gives its InfraMachines metadata the Machine API cannot
// keep: the first is an error, the second a warning, each under its path.
func TestInfraMachineTemplateReports(t *testing.T) {
	for _, tc := range kindPlumbing {
		p := tc.p
		tmpl := p.NewInfraMachineTemplate(nil)
		raw := `{"spec":{"template":{"metadata":{"labels":{"a":"b"}},"spec":{"providerID":"` + tc.pid + `","instanceID":"i-0abc"}}}}`
		if err := json.Unmarshal([]byte(raw), tmpl); err != nil {
			t.Fatalf("%s: %v", p.Name(), err)
		}
		kind := p.InfraMachineTemplateGVK().Kind
		r := &convert.Report{}
		spec, ok := p.SplitInfraMachineTemplate(tmpl, field.NewPath(kind, "spec"), r)
		if !ok {
			t.Fatalf("%s: the template did not split", p.Name())
		}
		var want []string
		wantWarn := 0
		if tc.metadata {
			wantWarn = 1
			if w := r.Warnings; len(w) != 1 || w[0].Field != kind+".spec.template.metadata" ||
				w[0].Detail != "labels and annotations for the "+p.InfraMachineGVK().Kind+"s are dropped: the Machine API has no InfraMachines to put them on" {
				t.Errorf("%s: warnings %v", p.Name(), w)
			}
		}
		if len(r.Warnings) != wantWarn {
			t.Errorf("%s: warnings %v", p.Name(), r.Warnings)
		}
		want = append(want, kind+`.spec.template.spec.providerID: Invalid value: "`+tc.pid+`": a machine template cannot name one `+tc.instance)
		if p.Name() == "aws" {
			want = append(want, kind+`.spec.template.spec.instanceID: Invalid value: "i-0abc": a machine template cannot name one instance`)
		}
		if len(r.Errors) != len(want) {
			t.Fatalf("%s: errors %v, want %q", p.Name(), r.Errors, want)
		}
		for i, e := range r.Errors {
			if e.Error() != want[i] {
				t.Errorf("%s: error %q, want %q", p.Name(), e.Error(), want[i])
			}
		}
		// What the split returns names no instance any more.
		if _, pid, _ := p.SplitInfraMachine(p.NewInfraMachine(spec, ""), field.NewPath("spec"), &convert.Report{}); pid != "" {
			t.Errorf("%s: the template's spec kept providerID %q", p.Name(), pid)
		}
	}
}

// AWS records the instance ID beside the providerID; a split checks that the two agree.
func TestAWSInstanceID(t *testing.T) {
	p := aws.Platform{Region: "us-east-1"}
	for _, tc := range []struct {
		pid, instanceID string
		warn, err       string
	}{
		{pid: "aws:///us-east-1a/i-0abc", instanceID: "i-0abc"},
		{pid: "aws:///us-east-1a/i-0abc", instanceID: "i-0def", err: `spec.instanceID: Invalid value: "i-0def": does not match providerID aws:///us-east-1a/i-0abc`},
		{pid: "", instanceID: "i-0abc", warn: "spec.instanceID: dropped: without a providerID the Machine API cannot record it"},
		{pid: "aws:///us-east-1a/i-0abc", warn: "spec.instanceID: unset; converting back derives it from the providerID"},
	} {
		m := p.NewInfraMachine(nil, "")
		raw := `{"spec":{"providerID":"` + tc.pid + `","instanceID":"` + tc.instanceID + `"}}`
		if tc.instanceID == "" {
			raw = `{"spec":{"providerID":"` + tc.pid + `"}}`
		}
		if err := json.Unmarshal([]byte(raw), m); err != nil {
			t.Fatal(err)
		}
		r := &convert.Report{}
		spec, pid, ok := p.SplitInfraMachine(m, field.NewPath("spec"), r)
		if !ok || pid != tc.pid {
			t.Errorf("%+v: split gives %q, %v", tc, pid, ok)
		}
		var warn, err string
		if len(r.Warnings) > 0 {
			warn = r.Warnings[0].String()
		}
		if len(r.Errors) > 0 {
			err = r.Errors[0].Error()
		}
		if warn != tc.warn || err != tc.err || len(r.Warnings) > 1 || len(r.Errors) > 1 {
			t.Errorf("%+v: warnings %v, errors %v", tc, r.Warnings, r.Errors)
		}
		// Wrapped again, the AWSMachine gets the instance ID derived from the providerID.
		back, _ := json.Marshal(p.NewInfraMachine(spec, pid))
		var got struct {
			Spec struct {
				InstanceID *string `json:"instanceID"`
			} `json:"spec"`
		}
		if err := json.Unmarshal(back, &got); err != nil {
			t.Fatal(err)
		}
		if want := tc.pid != ""; (got.Spec.InstanceID != nil) != want || want && *got.Spec.InstanceID != "i-0abc" {
			t.Errorf("%+v: wrapped again, instanceID %v", tc, got.Spec.InstanceID)
		}
	}
}
