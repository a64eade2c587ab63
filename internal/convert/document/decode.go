// Package document converts streams of Kubernetes manifests (YAML or JSON, multi-document,
// Lists) between the Machine API and the Cluster API. It is what `machina convert` runs and
// has no I/O of its own: bytes in, objects and a report out.
package document

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	configv1 "github.com/openshift/api/config/v1"
	mapiv1 "github.com/openshift/api/machine/v1beta1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	capav1 "sigs.k8s.io/cluster-api-provider-aws/v2/api/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kjson "sigs.k8s.io/json"

	simv1 "github.com/machina-dev/machina/api/infrastructure/v1alpha1"
)

// Document is one object of the input.
type Document struct {
	// Where names the object's place in the input: "document 2" or "document 2, item 5".
	Where string
	// Object is the decoded, typed object.
	Object client.Object
	// Warnings are decoding remarks (unknown fields) to report with the object.
	Warnings []string
}

// InputError is a problem with the input itself: unparsable, or a kind this tool does not know.
type InputError struct {
	Where string
	Err   error
}

func (e *InputError) Error() string { return e.Where + ": " + e.Err.Error() }
func (e *InputError) Unwrap() error { return e.Err }

// maxDocumentSize bounds a single document, so a runaway input fails cleanly.
const maxDocumentSize = 16 << 20

// known maps the kinds this package reads to constructors of their typed objects.
var known = map[schema.GroupVersionKind]func() client.Object{
	mapiv1.GroupVersion.WithKind("Machine"):               func() client.Object { return &mapiv1.Machine{} },
	mapiv1.GroupVersion.WithKind("MachineSet"):            func() client.Object { return &mapiv1.MachineSet{} },
	mapiv1.GroupVersion.WithKind("MachineHealthCheck"):    func() client.Object { return &mapiv1.MachineHealthCheck{} },
	clusterv1.GroupVersion.WithKind("Machine"):            func() client.Object { return &clusterv1.Machine{} },
	clusterv1.GroupVersion.WithKind("MachineSet"):         func() client.Object { return &clusterv1.MachineSet{} },
	clusterv1.GroupVersion.WithKind("MachineHealthCheck"): func() client.Object { return &clusterv1.MachineHealthCheck{} },
	capav1.GroupVersion.WithKind("AWSMachine"):            func() client.Object { return &capav1.AWSMachine{} },
	capav1.GroupVersion.WithKind("AWSMachineTemplate"):    func() client.Object { return &capav1.AWSMachineTemplate{} },
	capav1.GroupVersion.WithKind("AWSCluster"):            func() client.Object { return &capav1.AWSCluster{} },
	simv1.GroupVersion.WithKind("SimMachine"):             func() client.Object { return &simv1.SimMachine{} },
	simv1.GroupVersion.WithKind("SimMachineTemplate"):     func() client.Object { return &simv1.SimMachineTemplate{} },
	simv1.GroupVersion.WithKind("SimCluster"):             func() client.Object { return &simv1.SimCluster{} },
	configv1.GroupVersion.WithKind("Infrastructure"):      func() client.Object { return &configv1.Infrastructure{} },
}

// KnownKinds lists the kinds Decode accepts, for help texts.
func KnownKinds() []string {
	return []string{
		"machine.openshift.io/v1beta1 Machine, MachineSet, MachineHealthCheck",
		"cluster.x-k8s.io/v1beta2 Machine, MachineSet, MachineHealthCheck",
		"infrastructure.cluster.x-k8s.io/v1beta2 AWSMachine, AWSMachineTemplate, AWSCluster",
		"infrastructure.machina.dev/v1alpha1 SimMachine, SimMachineTemplate, SimCluster",
		"config.openshift.io/v1 Infrastructure",
		"and Lists of these",
	}
}

type header struct {
	APIVersion string            `json:"apiVersion"`
	Kind       string            `json:"kind"`
	Items      []json.RawMessage `json:"items"`
}

// maxInputSize bounds the whole input.
const maxInputSize = 256 << 20

// Decode splits YAML or JSON input into documents and decodes each into its typed object.
// YAML may hold several documents separated by "---"; JSON may be a stream of objects. The
// first problem is returned as an *InputError naming the document.
func Decode(r io.Reader) ([]Document, error) {
	data, err := io.ReadAll(io.LimitReader(r, maxInputSize+1))
	if err != nil {
		return nil, &InputError{Where: "input", Err: err}
	}
	if len(data) > maxInputSize {
		return nil, &InputError{Where: "input", Err: fmt.Errorf("larger than %d bytes", maxInputSize)}
	}
	if t := bytes.TrimSpace(data); len(t) > 0 && t[0] == '{' {
		return decodeJSONStream(t)
	}
	reader := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	var docs []Document
	n := 0
	for {
		chunk, err := reader.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, &InputError{Where: fmt.Sprintf("document %d", n+1), Err: err}
		}
		if isBlank(chunk) {
			continue
		}
		n++
		where := fmt.Sprintf("document %d", n)
		js, err := utilyaml.ToJSON(chunk)
		if err != nil {
			return nil, &InputError{Where: where, Err: fmt.Errorf("not valid YAML: %w", err)}
		}
		d, err := decodeObject(js, where, 0)
		if err != nil {
			return nil, err
		}
		docs = append(docs, d...)
	}
	return docs, nil
}

func decodeJSONStream(data []byte) ([]Document, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	var docs []Document
	for n := 1; ; n++ {
		where := fmt.Sprintf("document %d", n)
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			if errors.Is(err, io.EOF) {
				return docs, nil
			}
			return nil, &InputError{Where: where, Err: fmt.Errorf("not valid JSON: %w", err)}
		}
		d, err := decodeObject(raw, where, 0)
		if err != nil {
			return nil, err
		}
		docs = append(docs, d...)
	}
}

func isBlank(b []byte) bool {
	for _, line := range strings.Split(string(b), "\n") {
		t := strings.TrimSpace(line)
		if t != "" && !strings.HasPrefix(t, "#") && t != "---" {
			return false
		}
	}
	return true
}

func decodeObject(js []byte, where string, depth int) ([]Document, error) {
	var h header
	if err := kjson.UnmarshalCaseSensitivePreserveInts(js, &h); err != nil {
		return nil, &InputError{Where: where, Err: fmt.Errorf("not a Kubernetes object: %w", err)}
	}
	if h.APIVersion == "" || h.Kind == "" {
		return nil, &InputError{Where: where, Err: errors.New("apiVersion and kind are required")}
	}
	if strings.HasSuffix(h.Kind, "List") && depth == 0 {
		var docs []Document
		for i, item := range h.Items {
			d, err := decodeObject(item, fmt.Sprintf("%s, item %d", where, i+1), depth+1)
			if err != nil {
				return nil, err
			}
			docs = append(docs, d...)
		}
		return docs, nil
	}
	gv, err := schema.ParseGroupVersion(h.APIVersion)
	if err != nil {
		return nil, &InputError{Where: where, Err: err}
	}
	gvk := gv.WithKind(h.Kind)
	newObj, ok := known[gvk]
	if !ok {
		return nil, &InputError{Where: where, Err: fmt.Errorf("unknown kind %s %s: machina convert reads %s", h.APIVersion, h.Kind, strings.Join(KnownKinds(), "; "))}
	}
	obj := newObj()
	strict, err := kjson.UnmarshalStrict(js, obj, kjson.DisallowUnknownFields, kjson.DisallowDuplicateFields)
	if err != nil {
		return nil, &InputError{Where: where, Err: fmt.Errorf("%s %s: %w", h.APIVersion, h.Kind, err)}
	}
	d := Document{Where: where, Object: obj}
	for _, e := range strict {
		d.Warnings = append(d.Warnings, "ignored: "+e.Error())
	}
	return []Document{d}, nil
}
