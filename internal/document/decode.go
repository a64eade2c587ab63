// Package document converts streams of Kubernetes manifests (YAML or JSON, multi-document,
// Lists) between the Machine API and the Cluster API. It is what `machina convert` runs and
// has no I/O of its own: bytes in, objects and a report out. It sits above the provider
// registry (internal/provider), which tells it the platforms and their kinds, and so outside
// the pure conversion library internal/convert.
package document

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"

	configv1 "github.com/openshift/api/config/v1"
	mapiv1 "github.com/openshift/api/machine/v1beta1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kjson "sigs.k8s.io/json"

	"github.com/machina-dev/machina/internal/provider"
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

// coreKinds are the kinds Decode reads whatever the platforms: the two machine APIs and the
// OpenShift Infrastructure object.
var coreKinds = []schema.GroupVersionKind{
	mapiv1.GroupVersion.WithKind("Machine"),
	mapiv1.GroupVersion.WithKind("MachineSet"),
	mapiv1.GroupVersion.WithKind("MachineHealthCheck"),
	clusterv1.GroupVersion.WithKind("Machine"),
	clusterv1.GroupVersion.WithKind("MachineSet"),
	clusterv1.GroupVersion.WithKind("MachineHealthCheck"),
	configv1.GroupVersion.WithKind("Infrastructure"),
}

// builtin is provider.Builtin(), built once: its scheme is costly to build for every call.
var builtin = sync.OnceValue(provider.Builtin)

func orBuiltin(reg *provider.Registry) *provider.Registry {
	if reg == nil {
		return builtin()
	}
	return reg
}

// byName returns reg's providers sorted by name, so messages do not depend on the order
// they were registered in.
func byName(reg *provider.Registry) []provider.Provider {
	ps := reg.All()
	slices.SortFunc(ps, func(a, b provider.Provider) int { return strings.Compare(a.Name, b.Name) })
	return ps
}

// KnownKinds lists the kinds Decode accepts with reg's platforms (the built-in ones when
// reg is nil), a line per group version and platform, for help texts and messages.
func KnownKinds(reg *provider.Registry) []string {
	lines := kindLines(coreKinds[:6])
	for _, p := range byName(orBuiltin(reg)) {
		lines = append(lines, kindLines(p.InfraKinds())...)
	}
	lines = append(lines, kindLines(coreKinds[6:])...)
	return append(lines, "and Lists of these")
}

// kindLines writes gvks as "group/version Kind, Kind", a line per run of one group version.
func kindLines(gvks []schema.GroupVersionKind) []string {
	var lines []string
	for i, gvk := range gvks {
		if i > 0 && gvks[i-1].GroupVersion() == gvk.GroupVersion() {
			lines[len(lines)-1] += ", " + gvk.Kind
			continue
		}
		lines = append(lines, gvk.GroupVersion().String()+" "+gvk.Kind)
	}
	return lines
}

type header struct {
	APIVersion string            `json:"apiVersion"`
	Kind       string            `json:"kind"`
	Items      []json.RawMessage `json:"items"`
}

// maxInputSize bounds the whole input.
const maxInputSize = 256 << 20

// Decode is DecodeWith for the built-in platforms.
func Decode(r io.Reader) ([]Document, error) { return DecodeWith(r, nil) }

// DecodeWith splits YAML or JSON input into documents and decodes each into its typed object:
// the Machine API and Cluster API kinds, the Infrastructure, and the infrastructure kinds of
// reg's platforms (the built-in ones when reg is nil). YAML may hold several documents
// separated by "---"; JSON may be a stream of objects. The first problem is returned as an
// *InputError naming the document.
func DecodeWith(r io.Reader, reg *provider.Registry) ([]Document, error) {
	dec, err := newDecoder(orBuiltin(reg))
	if err != nil {
		return nil, &InputError{Where: "input", Err: err}
	}
	data, err := io.ReadAll(io.LimitReader(r, maxInputSize+1))
	if err != nil {
		return nil, &InputError{Where: "input", Err: err}
	}
	if len(data) > maxInputSize {
		return nil, &InputError{Where: "input", Err: fmt.Errorf("larger than %d bytes", maxInputSize)}
	}
	if t := bytes.TrimSpace(data); len(t) > 0 && t[0] == '{' {
		return dec.jsonStream(t)
	}
	return dec.yamlStream(data)
}

// decoder decodes the kinds one registry's platforms know.
type decoder struct {
	reg    *provider.Registry
	scheme *runtime.Scheme
	kinds  map[schema.GroupVersionKind]bool
}

func newDecoder(reg *provider.Registry) (*decoder, error) {
	s, err := reg.Scheme()
	if err != nil {
		return nil, err
	}
	d := &decoder{reg: reg, scheme: s, kinds: map[schema.GroupVersionKind]bool{}}
	for _, gvk := range coreKinds {
		d.kinds[gvk] = true
	}
	for _, p := range reg.All() {
		for _, gvk := range p.InfraKinds() {
			d.kinds[gvk] = true
		}
	}
	return d, nil
}

func (dec *decoder) yamlStream(data []byte) ([]Document, error) {
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
		d, err := dec.object(js, where, 0)
		if err != nil {
			return nil, err
		}
		docs = append(docs, d...)
	}
	return docs, nil
}

func (dec *decoder) jsonStream(data []byte) ([]Document, error) {
	jd := json.NewDecoder(bytes.NewReader(data))
	var docs []Document
	for n := 1; ; n++ {
		where := fmt.Sprintf("document %d", n)
		var raw json.RawMessage
		if err := jd.Decode(&raw); err != nil {
			if errors.Is(err, io.EOF) {
				return docs, nil
			}
			return nil, &InputError{Where: where, Err: fmt.Errorf("not valid JSON: %w", err)}
		}
		d, err := dec.object(raw, where, 0)
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

func (dec *decoder) object(js []byte, where string, depth int) ([]Document, error) {
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
			d, err := dec.object(item, fmt.Sprintf("%s, item %d", where, i+1), depth+1)
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
	obj, err := dec.newObject(gv.WithKind(h.Kind))
	if err != nil {
		return nil, &InputError{Where: where, Err: err}
	}
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

// newObject returns an empty typed object of a kind this decoder reads.
func (dec *decoder) newObject(gvk schema.GroupVersionKind) (client.Object, error) {
	if !dec.kinds[gvk] {
		return nil, fmt.Errorf("unknown kind %s %s: machina convert reads %s", gvk.GroupVersion(), gvk.Kind, strings.Join(KnownKinds(dec.reg), "; "))
	}
	ro, err := dec.scheme.New(gvk)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", gvk.GroupVersion(), gvk.Kind, err)
	}
	obj, ok := ro.(client.Object)
	if !ok {
		return nil, fmt.Errorf("%s %s: %T is not an object with metadata", gvk.GroupVersion(), gvk.Kind, ro)
	}
	return obj, nil
}
