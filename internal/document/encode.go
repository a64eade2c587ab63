package document

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"
)

// applyReady returns obj as a map without the fields an apply must not carry: status and
// the null creationTimestamp of an unsaved object.
func applyReady(obj client.Object) (map[string]any, error) {
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil, err
	}
	delete(m, "status")
	if md, ok := m["metadata"].(map[string]any); ok {
		if v, ok := md["creationTimestamp"]; ok && v == nil {
			delete(md, "creationTimestamp")
		}
	}
	return m, nil
}

// Marshal writes objects for `kubectl apply -f -`: YAML documents separated by "---", or
// for format "json" a single object or a v1 List.
func Marshal(objs []client.Object, format string) ([]byte, error) {
	maps := make([]map[string]any, 0, len(objs))
	for _, o := range objs {
		m, err := applyReady(o)
		if err != nil {
			return nil, err
		}
		maps = append(maps, m)
	}
	switch strings.ToLower(format) {
	case "", "yaml":
		var buf bytes.Buffer
		for i, m := range maps {
			if i > 0 {
				buf.WriteString("---\n")
			}
			b, err := yaml.Marshal(m)
			if err != nil {
				return nil, err
			}
			buf.Write(b)
		}
		return buf.Bytes(), nil
	case "json":
		var v any = map[string]any{"apiVersion": "v1", "kind": "List", "items": maps}
		if len(maps) == 1 {
			v = maps[0]
		}
		b, err := json.MarshalIndent(v, "", "  ")
		if err != nil {
			return nil, err
		}
		return append(b, '\n'), nil
	}
	return nil, fmt.Errorf("unknown output format %q: use yaml or json", format)
}

// WriteReport renders the notes and per-object reports as text, one line per problem, for a
// terminal or a log.
func WriteReport(res *Result) string {
	var b strings.Builder
	for _, n := range res.Notes {
		fmt.Fprintf(&b, "note: %s\n", n)
	}
	for _, r := range res.Reports {
		switch {
		case len(r.Errors) > 0:
			fmt.Fprintf(&b, "%s: not convertible (%d %s)\n", r.Title(), len(r.Errors), plural(len(r.Errors), "error", "errors"))
		case len(r.Warnings) > 0:
			fmt.Fprintf(&b, "%s: converted with %d %s\n", r.Title(), len(r.Warnings), plural(len(r.Warnings), "warning", "warnings"))
		default:
			fmt.Fprintf(&b, "%s: converted\n", r.Title())
		}
		for _, e := range r.Errors {
			fmt.Fprintf(&b, "  error: %s\n", e.Error())
		}
		for _, w := range r.Warnings {
			fmt.Fprintf(&b, "  warning: %s\n", w)
		}
	}
	return b.String()
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
